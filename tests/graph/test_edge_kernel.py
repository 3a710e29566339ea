"""The edge-list kernel (``attnlab.backends.edge_ops``) and the ``edges`` backend equal the dense
masked reference path (float64, every score and normalisation, gradients included), give
isolated nodes a defined zero output, and are what ``auto`` picks for sparse graphs."""

from __future__ import annotations

import pytest
import torch

from attnlab import MultiHeadAttention, masks
from attnlab.backends import EdgeListBackend, Problem, run_backend, select_backend
from attnlab.backends.edges import graph_edge_list
from attnlab.functional import NORMALIZATIONS, SCORES, attend, get_normalize, get_score, make_score
from attnlab.graph import edge_attention, edge_softmax

F64 = torch.float64


def random_graph(n: int, e: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (2, e), generator=gen)


def problem(score: str, normalize: str, mask, *, b=2, h=3, n=23, d=5, requires_grad=True):
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(b, h, n, d, dtype=F64, generator=gen) for _ in range(3))
    for t in (q, k, v):
        t.requires_grad_(requires_grad)
    if score == "additive":
        torch.manual_seed(2)
        sc = make_score(score, head_dim=d, heads=h).to(F64)
    else:
        sc = get_score(score)
    return Problem(q, k, v, sc, get_normalize(normalize), mask=mask)


def params(p: Problem) -> list[torch.Tensor]:
    extra = list(p.score.parameters()) if isinstance(p.score, torch.nn.Module) else []
    return [p.q, p.k, p.v, *extra]


@pytest.mark.parametrize("self_loops", [True, False])
@pytest.mark.parametrize("normalize", NORMALIZATIONS.names())
@pytest.mark.parametrize("score", SCORES.names())
def test_edges_backend_equals_the_dense_masked_path(score, normalize, self_loops):
    # ~1.5 in-edges per node with repeats, no forced loops: isolated nodes and duplicates occur.
    n = 23
    mask = masks.graph(random_graph(n, 35), n, self_loops=self_loops)
    p = problem(score, normalize, mask, n=n)
    out, _ = EdgeListBackend()(p)
    ref = attend(p.q, p.k, p.v, score=p.score, normalize=p.normalize, mask=mask).out
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
    g_out = torch.randn_like(out)
    got = torch.autograd.grad(out, params(p), g_out)
    want = torch.autograd.grad(ref, params(p), g_out)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


def test_isolated_nodes_get_zero_output_and_finite_gradients():
    n = 6
    mask = masks.graph(torch.tensor([[0, 1], [1, 2]]), n, self_loops=False)  # 0, 3, 4, 5 isolated
    p = problem("scaled_dot", "softmax", mask, n=n)
    out, _ = EdgeListBackend()(p)
    assert torch.isfinite(out).all()
    assert (out[:, :, [0, 3, 4, 5]] == 0).all()
    grads = torch.autograd.grad(out.square().sum(), [p.q, p.k, p.v])
    assert all(torch.isfinite(g).all() for g in grads)


def test_gradcheck_tiny():
    ei = torch.tensor([[0, 1, 2, 2, 3], [1, 2, 0, 1, 1]])
    q, k, v = (torch.randn(1, 2, 4, 3, dtype=F64, requires_grad=True) for _ in range(3))

    def f(q, k, v):
        return edge_attention(q, k, v, ei, score="scaled_dot", normalize="softmax").out

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_edge_softmax_gradcheck_and_its_backward_equals_autograds():
    dst = torch.tensor([0, 0, 1, 2, 2, 2, 0])
    s = torch.randn(7, 2, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda s: edge_softmax(s, dst, 4), (s,))
    g = torch.randn(7, 2, dtype=F64)
    dense = torch.full((4, 7, 2), float("-inf"), dtype=F64).index_put((dst, torch.arange(7)), s)
    ref = torch.softmax(dense, dim=1)[dst, torch.arange(7)]  # (E, 2), node by node
    torch.testing.assert_close(edge_softmax(s, dst, 4), ref)
    torch.testing.assert_close(
        torch.autograd.grad(edge_softmax(s, dst, 4), s, g)[0], torch.autograd.grad(ref, s, g)[0]
    )


