"""GATConv, GATv2Conv and GCNConv equal PyTorch Geometric's layers given the same weights
(outputs, attention weights and gradients, float64), and refuse bad input by name."""

from __future__ import annotations

import pytest
import torch

from attnlab.graph import GATConv, GATv2Conv, GCNConv

pyg = pytest.importorskip(
    "torch_geometric.nn", reason="torch-geometric (the peers extra) is not installed"
)

F64 = torch.float64
N, FEAT = 25, 7


def graph(seed: int = 0, e: int = 70):
    gen = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, N, (2, e), generator=gen)
    ei[:, :3] = torch.tensor([[4, 5, 6], [4, 5, 6]])  # existing self loops: PyG removes them
    x = torch.randn(N, FEAT, dtype=F64, generator=gen)
    ea = torch.randn(e, 3, dtype=F64, generator=gen)
    return x, ei, ea


def pair(ours, theirs, seed=1, **kw):
    torch.manual_seed(seed)
    peer = theirs(FEAT, 5, **kw).double()
    if getattr(peer, "bias", None) is not None:
        torch.nn.init.normal_(peer.bias)  # PyG starts at zero: make the bias count
    for name, p in peer.named_parameters():
        if name.endswith("lin_l.bias") or name.endswith("lin_r.bias"):
            torch.nn.init.normal_(p)
    return ours.from_pyg(peer), peer


def grads(module, out, g, x) -> dict[str, torch.Tensor]:
    """Gradients of ``out`` (weighted by ``g``) for ``x`` and every parameter, by name."""
    names, params = zip(*module.named_parameters())
    got = torch.autograd.grad(out, [x, *params], g)
    return dict(zip(["x", *names], got))


def assert_same_grads(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], rtol=1e-10, atol=1e-12, msg=name)


GAT_CASES = [
    dict(heads=3),
    dict(heads=3, concat=False),
    dict(heads=2, add_self_loops=False),
    dict(heads=2, edge_dim=3),
    dict(heads=2, edge_dim=3, fill_value=0.5, concat=False),
    dict(heads=1, bias=False, negative_slope=0.1),
    dict(heads=2, dropout=0.5),  # eval mode: no dropout, as PyG
]


@pytest.mark.parametrize(
    "ours, theirs, kw",
    [(GATConv, "GATConv", kw) for kw in GAT_CASES]
    + [(GATv2Conv, "GATv2Conv", kw) for kw in [*GAT_CASES, dict(heads=2, share_weights=True)]],
    ids=str,
)
def test_gat_equals_pyg(ours, theirs, kw):
    layer, peer = pair(ours, getattr(pyg, theirs), **kw)
    layer.eval(), peer.eval()
    x, ei, ea = graph()
    x.requires_grad_(True)
    args = (x, ei, ea) if "edge_dim" in kw else (x, ei)
    out, (used, alpha) = layer(*args, return_attention_weights=True)
    ref, (ref_used, ref_alpha) = peer(*args, return_attention_weights=True)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    assert torch.equal(used, ref_used)
    torch.testing.assert_close(alpha, ref_alpha, rtol=1e-12, atol=1e-12)
    assert alpha.shape == (used.shape[1], kw["heads"]) and (alpha >= 0).all() and (alpha <= 1).all()
    g = torch.randn_like(out)
    assert_same_grads(grads(layer, out, g, x), grads(peer, ref, g, x))


@pytest.mark.parametrize(
    "kw", [dict(), dict(add_self_loops=False), dict(normalize=False), dict(bias=False)], ids=str
)
@pytest.mark.parametrize("weighted", [False, True])
def test_gcn_equals_pyg(kw, weighted):
    layer, peer = pair(GCNConv, pyg.GCNConv, **kw)
    x, ei, _ = graph()
    x.requires_grad_(True)
    w = torch.rand(ei.shape[1], dtype=F64) + 0.1 if weighted else None
    out, ref = layer(x, ei, w), peer(x, ei, w)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(out)
    assert_same_grads(grads(layer, out, g, x), grads(peer, ref, g, x))


def test_the_cached_edge_list_follows_in_place_edits():
    layer, peer = pair(GATConv, pyg.GATConv, heads=2)
    x, ei, _ = graph()
    layer(x, ei)
    ei[0, 10:20] = ei[1, 10:20].flip(0)  # same tensor object, new edges
    torch.testing.assert_close(layer(x, ei), peer(x, ei))
    other = graph(seed=5)[1]
    torch.testing.assert_close(layer(x, other), peer(x, other))


@pytest.mark.parametrize("cls", [GATConv, GATv2Conv])
def test_edge_order_permutes_the_weights_only(cls):
    # Sorted by destination (the kernel's order, no sort needed) or shuffled: the same output,
    # and the weights come back in the order of the edges given.
    torch.manual_seed(0)
    layer = cls(FEAT, 4, heads=2, add_self_loops=False).double()
    x, ei, _ = graph()
    ei = ei[:, torch.argsort(ei[1], stable=True)]
    out, (used, alpha) = layer(x, ei, return_attention_weights=True)
    shuffle = torch.randperm(ei.shape[1])
    out2, (used2, alpha2) = layer(x, ei[:, shuffle], return_attention_weights=True)
    torch.testing.assert_close(out2, out)
    assert torch.equal(used2, ei[:, shuffle])
    torch.testing.assert_close(alpha2, alpha[shuffle])


