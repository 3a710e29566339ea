r"""Laplacian-eigenvector positional encodings of graph nodes (Dwivedi & Bresson 2020).

A graph has no order, but its Laplacian's eigenvectors are the graph's "Fourier modes": the
ones of the smallest non-zero eigenvalues vary slowly along edges, so node ``i``'s entries in
them place it in the graph as sinusoids place a token in a sequence. With them, full
self-attention that never sees an edge still knows which nodes are near each other.

.. math::
    L = I - D^{-1/2} A D^{-1/2} = U \Lambda U^\top, \qquad
    \mathrm{pe}(i) = (U_{i,1}, \dots, U_{i,k})

with the eigenvalues ascending and the first (trivial) eigenvector dropped. An eigenvector is
defined up to its sign (and, for repeated eigenvalues, up to a rotation), so :class:`LaplacianPE`
flips each one's sign at random in training, as Dwivedi et al. do, to make the model
sign-invariant.

Not in :data:`attnlab.positional.POSITIONAL`: the encoding is a function of a graph, not of a
position index, so it takes the eigenvectors as an input rather than a length.

Legend: ``n`` nodes, ``k`` eigenvectors, ``b`` batch.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["LaplacianPE", "laplacian_eigenvectors"]

# Above this many nodes a dense eigendecomposition (O(n^3), n^2 memory) gives way to Lanczos.
_DENSE_MAX_NODES = 6000


def laplacian_eigenvectors(edge_index: Tensor, num_nodes: int, k: int) -> Tensor:
    """The ``k`` eigenvectors of the smallest non-trivial eigenvalues of the symmetric
    normalised Laplacian ``I - D^{-1/2} A D^{-1/2}`` of the undirected graph ``edge_index``.

    Args:
        edge_index: ``(2, E)`` integer ``(source, destination)`` pairs; made symmetric, self
            loops and duplicates ignored.
        num_nodes: ``n``; isolated nodes get ``L_ii = 1`` (their rows of ``D^{-1/2}`` are 0).
        k: how many eigenvectors; fewer than ``k`` non-trivial ones (``n <= k``) are padded
            with zero columns.

    Returns:
        ``(n, k)`` float32, columns by ascending eigenvalue, each of unit norm, with a
        deterministic sign (its largest-magnitude entry positive).

    Raises:
        ValueError: a bad ``edge_index`` or ``k``.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if not isinstance(num_nodes, int) or num_nodes < 1:
        raise ValueError(f"num_nodes must be a positive int, got {num_nodes!r}")
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.shape[0] != 2:
        shape = tuple(edge_index.shape) if isinstance(edge_index, Tensor) else type(edge_index)
        raise ValueError(f"edge_index: expected a (2, E) integer tensor, got {shape}")
    if edge_index.is_floating_point() or edge_index.dtype == torch.bool:
        raise ValueError(f"edge_index: expected an integer tensor, got {edge_index.dtype}")
    if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
        raise ValueError(f"edge_index: node ids must lie in 0..{num_nodes - 1}")
    src, dst = edge_index.cpu().long()
    keep = src != dst
    src, dst = torch.cat([src[keep], dst[keep]]), torch.cat([dst[keep], src[keep]])
    if num_nodes <= _DENSE_MAX_NODES:
        adj = torch.zeros(num_nodes, num_nodes, dtype=torch.float64)
        adj[dst, src] = 1.0  # duplicates collapse
        deg = adj.sum(1)
        inv_sqrt = torch.where(deg > 0, deg.clamp_min(1.0).rsqrt(), torch.zeros_like(deg))
        lap = torch.eye(num_nodes, dtype=torch.float64) - inv_sqrt[:, None] * adj * inv_sqrt
        _, vecs = torch.linalg.eigh(lap)  # ascending eigenvalues
    else:
        vecs = _sparse_eigenvectors(src, dst, num_nodes, k + 1)
    vecs = vecs[:, 1 : k + 1]
    # A deterministic sign: the same graph always gives the same encoding.
    cols = torch.arange(vecs.shape[1])
    pivot = vecs[vecs.abs().argmax(0), cols]  # each column's largest-magnitude entry
    vecs = vecs * torch.where(pivot < 0, -1.0, 1.0).to(vecs.dtype)
    out = torch.zeros(num_nodes, k, dtype=torch.float32)
    out[:, : vecs.shape[1]] = vecs.float()
    return out


def _sparse_eigenvectors(src: Tensor, dst: Tensor, n: int, count: int) -> Tensor:
    """Lanczos (scipy ``eigsh``) on the sparse Laplacian, for graphs too large for ``eigh``."""
    import numpy as np
    import scipy.sparse as sp
    from scipy.sparse.linalg import eigsh

    adj = sp.coo_matrix((np.ones(src.numel()), (dst.numpy(), src.numpy())), shape=(n, n)).tocsr()
    adj.data[:] = 1.0  # duplicates summed by tocsr: collapse them
    deg = np.asarray(adj.sum(1)).ravel()
    inv_sqrt = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1.0)), 0.0)
    lap = sp.eye(n) - sp.diags(inv_sqrt) @ adj @ sp.diags(inv_sqrt)
    # The spectrum lies in [0, 2]: the smallest of L are the largest of 2I - L (fast to find).
    # A seeded start: without v0, ARPACK draws one from a generator whose state is whatever
    # earlier calls in the process left, so the same graph could get other vectors (and, where
    # an eigenvalue is repeated at the cut, a less converged one) from run to run.
    v0 = np.random.default_rng(0).standard_normal(n)
    vals, vecs = eigsh(2.0 * sp.eye(n) - lap, k=min(count, n - 1), which="LA", v0=v0)
    order = np.argsort(-vals)
    return torch.from_numpy(vecs[:, order].copy())


class LaplacianPE(nn.Module):
    """Add a learned projection of Laplacian eigenvectors to node features.

    ``x + W pe`` where ``pe`` is :func:`laplacian_eigenvectors`'s ``(n, k)`` with, in training,
    each column's sign flipped at random (per forward pass).

    Args:
        k: eigenvectors per node.
        dim: width of ``x``.
        sign_flip: flip signs at random in training (default True).

    Shapes:
        - x: ``(n, dim)`` or ``(b, n, dim)``; eigvecs: ``(n, k)``
        - out: as ``x``
    """

    def __init__(self, k: int, dim: int, *, sign_flip: bool = True) -> None:
        super().__init__()
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        self.k, self.dim, self.sign_flip = k, dim, sign_flip
        self.proj = nn.Linear(k, dim)

    def forward(self, x: Tensor, eigvecs: Tensor) -> Tensor:
        if eigvecs.dim() != 2 or eigvecs.shape[1] != self.k or eigvecs.shape[0] != x.shape[-2]:
            raise ValueError(
                f"eigvecs: expected ({x.shape[-2]}, {self.k}) for x {tuple(x.shape)}, "
                f"got {tuple(eigvecs.shape)}"
            )
        pe = eigvecs.to(x.dtype)
        if self.training and self.sign_flip:
            signs = torch.randint(0, 2, (1, self.k), device=pe.device).to(pe.dtype) * 2 - 1
            pe = pe * signs  # (n, k)
        return x + self.proj(pe)

    def extra_repr(self) -> str:
        return f"k={self.k}, dim={self.dim}, sign_flip={self.sign_flip}"
