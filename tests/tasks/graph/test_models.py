"""Every graph model kind (and GAT's ``original`` variant): shapes, finite outputs on isolated
nodes, gradients, weights."""

from __future__ import annotations

import pytest
import torch

from attnlab.attention_config import AttentionConfig
from attnlab.lab.tasks.graph import MODEL_KINDS, GraphModelConfig, build_node_model
from attnlab.lab.tasks.graph.models import feature_dropout

N, F, C = 12, 5, 3
# Every kind, and GAT with the authors' layer ("gat/original").
KINDS = [*MODEL_KINDS, "gat/original"]


def tiny_batch(isolated: bool = True) -> dict[str, torch.Tensor]:
    """A ring over nodes 0..8; nodes 9..11 have no edge at all (as CiteSeer's padded ones)."""
    from attnlab.positional import laplacian_eigenvectors

    gen = torch.Generator().manual_seed(0)
    ring = torch.arange(9)
    src = torch.cat([ring, (ring + 1) % 9])
    dst = torch.cat([(ring + 1) % 9, ring])
    edges = torch.stack([src, dst])
    x = torch.rand(N, F, generator=gen)
    if isolated:
        x[-1] = 0.0  # no features either
    return {"x": x, "edge_index": edges, "eigvecs": laplacian_eigenvectors(edges, N, 4)}


def model_of(kind: str):
    kind, _, variant = kind.partition("/")
    cfg = GraphModelConfig(kind=kind, hidden=4, heads=2, lappe_k=4, variant=variant or "pyg")
    return build_node_model(cfg, in_dim=F, num_classes=C)


@pytest.mark.parametrize("kind", KINDS)
def test_shapes_finite_and_gradients(kind):
    torch.manual_seed(0)
    model = model_of(kind)
    batch = tiny_batch()
    logits = model(batch)
    assert logits.shape == (N, C)
    assert torch.isfinite(logits).all()  # isolated nodes included
    logits.sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("kind", KINDS)
def test_eval_deterministic_and_weights(kind):
    model = model_of(kind).eval()
    batch = tiny_batch()
    with torch.no_grad():
        out = model(batch, need_weights=True)
        again = model(batch)
    assert torch.allclose(out.logits, again, atol=1e-6)  # the weights may take another kernel
    if kind in ("mlp", "gcn"):
        assert out.attention == []
        return
    assert len(out.attention) == 2
    for edges, weights in out.attention:
        assert edges.shape[0] == 2 and weights.shape[0] == edges.shape[1]
        assert ((weights >= 0) & (weights <= 1 + 1e-6)).all()
        if kind not in ("full_lappe", "full_bias"):  # along the edges, each node's sum to 1
            sums = torch.zeros(N, weights.shape[1]).index_add_(0, edges[1], weights)
            assert torch.allclose(sums, torch.ones_like(sums), atol=1e-5)


def test_mlp_ignores_edges():
    model = model_of("mlp").eval()
    batch = tiny_batch()
    other = {**batch, "edge_index": batch["edge_index"][:, :3]}
    assert torch.equal(model(batch), model(other))


def test_full_lappe_ignores_edges_beyond_its_encodings():
    model = model_of("full_lappe").eval()
    batch = tiny_batch()
    other = {**batch, "edge_index": batch["edge_index"][:, :3]}  # same eigvecs, fewer edges
    assert torch.equal(model(batch), model(other))


def test_full_bias_is_full_lappe_with_the_edges_added_to_the_scores():
    from attnlab.lab.tasks.graph.models import _adjacency, _edge_bias

    batch = tiny_batch()
    lappe, biased = model_of("full_lappe").eval(), model_of("full_bias").eval()
    missing, unexpected = biased.load_state_dict(lappe.state_dict(), strict=False)
    assert missing == ["edge_bias"] and unexpected == []
    with torch.no_grad():  # zero biases (its start): the same model as full_lappe
        torch.testing.assert_close(biased(batch), lappe(batch))
        biased.edge_bias.copy_(torch.tensor([[[2.0, -1.0], [0.5, 0.0]], [[1.0, 1.0], [0.0, 3.0]]]))
        fewer = {**batch, "edge_index": batch["edge_index"][:, :3]}  # same eigvecs, fewer edges
        assert not torch.allclose(biased(batch), biased(fewer))  # it sees the edges now
    a = _adjacency(batch["edge_index"], N, torch.float64)
    assert a.sum() == batch["edge_index"].shape[1] and a[1, 0] == 1 and a[0, 2] == 0
    one_way = _adjacency(torch.tensor([[0], [1]]), N, torch.float64)  # an edge 0 -> 1
    assert one_way[1, 0] == 1 and one_way.sum() == 1  # query 1 (its destination) sees key 0
    with pytest.raises(ValueError, match="full_bias adds the edges to the scores"):
        GraphModelConfig(kind="full_bias", attention=AttentionConfig(kernel="performer"))
    b = torch.tensor([[2.0, -1.0], [0.5, 0.25]], dtype=torch.float64)  # (edge, self) x heads
    expected = b[0].view(2, 1, 1) * a + b[1].view(2, 1, 1) * torch.eye(N, dtype=torch.float64)
    torch.testing.assert_close(_edge_bias(a, b), expected.unsqueeze(0), rtol=0, atol=0)


