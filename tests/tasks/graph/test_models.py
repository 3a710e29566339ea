"""Every graph model kind (and GAT's ``original`` variant): shapes, finite outputs on isolated
nodes, gradients, weights."""

from __future__ import annotations

import math

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
        if kind not in ("full_lappe", "full_edge_bias"):  # along the edges, each node's sum to 1
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


def test_full_edge_bias_is_full_lappe_with_the_edges_added_to_the_scores():
    batch = tiny_batch()
    lappe, biased = model_of("full_lappe").eval(), model_of("full_edge_bias").eval()
    missing, unexpected = biased.load_state_dict(lappe.state_dict(), strict=False)
    assert missing == ["edge_bias"] and unexpected == []
    fewer = {**batch, "edge_index": batch["edge_index"][:, :3]}  # same eigvecs, fewer edges
    with torch.no_grad():
        assert not torch.allclose(biased(batch), biased(fewer))  # from the start, it sees them
        biased.edge_bias.fill_(-math.log(N))  # biases of log n - log n = 0: full_lappe
        torch.testing.assert_close(biased(batch), lappe(batch))
    with pytest.raises(ValueError, match="full_edge_bias adds the edges to the scores"):
        GraphModelConfig(kind="full_edge_bias", attention=AttentionConfig(kernel="performer"))


def test_the_edge_bias_and_its_gradient_equal_the_dense_formula():
    """The bias is log n + b_edge at each pair joined by an edge (query = its destination),
    log n + b_self on the diagonal, 0 elsewhere, exactly in float64, and its gradient is the
    dense formula's, with a self loop, a repeated edge and a one-way edge in the list."""
    from attnlab.lab.tasks.graph.models import _bias_places, _edge_bias

    ring = tiny_batch()["edge_index"]
    extra = torch.tensor([[3, 0, 0], [3, 1, 1]])  # a self loop at 3; 0 -> 1 twice (one-way)
    edges = torch.cat([ring, extra], dim=1)
    a = torch.zeros(N, N, dtype=torch.float64)  # the reference: dense adjacency, no diagonal
    a[edges[1], edges[0]] = 1.0
    a.fill_diagonal_(0.0)
    assert a.sum() == ring.shape[1] and a[1, 0] == 1 and a[0, 2] == 0
    b = torch.tensor([[2.0, -1.0], [0.5, 0.25]], dtype=torch.float64, requires_grad=True)
    log_n = math.log(N)
    eye = torch.eye(N, dtype=torch.float64)
    want = (b[0] + log_n).view(2, 1, 1) * a + (b[1] + log_n).view(2, 1, 1) * eye
    pairs = _edge_bias(*_bias_places(edges, N), b, N)
    assert pairs.index.numel() == ring.shape[1] + N  # each edge once, and the diagonal
    got = pairs.dense()
    torch.testing.assert_close(got, want.unsqueeze(0), rtol=0, atol=0)
    upstream = torch.randn(got.shape, dtype=torch.float64)
    (ref,) = torch.autograd.grad((want.unsqueeze(0) * upstream).sum(), b)
    (mine,) = torch.autograd.grad((got * upstream).sum(), b)
    torch.testing.assert_close(mine, ref, rtol=1e-12, atol=1e-12)
    one_way, own = _bias_places(torch.tensor([[0], [1]]), N)  # an edge 0 -> 1
    assert [p for p, o in zip(one_way.tolist(), own.tolist()) if not o] == [1 * N + 0]


@pytest.mark.parametrize("kind", ["full_lappe", "full_edge_bias"])
def test_full_edge_bias_starts_attending_mostly_along_the_edges(kind):
    """Untrained, a node's weight on its d neighbours and itself is near what equal scores give:
    with the edges as a bias from log n, (d + 1) n / ((d + 1) n + n - d - 1) (0.80 on the ring,
    0.52 for an isolated node); without them, (d + 1) / n (0.25, 0.08)."""
    torch.manual_seed(0)
    batch = tiny_batch()
    with torch.no_grad():
        out = model_of(kind).eval()(batch, need_weights=True)
    d = torch.zeros(N).index_add_(
        0, batch["edge_index"][1], torch.ones(batch["edge_index"].shape[1])
    )
    near_n = (d + 1) * N  # the weight of the node and its neighbours, each n times another's
    expected = near_n / (near_n + N - d - 1) if kind == "full_edge_bias" else (d + 1) / N
    for edges, weights in out.attention:  # along the edges and self loops, (E + n, h)
        near = torch.zeros(N, weights.shape[1], dtype=weights.dtype)
        near.index_add_(0, edges[1], weights)  # per query node and head
        torch.testing.assert_close(near.mean(1), expected, atol=0.1, rtol=0)


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


@pytest.mark.parametrize("bias", [True, False])
def test_sparse_aware_linear_is_the_dense_product_with_its_gradients(bias):
    """Sparse COO features go through a CSR product: the dense ``nn.Linear``'s output and
    gradients (float64), and float32 under bf16 autocast, where ``nn.Linear`` would round to
    bf16."""
    from attnlab.lab.tasks.graph.layers import sparse_aware_linear

    gen = torch.Generator().manual_seed(0)
    dense = torch.rand(N, 40, generator=gen, dtype=torch.float64)
    dense[dense < 0.9] = 0.0  # ~10% non-zero, a whole row empty
    dense[4] = 0.0
    layer = torch.nn.Linear(40, 6, bias=bias).double()
    upstream = torch.randn(N, 6, generator=gen, dtype=torch.float64)
    want = layer(dense)
    ref = torch.autograd.grad((want * upstream).sum(), list(layer.parameters()))
    got = sparse_aware_linear(dense.to_sparse(), layer)
    grads = torch.autograd.grad((got * upstream).sum(), list(layer.parameters()))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for g, r in zip(grads, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-12, atol=1e-12)
    assert torch.equal(sparse_aware_linear(dense, layer), want)  # dense: the layer itself
    layer = layer.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = sparse_aware_linear(dense.float().to_sparse(), layer)
    assert low.dtype == torch.float32
    torch.testing.assert_close(low, layer(dense.float()), rtol=1e-6, atol=1e-6)


def test_the_edge_bias_stays_float32_under_autocast_and_trains(monkeypatch):
    """Under bf16 autocast the pair bias's values are float32 (log n + b unrounded: as a dense
    bf16 tensor they were in steps of 1/32 at Cora's log n), and its parameters get a float32
    gradient, though the sparse input layer hands on float32 features."""
    from attnlab.lab.tasks.graph import models

    made = []
    build = models._edge_bias
    monkeypatch.setattr(models, "_edge_bias", lambda *a: made.append(build(*a)) or made[-1])
    batch = tiny_batch()
    batch["x"] = batch["x"].to_sparse()
    model = model_of("full_edge_bias")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(batch).float().sum()
    loss.backward()  # outside autocast, as the trainer runs it
    assert [b.values.dtype for b in made] == [torch.float32, torch.float32]
    assert model.edge_bias.grad is not None and model.edge_bias.grad.dtype == torch.float32
    assert model.edge_bias.grad.abs().sum() > 0