@pytest.mark.parametrize("cls", [GATConv, GATv2Conv, GCNConv])
def test_sparse_coo_features_equal_dense(cls):
    # Bag-of-words features (Planetoid's, ~1% non-zero) may stay sparse: nn.Linear takes them.
    torch.manual_seed(0)
    layer = cls(FEAT, 4).double()
    x, ei, _ = graph()
    x = x * (torch.rand_like(x) < 0.2)
    dense = layer(x, ei)
    g = torch.randn_like(dense)
    want = torch.autograd.grad(dense, list(layer.parameters()), g)
    sparse = layer(x.to_sparse(), ei)
    torch.testing.assert_close(sparse, dense)
    for a, b in zip(torch.autograd.grad(sparse, list(layer.parameters()), g), want):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("cls", [GATConv, GATv2Conv, GCNConv])
def test_int32_edge_index_gives_the_same_output(cls):
    torch.manual_seed(0)
    layer = cls(FEAT, 4).double()
    x, ei, _ = graph()
    torch.testing.assert_close(layer(x, ei.int()), layer(x, ei))


def test_gcn_weights_follow_the_input_dtype():
    layer, peer = pair(GCNConv, pyg.GCNConv)
    x, ei, _ = graph()
    layer.float()(x.float(), ei)  # caches the graph's weights in float32
    layer.double().load_state_dict(peer.state_dict())  # undo the float32 round trip
    torch.testing.assert_close(layer(x, ei), peer(x, ei), rtol=1e-12, atol=1e-12)


def test_dropout_applies_in_training_only():
    torch.manual_seed(0)
    layer = GATConv(FEAT, 4, heads=2, dropout=0.5).double()
    x, ei, _ = graph()
    layer.eval()
    assert torch.equal(layer(x, ei), layer(x, ei))
    layer.train()
    assert not torch.equal(layer(x, ei), layer(x, ei))


def test_isolated_nodes_without_self_loops_give_the_bias():
    layer = GATConv(FEAT, 4, heads=2, add_self_loops=False).double()
    torch.nn.init.normal_(layer.bias)
    x = torch.randn(5, FEAT, dtype=F64)
    out = layer(x, torch.tensor([[0, 1], [1, 2]]))  # nodes 0, 3, 4 receive nothing
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out[[0, 3, 4]], layer.bias.expand(3, -1))


@pytest.mark.parametrize("cls", [GATConv, GATv2Conv, GCNConv])
@pytest.mark.parametrize(
    "x, ei, match",
    [
        (
            None,
            torch.tensor([[0, 1], [1, 99]]),
            r"edge_index holds node id 99, out of range for 25 nodes",
        ),  # fmt: skip
        (None, torch.tensor([[0, -1], [1, 2]]), r"edge_index holds a negative node id \(-1\)"),
        (
            None,
            torch.tensor([[0, 1, 2]]),
            r"edge_index must have shape \(2, num_edges\).*got shape \(1, 3\)",
        ),  # fmt: skip
        (None, torch.tensor([[0, 1], [1, 2], [2, 3]]), r"got shape \(3, 2\) \(transpose it"),
        (
            None,
            torch.tensor([[0.0, 1.0], [1.0, 2.0]]),
            r"edge_index must be an integer tensor.*float32",
        ),  # fmt: skip
        (None, [[0, 1], [1, 2]], r"edge_index must be an integer tensor.*got list"),
        (
            torch.randn(2, N, FEAT),
            None,
            r"x must have shape \(num_nodes, 7\).*got shape \(2, 25, 7\)",
        ),  # fmt: skip
        (torch.randn(N, 3), None, r"x must have shape \(num_nodes, 7\).*got shape \(25, 3\)"),
        (torch.ones(N, FEAT, dtype=torch.long), None, r"x must be a float tensor.*torch.int64"),
    ],
)
def test_bad_input_is_refused_by_name(cls, x, ei, match):
    layer = cls(FEAT, 4)
    x = torch.randn(N, FEAT) if x is None else x
    ei = torch.tensor([[0, 1], [1, 2]]) if ei is None else ei
    with pytest.raises(ValueError, match=match):
        layer(x, ei)


def test_bad_edge_features_and_arguments_are_refused():
    x, ei, ea = graph()
    with pytest.raises(ValueError, match="edge_attr was given but the layer was built with edge_dim=None"):  # fmt: skip
        GATConv(FEAT, 4).double()(x, ei, ea)
    with pytest.raises(ValueError, match=r"edge_attr must be a float tensor of shape \(num_edges, 2\)"):  # fmt: skip
        GATConv(FEAT, 4, edge_dim=2).double()(x, ei, ea)
    with pytest.raises(ValueError, match="heads must be a positive int, got 0"):
        GATConv(FEAT, 4, heads=0)
    with pytest.raises(ValueError, match=r"edge_weight must be a float tensor of shape \(num_edges,\)"):  # fmt: skip
        GCNConv(FEAT, 4).double()(x, ei, torch.ones(3, dtype=F64))
    with pytest.raises(ValueError, match="expects a torch_geometric GATConv, got GCNConv"):
        GATConv.from_pyg(pyg.GCNConv(3, 4))
