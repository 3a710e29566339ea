"""The GAT authors' layer (:class:`OriginalGATConv`): PyG's maths without dropout, its own
dropout pattern in training, Glorot per head, clear errors."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.dropout import dropout
from attnlab.graph import GATConv
from attnlab.lab.tasks.graph.layers import OriginalGATConv

N, F, H, C = 10, 6, 3, 4


def graph() -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded random graph with a self loop and an isolated node (9)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(N, F, generator=gen, dtype=torch.float64)
    src = torch.randint(0, 9, (30,), generator=gen)
    dst = torch.randint(0, 9, (30,), generator=gen)
    return x, torch.stack([src, dst])


@pytest.mark.parametrize("concat", [True, False])
def test_without_dropout_equals_gatconv(concat):
    """In eval mode (no dropout) the layer is GAT's maths: equal to GATConv given the weights,
    attention weights included (float64)."""
    x, edges = graph()
    torch.manual_seed(0)
    ours = OriginalGATConv(F, C, H, concat, dropout=0.6, input_dropout=0.6, score_bias=False)
    ours = ours.double().eval()
    ref = GATConv(F, C, H, concat, dropout=0.6).double().eval()
    with torch.no_grad():
        ref.bias.normal_()  # a non-zero bias
    ours.load_state_dict(ref.state_dict())
    out, (used, alpha) = ours(x, edges, return_attention_weights=True)
    ref_out, (ref_used, ref_alpha) = ref(x, edges, return_attention_weights=True)
    torch.testing.assert_close(out, ref_out)
    # the same edges (self loops appended last), maybe in another order: compare per edge
    key, ref_key = used[0] * N + used[1], ref_used[0] * N + ref_used[1]
    torch.testing.assert_close(alpha[key.argsort()], ref_alpha[ref_key.argsort()])


def test_score_bias_shifts_the_scores_before_the_leaky_relu():
    """The authors' conv1d score layers have biases: alpha_ij = softmax_j LeakyReLU(a_s.Wx_j +
    c_s + a_d.Wx_i + c_d), checked against a dense computation per head (float64, eval). A shift
    is not a no-op (the LeakyReLU bends), and it starts at zero (the layer then equals PyG's)."""
    x, edges = graph()
    edges = torch.unique(edges, dim=1)  # a simple graph: the dense softmax counts an edge once
    torch.manual_seed(0)
    layer = OriginalGATConv(F, C, H).double().eval()
    assert torch.equal(layer.score_bias, torch.zeros(2, H, dtype=torch.float64))
    before = layer(x, edges)
    with torch.no_grad():
        layer.score_bias.copy_(torch.tensor([[0.7, -1.3, 2.0], [-0.4, 0.9, -3.0]]))
    out, (used, alpha) = layer(x, edges, return_attention_weights=True)
    assert (out - before).abs().max() > 1e-3
    h = (x @ layer.lin.weight.T).view(N, H, C)
    s_src = (h * layer.att_src).sum(-1) + layer.score_bias[0]  # (n, H)
    s_dst = (h * layer.att_dst).sum(-1) + layer.score_bias[1]
    adj = torch.zeros(N, N, dtype=torch.bool)
    adj[used[1], used[0]] = True  # row: target i, column: source j
    for k in range(H):
        scores = torch.nn.functional.leaky_relu(s_dst[:, k, None] + s_src[None, :, k], 0.2)
        dense = torch.softmax(scores.masked_fill(~adj, float("-inf")), dim=1)  # (i, j)
        torch.testing.assert_close(alpha[:, k], dense[used[1], used[0]])
        expected = dense @ h[:, k] + layer.bias.view(H, C)[k]
        torch.testing.assert_close(out.view(N, H, C)[:, k], expected)
    assert "score_bias" in dict(layer.named_parameters())  # decayed by the L2 penalty too


@pytest.mark.parametrize("sparse", [False, True])
def test_each_head_draws_its_own_input_mask(sparse):
    """Input x = identity: row i of head k's projection is 0 (input i dropped for that head) or
    W_k's column i / (1 - p); the heads' drop patterns differ (GAT's per-head tf.nn.dropout)."""
    torch.manual_seed(0)
    n, p = 64, 0.5
    layer = OriginalGATConv(n, C, heads=8, input_dropout=p).train()
    x = torch.eye(n)
    h = layer._project(x.to_sparse() if sparse else x)  # (n, H, C)
    weight = layer.lin.weight.detach().view(8, C, n)  # (H, C, F)
    kept = h.detach().abs().sum(-1) > 0  # (n, H)
    expected = weight.permute(2, 0, 1) / (1 - p)  # (n, H, C)
    torch.testing.assert_close(h.detach()[kept], expected[kept])
    patterns = {tuple(kept[:, k].tolist()) for k in range(8)}
    assert len(patterns) == 8
    assert 0.3 < kept.float().mean() < 0.7


def test_values_are_dropped_again():
    """Only self loops (alpha = 1), one head, x = identity: out[i, c] = drop(drop(x)_i W)_c is
    0 or W[c, i] / (1 - p)^2 (both dropouts kept it), and rows mix zeros and non-zeros (the
    value dropout is per channel, the input dropout per input row)."""
    torch.manual_seed(0)
    n, p = 200, 0.5
    layer = OriginalGATConv(n, 8, heads=1, input_dropout=p).train()
    out = layer(torch.eye(n), torch.empty(2, 0, dtype=torch.long)).detach()  # (n, 8)
    weight = layer.lin.weight.detach().T  # (n, 8): row i is what input i projects to (bias 0)
    kept = out != 0
    torch.testing.assert_close(out[kept], weight[kept] / (1 - p) ** 2)
    mixed = kept.any(1) & ~kept.all(1)
    assert mixed.sum() > n // 4
    assert 0.15 < kept.float().mean() < 0.35  # kept by both: (1 - p)^2 = 0.25


def test_sparse_projection_is_the_masked_product():
    """Sparse x in training: head k's projection is (x with its stored entries masked by head
    k's mask) @ W_k^T, the mask drawn as one (H, nnz) dropout of ones; the training forward's
    gradient by gradcheck (the same masks on every call, float64)."""
    x, edges = graph()
    x[x.abs() < 0.8] = 0.0
    sparse = x.to_sparse().coalesce()
    rows, cols = sparse.indices()
    layer = OriginalGATConv(F, C, H, input_dropout=0.5).double().train()
    torch.manual_seed(3)
    h = layer._project(sparse)  # (n, H, C)
    torch.manual_seed(3)
    keep = dropout(torch.ones(H, rows.shape[0], dtype=x.dtype), 0.5)
    weight = layer.lin.weight.detach().view(H, C, F)
    for k in range(H):
        masked = torch.zeros_like(x)
        masked[rows, cols] = sparse.values() * keep[k]
        torch.testing.assert_close(h[:, k].detach(), masked @ weight[k].T)

    def forward(w: torch.Tensor) -> torch.Tensor:  # the whole training forward, same masks
        torch.manual_seed(3)
        return torch.func.functional_call(layer, {"lin.weight": w}, (sparse, edges))

    assert torch.autograd.gradcheck(forward, (layer.lin.weight.detach().clone().requires_grad_(),))


def test_sparse_projection_gradient_reaches_the_entries():
    """Sparse features whose stored values require grad (learned inputs) get theirs, by
    gradcheck (float64, the same masks on every call)."""
    x, _ = graph()
    x[x.abs() < 0.8] = 0.0
    sparse = x.to_sparse().coalesce()
    rows, cols = sparse.indices()
    layer = OriginalGATConv(F, C, H, input_dropout=0.5).double().train()

    def project(values: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(3)
        return layer._project(
            torch.sparse_coo_tensor(sparse.indices(), values, x.shape, check_invariants=True)
        )

    values = sparse.values().detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(project, (values,))


def test_sparse_projection_follows_a_new_graph():
    """The layer keeps the sparse product's structure per graph: another graph's features
    (the same number of entries, other positions) give that graph's product, as a fresh layer
    computes it."""
    x, _ = graph()
    x[x.abs() < 0.8] = 0.0
    other = x.roll(1, dims=0)  # the same entries, in other rows
    layer = OriginalGATConv(F, C, H, input_dropout=0.5).double().train()
    fresh = OriginalGATConv(F, C, H, input_dropout=0.5).double().train()
    fresh.load_state_dict(layer.state_dict())
    layer._project(x.to_sparse())
    torch.manual_seed(5)
    got = layer._project(other.to_sparse())
    torch.manual_seed(5)
    torch.testing.assert_close(got, fresh._project(other.to_sparse()))
    torch.manual_seed(5)
    assert not torch.allclose(got, layer._project(x.to_sparse()))


def test_glorot_per_head():
    torch.manual_seed(0)
    layer = OriginalGATConv(1000, 8, heads=8)
    assert layer.lin.weight.abs().max() <= math.sqrt(6 / (1000 + 8))
    assert layer.lin.weight.abs().max() > 0.9 * math.sqrt(6 / (1000 + 8))  # not PyG's 6/(1000+64)
    bound = math.sqrt(6 / (8 + 1))
    for att in (layer.att_src, layer.att_dst):
        assert att.abs().max() <= bound and att.abs().max() > 0.8 * bound
    assert torch.equal(layer.bias, torch.zeros_like(layer.bias))


def test_isolated_node_is_defined():
    x, edges = graph()
    out = OriginalGATConv(F, C, H).double().eval()(x, edges)
    assert torch.isfinite(out).all() and out.shape == (N, H * C)


@pytest.mark.parametrize(
    ("edges", "match"),
    [(torch.tensor([[0, 1], [2, N]]), "out of range"), (torch.tensor([[0, -1], [1, 2]]), "negative"),
     (torch.tensor([[0.0, 1.0], [1.0, 2.0]]), "integer tensor"),
     (torch.tensor([[0, 1, 2]]), r"shape \(2, num_edges\)")],
)  # fmt: skip
def test_bad_edge_index(edges, match):
    x, _ = graph()
    with pytest.raises(ValueError, match=match):
        OriginalGATConv(F, C, H).double()(x, edges)


def test_bad_arguments():
    with pytest.raises(ValueError, match="input_dropout must be in"):
        OriginalGATConv(F, C, H, input_dropout=1.0)
    x, edges = graph()
    with pytest.raises(ValueError, match="takes no edge_attr"):
        OriginalGATConv(F, C, H).double()(x, edges, torch.ones(edges.shape[1], 1))
