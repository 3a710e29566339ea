"""Laplacian-eigenvector positional encodings: exact on a cycle, invariances, sign flips."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.positional import LaplacianPE, laplacian_eigenvectors
from attnlab.positional.laplacian import _sparse_eigenvectors


def cycle(n: int) -> torch.Tensor:
    i = torch.arange(n)
    return torch.stack([i, (i + 1) % n])


def path(n: int) -> torch.Tensor:
    i = torch.arange(n - 1)
    return torch.stack([i, i + 1])


def test_eigenvectors_of_the_laplacian():
    n, k = 10, 4
    edges = path(n)
    vecs = laplacian_eigenvectors(edges, n, k).double()
    adj = torch.zeros(n, n, dtype=torch.float64)
    adj[edges[1], edges[0]] = adj[edges[0], edges[1]] = 1.0
    d = adj.sum(1).rsqrt()
    lap = torch.eye(n, dtype=torch.float64) - d[:, None] * adj * d
    expected = torch.linalg.eigvalsh(lap)[1 : k + 1]
    for col in range(k):
        v = vecs[:, col]
        torch.testing.assert_close(lap @ v, expected[col] * v, atol=1e-5, rtol=0)
        assert v.norm().item() == pytest.approx(1.0, abs=1e-5)


def test_cycle_eigenvalue_known():
    """The normalised Laplacian of a cycle of n has eigenvalues 1 - cos(2 pi m / n)."""
    n = 12
    edges = cycle(n)
    v = laplacian_eigenvectors(edges, n, 1)[:, 0].double()
    shifted = torch.roll(v, 1) + torch.roll(v, -1)
    torch.testing.assert_close(v - shifted / 2, (1 - math.cos(2 * math.pi / n)) * v, atol=1e-5,
                               rtol=0)  # fmt: skip


def test_undirected_and_duplicates_give_the_same():
    edges = path(8)
    both = torch.cat([edges, edges.flip(0), edges, torch.tensor([[3], [3]])], dim=1)
    torch.testing.assert_close(laplacian_eigenvectors(edges, 8, 3),
                               laplacian_eigenvectors(both, 8, 3))  # fmt: skip


def test_padded_when_k_exceeds_the_graph_and_isolated_nodes_finite():
    vecs = laplacian_eigenvectors(path(3), 5, 8)  # nodes 3, 4 isolated
    assert vecs.shape == (5, 8) and torch.isfinite(vecs).all()
    assert torch.equal(vecs[:, 4:], torch.zeros(5, 4))


def test_sparse_path_spans_the_same_space():
    n, k = 30, 3
    edges = cycle(n)
    src, dst = torch.cat([edges[0], edges[1]]), torch.cat([edges[1], edges[0]])
    sparse = _sparse_eigenvectors(src, dst, n, k + 1)[:, 1 : k + 1]
    dense = laplacian_eigenvectors(edges, n, 5).double()  # eigenvalue pairs: compare subspaces
    proj = dense @ dense.T
    torch.testing.assert_close(proj @ sparse, sparse, atol=1e-6, rtol=0)


@pytest.mark.parametrize(("args", "match"), [((torch.zeros(3, 4).long(), 4, 2), "edge_index"),
                                             ((path(3).float(), 3, 2), "integer"),
                                             ((path(3), 2, 2), "node ids"),
                                             ((path(3), 3, 0), "k must")])  # fmt: skip
def test_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        laplacian_eigenvectors(*args)


def test_module_flips_signs_in_training_only():
    torch.manual_seed(0)
    pe = LaplacianPE(4, 6)
    vecs = laplacian_eigenvectors(cycle(9), 9, 4)
    x = torch.zeros(9, 6)
    pe.eval()
    assert torch.equal(pe(x, vecs), pe(x, vecs))
    pe.train()
    outs = {tuple(pe(x, vecs)[0].tolist()) for _ in range(20)}
    assert len(outs) > 1
    with pytest.raises(ValueError, match="eigvecs"):
        pe(x, vecs[:, :3])