def test_edge_softmax_is_max_subtracted_and_sums_to_one_per_node():
    dst = torch.tensor([0, 0, 1, 2, 2, 2])
    s = torch.tensor([[1000.0], [999.0], [-1000.0], [5.0], [5.0], [5.0]])  # (E, 1)
    w = edge_softmax(s, dst, 4)
    assert torch.isfinite(w).all()
    sums = torch.zeros(4, 1).index_add(0, dst, w)
    torch.testing.assert_close(sums, torch.tensor([[1.0], [1.0], [1.0], [0.0]]))
    torch.testing.assert_close(w[3:], torch.full((3, 1), 1 / 3))


def test_edge_list_of_a_mask_is_the_dense_mask_as_a_set():
    n = 9
    mask = masks.graph(random_graph(n, 30, seed=3), n)
    src, dst = graph_edge_list(mask)
    dense = torch.zeros(n, n, dtype=torch.bool)
    dense[dst, src] = True
    assert torch.equal(dense, mask.adjacency)
    assert len(set(zip(src.tolist(), dst.tolist()))) == src.numel()  # no duplicate
    assert torch.equal(dst, dst.sort().values)  # destination-major


def test_a_large_graph_mask_never_builds_its_dense_adjacency():
    n = 200_000  # a dense mask would be 4e10 booleans
    ei = random_graph(n, 400_000, seed=4)
    mask = masks.graph(ei, n)
    q = torch.randn(1, 2, n, 4)
    p = Problem(q, q, q, get_score("scaled_dot"), get_normalize("softmax"), mask=mask)
    assert isinstance(select_backend(p), EdgeListBackend)
    out, _, name = run_backend("auto", p)
    assert name == "edges" and out.shape == (1, 2, n, 4) and torch.isfinite(out).all()
    assert "_adjacency" not in mask.__dict__


def test_auto_picks_edges_for_sparse_graphs_only():
    n = 100
    sparse = masks.graph(random_graph(n, 150), n)
    dense = masks.graph(random_graph(n, 5000), n)
    p = problem("scaled_dot", "softmax", sparse, n=n, requires_grad=False)
    assert select_backend(p).name == "edges"
    p.mask = dense
    assert select_backend(p).name != "edges"
    p.mask, p.need_weights = sparse, True
    assert select_backend(p).name == "reference"  # weights asked for: the dense path


def test_multihead_attention_on_the_edges_backend_equals_reference():
    torch.manual_seed(0)
    n = 30
    mask = masks.graph(random_graph(n, 60), n)
    mha = MultiHeadAttention(16, 4, backend="edges").double()
    ref = MultiHeadAttention(16, 4, backend="reference").double()
    ref.load_state_dict(mha.state_dict())
    x = torch.randn(2, n, 16, dtype=F64)
    got = mha(x, mask=mask)
    torch.testing.assert_close(got.out, ref(x, mask=mask).out)
    assert got.backend == "edges"


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(mask=masks.causal()), "needs a graph mask"),
        (dict(mask=None), "needs a graph mask.*got no mask"),
        (dict(need_weights=True), "need_weights"),
    ],
)
def test_edges_backend_refuses_what_it_cannot_compute(change, match):
    n = 8
    p = problem("dot", "softmax", masks.graph(random_graph(n, 10), n), n=n)
    for key, val in change.items():
        setattr(p, key, val)
    with pytest.raises(ValueError, match=f"backend 'edges' cannot compute this request: .*{match}"):
        run_backend("edges", p)


def test_edges_backend_dropout_trains_and_eval_is_exact():
    torch.manual_seed(0)
    n = 30
    mask = masks.graph(random_graph(n, 60), n)
    mha = MultiHeadAttention(16, 4, backend="edges", dropout=0.5).double()
    x = torch.randn(2, n, 16, dtype=F64)
    a, b = mha(x, mask=mask).out, mha(x, mask=mask).out
    assert torch.isfinite(a).all() and not torch.equal(a, b)  # dropped differently
    mha.eval()
    ref = MultiHeadAttention(16, 4, backend="reference").double().eval()
    ref.load_state_dict(mha.state_dict())
    torch.testing.assert_close(mha(x, mask=mask).out, ref(x, mask=mask).out)
