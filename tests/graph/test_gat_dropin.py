"""GATConv and GATv2Conv as drop-in replacements for PyTorch Geometric's (issue 38): the inputs
and outputs PyG's own GAT tests exercise (bipartite pairs, ``size``, sparse adjacencies,
``residual``, the attention weights' format, empty graphs, TorchScript), then the same numbers as
PyG on the same weights for every configuration, where torch_geometric is installed."""

from __future__ import annotations

import inspect

import pytest
import torch

from attnlab.graph import GATConv, GATv2Conv

F64 = torch.float64
LAYERS = [GATConv, GATv2Conv]
pytestmark = [  # torch's notes on its sparse tensors (PyG's and ours)
    pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state"),
    pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled"),
]
# Four sources, two of them (0, 1) also destinations; node 0 has a self loop already.
EDGES = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])


def features(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, dtype=F64, generator=torch.Generator().manual_seed(seed))


def build(cls, in_channels=8, **kw):
    torch.manual_seed(0)
    layer = cls(in_channels, 32, heads=2, **kw).double()
    if layer.bias is not None:
        torch.nn.init.normal_(layer.bias)  # make the bias count
    return layer


def adjacency_t(edge_index: torch.Tensor, n_src: int, n_dst: int, layout=torch.sparse_csr):
    """PyG's ``adj.t()``: ``(n_dst, n_src)``, entry ``[i, j]`` the edge ``j -> i``."""
    ones = torch.ones(edge_index.shape[1])
    adj_t = torch.sparse_coo_tensor(edge_index.flip(0), ones, (n_dst, n_src), check_invariants=True)
    adj_t = adj_t.coalesce()
    return {torch.sparse_coo: adj_t, torch.sparse_csr: adj_t.to_sparse_csr(),
            torch.sparse_csc: adj_t.to_sparse_csc()}[layout]  # fmt: skip


def dense_weights(edges: torch.Tensor, alpha: torch.Tensor, n_dst: int, n_src: int):
    """``(n_dst, n_src, H)`` with the weight of edge ``j -> i`` at ``[i, j]``."""
    out = alpha.new_zeros(n_dst, n_src, alpha.shape[1])
    out[edges[1], edges[0]] = alpha
    return out


# ---- inputs ----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", LAYERS)
@pytest.mark.parametrize("residual", [False, True])
def test_edge_list_size_and_sparse_adjacency_agree(cls, residual):
    layer, x = build(cls, residual=residual), features(4, 8)
    out = layer(x, EDGES)
    assert out.shape == (4, 64)
    torch.testing.assert_close(layer(x, EDGES, size=(4, 4)), out)
    for layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
        torch.testing.assert_close(layer(x, adjacency_t(EDGES, 4, 4, layout)), out)


@pytest.mark.parametrize("cls", LAYERS)
def test_residual_adds_the_projected_destination_features(cls):
    plain, skip = build(cls), build(cls, residual=True)
    skip.load_state_dict(plain.state_dict() | {"res.weight": skip.res.weight}, strict=True)
    x = features(4, 8)
    torch.testing.assert_close(skip(x, EDGES) - plain(x, EDGES), x @ skip.res.weight.t())
    mean = build(cls, residual=True, concat=False)
    assert mean.res.weight.shape == (32, 8) and mean(x, EDGES).shape == (4, 32)


@pytest.mark.parametrize("cls", LAYERS)
@pytest.mark.parametrize("residual", [False, True])
def test_bipartite_pair_input(cls, residual):
    layer = build(cls, (8, 16), residual=residual)
    assert repr(layer) == f"{cls.__name__}((8, 16), 32, heads=2)"
    x_src, x_dst = features(4, 8), features(2, 16, seed=1)
    out = layer((x_src, x_dst), EDGES)
    assert out.shape == (2, 64)
    torch.testing.assert_close(layer((x_src, x_dst), EDGES, size=(4, 2)), out)
    torch.testing.assert_close(layer((x_src, x_dst), adjacency_t(EDGES, 4, 2)), out)
    if cls is GATConv:  # no destination features: the number of destinations from size or adj
        alone = layer((x_src, None), EDGES, size=(4, 2))
        assert alone.shape == (2, 64)
        torch.testing.assert_close(layer((x_src, None), adjacency_t(EDGES, 4, 2)), alone)
    else:  # GATv2's score needs them
        with pytest.raises(ValueError, match=r"x=\(x_src, None\) is not supported"):
            layer((x_src, None), EDGES)