def test_graph_attention_sees_only_neighbours():
    """Changing an isolated node's features changes no other node's output."""
    model = model_of("graph_attention").eval()
    batch = tiny_batch()
    other = {**batch, "x": batch["x"].clone()}
    other["x"][10] += 1.0
    a, b = model(batch), model(other)
    keep = torch.arange(N) != 10
    assert torch.allclose(a[keep], b[keep], atol=1e-6)
    assert not torch.allclose(a[10], b[10])


def test_feature_dropout_is_dropout_on_nonzeros():
    torch.manual_seed(0)
    x = torch.zeros(200, 50)
    x[::3, ::7] = 1.0
    out = feature_dropout(x, 0.5, True)
    assert bool((out[x == 0] == 0).all())
    kept = out[x != 0]
    assert set(kept.unique().tolist()) <= {0.0, 2.0}
    assert 0.3 < float((kept > 0).float().mean()) < 0.7
    assert feature_dropout(x, 0.5, False) is x
    assert bool((out[x == 0] == 0).all())


@pytest.mark.parametrize(("field", "value"), [("kind", "transformer"), ("heads", 0),
                                              ("dropout", 1.0), ("variant", "tf")])  # fmt: skip
def test_bad_config(field, value):
    with pytest.raises(ValueError, match=f"model.{field}"):
        GraphModelConfig(**{field: value})


@pytest.mark.parametrize("kind", KINDS)
def test_sparse_features_equal_dense(kind):
    """Planetoid's features travel as a sparse COO tensor: same outputs and gradients."""
    torch.manual_seed(0)
    model = model_of(kind).eval()
    batch = tiny_batch()
    batch["x"][batch["x"] < 0.5] = 0.0
    sparse = {**batch, "x": batch["x"].to_sparse()}
    dense_out = model(batch)
    dense_out.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    sparse_out = model(sparse)
    sparse_out.sum().backward()
    torch.testing.assert_close(sparse_out, dense_out, atol=1e-5, rtol=1e-5)
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(p.grad, g, atol=1e-5, rtol=1e-5)
    model.train()
    assert torch.isfinite(model(sparse)).all()


def test_sparse_feature_dropout_keeps_the_pattern():
    torch.manual_seed(0)
    x = torch.zeros(100, 40)
    x[::2, ::5] = 1.0
    out = feature_dropout(x.to_sparse(), 0.5, True).to_dense()
    assert bool((out[x == 0] == 0).all())
    assert set(out[x != 0].unique().tolist()) <= {0.0, 2.0}


@pytest.mark.parametrize("kind", ["gatv2", "gcn", "mlp"])
def test_original_variant_needs_gat(kind):
    with pytest.raises(
        ValueError, match="model.variant='original' is a GAT layer; it needs model.kind=gat"
    ):
        GraphModelConfig(kind=kind, variant="original")


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_auto_variant_is_gats_own_layer_for_gat_only(kind):
    """The default ``variant=auto``: the authors' layer for ``gat``; every other kind builds,
    with nothing to choose."""
    from attnlab.graph import GATConv
    from attnlab.lab.tasks.graph.layers import OriginalGATConv

    cfg = GraphModelConfig(kind=kind, hidden=4, heads=2, lappe_k=4)
    assert cfg.gat_variant == ("original" if kind == "gat" else "pyg")
    layers = {type(m) for m in build_node_model(cfg, in_dim=12, num_classes=3).modules()}
    assert (OriginalGATConv in layers) == (kind == "gat")
    assert GATConv not in layers
    assert GraphModelConfig(kind="gat", variant="pyg").gat_variant == "pyg"