@pytest.mark.parametrize("cls", LAYERS)
def test_attention_weights_as_pyg_returns_them(cls):
    layer, x = build(cls), features(4, 8)
    out = layer(x, EDGES)
    got, (used, alpha) = layer(x, EDGES, return_attention_weights=True)
    torch.testing.assert_close(got, out)
    assert used.shape == (2, 7) and alpha.shape == (7, 2)  # loop (0, 0) replaced, 4 loops added
    assert alpha.min() >= 0 and alpha.max() <= 1
    sums = alpha.new_zeros(4, 2).index_add(0, used[1], alpha)
    torch.testing.assert_close(sums, torch.ones(4, 2, dtype=F64))
    assert torch.equal(layer(x, EDGES, return_attention_weights=False), out)  # PyG: truthy
    want = dense_weights(used, alpha, 4, 4)
    for layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
        got, (adj, values) = layer(x, adjacency_t(EDGES, 4, 4, layout), return_attention_weights=True)  # fmt: skip
        torch.testing.assert_close(got, out)
        assert adj.layout == layout and adj.shape == (4, 4, 2) and adj._nnz() == 7
        torch.testing.assert_close(adj.to_dense(), want)
        assert torch.equal(adj.values(), values)


@pytest.mark.parametrize("cls", LAYERS)
@pytest.mark.parametrize("kw", [{}, {"residual": True}, {"add_self_loops": False}])
@pytest.mark.parametrize("sparse", [False, True])
def test_empty_graph(cls, kw, sparse):
    layer = build(cls, **kw)
    x = torch.zeros(0, 8, dtype=F64, requires_grad=True)
    edges = adjacency_t(EDGES[:, :0], 0, 0) if sparse else EDGES[:, :0]
    out = layer(x, edges)
    assert out.shape == (0, 64)
    out.sum().backward()
    assert x.grad.shape == (0, 8)


@pytest.mark.parametrize("cls", LAYERS)
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")
def test_torchscript_is_refused_by_name(cls):
    layer = build(cls)

    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = layer

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
            return self.conv(x, edge_index)

    for module in (layer, Holder()):
        with pytest.raises(RuntimeError, match=rf"{cls.__name__} cannot be compiled with torch.jit.script.*torch.compile"):  # fmt: skip
            torch.jit.script(module)


class SparseTensor:  # stands in for torch_sparse.SparseTensor (same class name)
    pass


@pytest.mark.parametrize("cls", LAYERS)
def test_what_is_not_supported_is_refused_with_the_fix(cls):
    x = features(4, 8)
    for kw, error, match in [
        ({"normalize": True}, ValueError, "normalize=True is not supported"),
        ({"aggr": "mean"}, ValueError, r"aggr='mean' is not supported.*aggr='add'"),
        ({"flow": "target_to_source"}, ValueError, r"edge_index.flip\(0\)"),
        ({"colour": 1}, TypeError, "unexpected keyword argument 'colour'"),
    ]:
        with pytest.raises(error, match=match):
            cls(8, 4, **kw)
    with pytest.raises(ValueError, match=r"in_channels=-1: PyG's lazy -1.*pass the number"):
        cls(-1, 4)
    cls(8, 4, aggr="add", flow="source_to_target", decomposed_layers=2)  # same maths: accepted
    layer = build(cls, edge_dim=3)
    with pytest.raises(ValueError, match=r"torch_sparse.SparseTensor.*to_torch_sparse_csr_tensor"):  # fmt: skip
        layer(x, SparseTensor())
    with pytest.raises(ValueError, match="edge_attr with a sparse adjacency"):
        layer(x, adjacency_t(EDGES, 4, 4), features(4, 3))
    with pytest.raises(ValueError, match=r"size=\(4, 3\).*says 3 destination nodes but x has 4 rows"):  # fmt: skip
        layer(x, EDGES, size=(4, 3))
    with pytest.raises(ValueError, match=r"disagrees with edge_index .*shape \(4, 4\)"):
        layer(x, adjacency_t(EDGES, 4, 4), size=(4, 2))
    bip = build(cls, (8, 16))
    with pytest.raises(ValueError, match=r"row 1 \(the destinations\) holds node id 1, out of range for 1"):  # fmt: skip
        bip((x, features(1, 16)), EDGES)
    with pytest.raises(ValueError, match=r"x\[1\] \(destination features\) must have shape \(num_nodes, 16\)"):  # fmt: skip
        bip((x, features(2, 8)), EDGES)


# ---- the same numbers as PyG -----------------------------------------------------------------
@pytest.fixture(scope="module")
def pyg():
    return pytest.importorskip(
        "torch_geometric.nn", reason="torch-geometric (the peers extra) is not installed"
    )


CONFIGS = [
    dict(heads=3),
    dict(heads=3, concat=False),
    dict(heads=2, add_self_loops=False),
    dict(heads=2, edge_dim=3, residual=True),
    dict(heads=2, residual=True, concat=False, fill_value=0.5),
    dict(heads=2, in_channels=(8, 6)),
    dict(heads=2, in_channels=(8, 6), residual=True, edge_dim=3),
    dict(heads=2, edge_dim=3, fill_value="mul"),
    dict(heads=2, edge_dim=3, fill_value=torch.tensor([0.5, -1.0, 2.0], dtype=F64)),
]
V2_CONFIGS = [dict(heads=2, share_weights=True), dict(heads=2, share_weights=True, residual=True)]


@pytest.mark.parametrize(
    "cls, kw", [(GATConv, kw) for kw in CONFIGS] + [(GATv2Conv, kw) for kw in CONFIGS + V2_CONFIGS],
    ids=lambda v: v.__name__ if isinstance(v, type) else str(v),
)  # fmt: skip
def test_equals_pyg_on_the_same_weights(pyg, cls, kw):
    kw = dict(kw)
    in_channels = kw.pop("in_channels", 8)
    torch.manual_seed(1)
    peer = getattr(pyg, cls.__name__)(in_channels, 5, **kw).double()
    for p in peer.parameters():
        torch.nn.init.normal_(p)  # zero biases and small weights would hide mistakes
    layer = cls.from_pyg(peer).eval()
    peer.eval()
    sd = layer.state_dict()
    assert sd.keys() == peer.state_dict().keys()
    assert all(torch.equal(sd[k], v) for k, v in peer.state_dict().items())
    bipartite = isinstance(in_channels, tuple)
    n_dst = 5 if bipartite else 9
    gen = torch.Generator().manual_seed(2)
    edges = torch.stack([torch.randint(0, 9, (30,), generator=gen), torch.randint(0, n_dst, (30,), generator=gen)])  # fmt: skip
    edges = torch.cat([edges, torch.tensor([[3, 4], [3, 4]])], dim=1)  # self loops PyG removes
    edges = torch.unique(edges, dim=1)  # a set, so the sparse adjacency holds the same edges
    x = (features(9, 8), features(5, 6, seed=1)) if bipartite else features(9, 8)
    ea = features(edges.shape[1], 3, seed=3) if "edge_dim" in kw else None
    out, (used, alpha) = layer(x, edges, ea, return_attention_weights=True)
    ref, (ref_used, ref_alpha) = peer(x, edges, ea, return_attention_weights=True)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    assert torch.equal(used, ref_used)
    torch.testing.assert_close(alpha, ref_alpha, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(out)
    ours, theirs = dict(layer.named_parameters()), dict(peer.named_parameters())
    assert ours.keys() == theirs.keys()
    grads = torch.autograd.grad(out, list(ours.values()), g)
    ref_grads = torch.autograd.grad(ref, [theirs[name] for name in ours], g)
    for name, grad, ref_grad in zip(ours, grads, ref_grads):
        torch.testing.assert_close(grad, ref_grad, rtol=1e-10, atol=1e-12, msg=name)
    if ea is None:  # PyG's sparse path: its CSR adjacency in, the weights as a CSR tensor out
        adj_t = adjacency_t(edges, 9, n_dst)
        out, (adj, alpha) = layer(x, adj_t, return_attention_weights=True)
        ref, (ref_adj, ref_alpha) = peer(x, adj_t, return_attention_weights=True)
        torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
        assert torch.equal(adj.crow_indices(), ref_adj.crow_indices())
        assert torch.equal(adj.col_indices(), ref_adj.col_indices())
        torch.testing.assert_close(alpha, ref_alpha, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls", LAYERS)
def test_the_signatures_are_pygs(pyg, cls):
    peer = getattr(pyg, cls.__name__)
    ours, theirs = inspect.signature(cls.__init__), inspect.signature(peer.__init__)
    assert [(p.name, p.default) for p in ours.parameters.values()] == [
        (p.name, p.default) for p in theirs.parameters.values()
    ]
    ours, theirs = inspect.signature(cls.forward), inspect.signature(peer.forward)
    pos = [p.name for p in ours.parameters.values() if p.kind != p.KEYWORD_ONLY]
    assert pos == list(theirs.parameters)  # GATv2Conv: size is keyword-only, PyG has none
    assert all(ours.parameters[n].default == theirs.parameters[n].default for n in pos[3:])


@pytest.mark.parametrize("cls", LAYERS)
def test_bipartite_loops_with_more_destinations_than_sources(pyg, cls):
    # Loops join node i to node i for i < min(n_src, n_dst) = 3, their features the mean of
    # the node's incoming edges' (PyG fails with an index error here): equal to PyG without
    # self loops on the edges plus those loops, built by hand.
    torch.manual_seed(1)
    peer = getattr(pyg, cls.__name__)((8, 6), 5, heads=2, edge_dim=2).double()
    layer = cls.from_pyg(peer)
    peer.add_self_loops = False
    x = (features(3, 8), features(5, 6, seed=1))
    edges, ea = torch.tensor([[0, 1, 2, 2, 0], [4, 0, 0, 3, 1]]), features(5, 2, seed=2)
    loops = torch.arange(3).expand(2, -1)
    mean = torch.stack([ea[1:3].mean(0), ea[4], torch.zeros(2, dtype=F64)])  # into 0, 1, 2
    ref = peer(x, torch.cat([edges, loops], 1), torch.cat([ea, mean]))
    torch.testing.assert_close(layer(x, edges, ea), ref, rtol=1e-12, atol=1e-12)
