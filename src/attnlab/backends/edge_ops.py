r"""Attention along the edges of a graph, computed on the edge list: ``O(E * h)`` memory.

For a graph with edges ``(src, dst)`` (node ``dst`` attends to node ``src``, PyG's message
passing convention) and per-edge scores :math:`\alpha_e`, the weights and outputs are

.. math::
    a_e = \frac{\exp(\alpha_e - m_{\mathrm{dst}(e)})}
               {\sum_{e' : \mathrm{dst}(e') = \mathrm{dst}(e)} \exp(\alpha_{e'} - m_{\mathrm{dst}(e)})},
    \qquad o_i = \sum_{e : \mathrm{dst}(e) = i} a_e \, v_{\mathrm{src}(e)},

with :math:`m_i` the largest score among node ``i``'s incoming edges (it cancels in the ratio
and keeps ``exp`` from overflowing). Three passes over the edges: a gather of the scores, a
segment softmax over each node's incoming edges (:func:`edge_softmax`, a scatter-max and a
scatter-sum), and a scatter of the weighted values back to the nodes (:func:`edge_aggregate`).
Nothing of size ``n x n`` is ever built, so a graph of 10M edges fits where its dense mask
(``10^12`` pairs for a million nodes) never would.

A node with no incoming edge gets a zero output and zero gradients, the dense path's convention
for a query with no allowed key (:func:`attnlab.numerics.masked_softmax`).

Legend: ``n`` nodes, ``E`` edges, ``b`` batch, ``h`` heads, ``d`` head dim, ``e`` value head dim.
Node-major tensors are ``(n, ...)``; edge tensors ``(E, ...)``, in the order of ``edge_index``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ..dropout import dropout as drop
from ..functional import DotScore, get_normalize, get_score
from ..numerics import at_least_float32

__all__ = [
    "check_edge_index",
    "in_degree",
    "edge_softmax",
    "edge_aggregate",
    "edge_scores",
    "edge_attention",
    "EdgeAttentionOutput",
]


def check_edge_index(edge_index: object, num_nodes: int, *, name: str = "edge_index") -> Tensor:
    """``edge_index`` if it is an integer tensor of shape ``(2, E)`` with ids in
    ``[0, num_nodes)``; otherwise a ``ValueError`` naming ``name``, what was expected and what
    was given.

    The range check is one pass (``aminmax``) over the edges: cheap next to the attention.
    """
    if not isinstance(edge_index, Tensor):
        raise ValueError(
            f"{name} must be an integer tensor of shape (2, num_edges), got "
            f"{type(edge_index).__name__}"
        )
    if edge_index.dtype.is_floating_point or edge_index.dtype.is_complex or edge_index.dtype == torch.bool:  # fmt: skip
        raise ValueError(
            f"{name} must be an integer tensor (torch.long) of node ids, got dtype "
            f"{edge_index.dtype}; convert it with .long() if the ids are whole numbers"
        )
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        hint = " (transpose it: .t())" if edge_index.dim() == 2 and edge_index.shape[1] == 2 else ""
        raise ValueError(
            f"{name} must have shape (2, num_edges), row 0 the sources and row 1 the "
            f"destinations; got shape {tuple(edge_index.shape)}{hint}"
        )
    if edge_index.numel():
        lo, hi = (int(t) for t in torch.aminmax(edge_index))
        if lo < 0:
            raise ValueError(f"{name} holds a negative node id ({lo}); ids must be in [0, {num_nodes})")  # fmt: skip
        if hi >= num_nodes:
            raise ValueError(
                f"{name} holds node id {hi}, out of range for {num_nodes} nodes "
                f"(ids must be in [0, {num_nodes}))"
            )
    return edge_index


def in_degree(dst: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """Number of incoming edges of each node, ``(n,)`` in ``dtype``."""
    ones = torch.ones(dst.shape[0], dtype=dtype, device=dst.device)
    return torch.zeros(num_nodes, dtype=dtype, device=dst.device).index_add_(0, dst, ones)


def _expand_index(index: Tensor, like: Tensor) -> Tensor:
    """``index`` ``(E,)`` broadcast to ``like``'s shape ``(E, ...)`` (for ``scatter_reduce``)."""
    return index.view(-1, *([1] * (like.dim() - 1))).expand_as(like)


def edge_softmax(scores: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
    r"""Softmax of edge scores over each node's incoming edges (a segment softmax).

    .. math::
        a_e = \exp(s_e - m_i) \big/ \textstyle\sum_{e' \to i} \exp(s_{e'} - m_i),
        \qquad i = \mathrm{dst}(e),\ m_i = \max_{e' \to i} s_{e'} ,

    the max treated as a constant (it cancels exactly). Weights are in float32 or wider.

    Args:
        scores: ``(E,)`` or ``(E, ...)`` (e.g. ``(E, h)``), one score per edge (and head).
        dst: ``(E,)`` destination node of each edge (long).
        num_nodes: number of nodes ``n``.

    Returns:
        ``(E, ...)`` weights; the weights of each node's incoming edges sum to one.
    """
    s = at_least_float32(scores)
    if s.shape[0] == 0:
        return s
    return _EdgeSoftmax.apply(s, dst, num_nodes)


class _EdgeSoftmax(torch.autograd.Function):
    r"""The segment softmax with its own backward, :math:`\partial s_e = a_e (g_e - \sum_{e'
    \to i} a_{e'} g_{e'})`: it keeps only the weights (``O(E h)``) and makes five passes over
    the edges instead of the dozen of autograd's chain (exp, shift, sums, division)."""

    @staticmethod
    def forward(ctx, s: Tensor, dst: Tensor, num_nodes: int) -> Tensor:
        index = _expand_index(dst, s)
        m = torch.full((num_nodes, *s.shape[1:]), float("-inf"), dtype=s.dtype, device=s.device)
        m.scatter_reduce_(0, index, s, "amax", include_self=True)  # (n, ...)
        # A node whose scores are all -inf would compute -inf - (-inf) = NaN: shift it by the
        # lowest finite value instead, so its weights are exp(-inf) = 0 (and 0 / tiny = 0).
        m.clamp_min_(torch.finfo(m.dtype).min)
        e = torch.exp(s - m.index_select(0, dst))  # (E, ...), <= 1
        denom = torch.zeros_like(m).index_add_(0, dst, e)
        w = e.div_(denom.clamp_min_(torch.finfo(s.dtype).tiny).index_select(0, dst))
        ctx.save_for_backward(w, dst)
        ctx.num_nodes = num_nodes
        return w

    @staticmethod
    def backward(ctx, grad: Tensor):
        w, dst = ctx.saved_tensors
        wg = w * grad  # (E, ...)
        total = torch.zeros((ctx.num_nodes, *w.shape[1:]), dtype=w.dtype, device=w.device)
        total.index_add_(0, dst, wg)  # (n, ...): sum over each node's edges of a * g
        return wg - w * total.index_select(0, dst), None, None


def edge_aggregate(values: Tensor, weights: Tensor, src: Tensor, dst: Tensor, num_nodes: int) -> Tensor:  # fmt: skip
    r""":math:`o_i = \sum_{e \to i} a_e v_{\mathrm{src}(e)}`: the weighted values scattered back.

    Args:
        values: ``(n, ..., e)`` node values (e.g. ``(n, h, e)``).
        weights: ``(E, ...)`` edge weights, broadcast over the last dim of ``values``.
        src: ``(E,)`` source of each edge.
        dst: ``(E,)`` destination of each edge.
        num_nodes: number of output nodes.

    Returns:
        ``(num_nodes, ..., e)`` in ``values``' dtype; zero at a node with no incoming edge.
    """
    msg = values.index_select(0, src) * weights.unsqueeze(-1).to(values.dtype)  # (E, ..., e)
    out = values.new_zeros(num_nodes, *values.shape[1:])
    return out.index_add(0, dst, msg)


def edge_scores(score, q: Tensor, k: Tensor, src: Tensor, dst: Tensor) -> Tensor:
    """Per-edge scores ``score(q_dst, k_src)`` on node-major ``q, k`` ``(n, b, h, d)``:
    ``(E, b, h)``, one gather per side, never ``n x n``.

    Dot products are one multiply-and-sum per edge; any other score (the additive one, a
    callable ``(q (b,h,i,d), k (b,h,j,d)) -> (b,h,i,j)``) runs with the edges as its batch,
    one query and one key each, so every score of :data:`~attnlab.functional.SCORES` is exact
    here, with its parameters per head.
    """
    qe, ke = q.index_select(0, dst), k.index_select(0, src)  # (E, b, h, d)
    if isinstance(score, DotScore):
        scale = score.fused_scale(q.shape[-1])
        s = (qe * ke).sum(-1)  # (E, b, h)
        return s if scale == 1.0 else s * scale
    E, b, h, d = qe.shape
    s = score(qe.reshape(E * b, h, 1, d), ke.reshape(E * b, h, 1, d))  # (E * b, h, 1, 1)
    return s.reshape(E, b, h)


class EdgeAttentionOutput(NamedTuple):
    out: Tensor  # (b, h, n, e)
    weights: Tensor  # (E, b, h), in the order of edge_index


def edge_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    edge_index: Tensor,
    *,
    score="scaled_dot",
    normalize="softmax",
    dropout: float = 0.0,
    training: bool = False,
    check: bool = True,
) -> EdgeAttentionOutput:
    """Attention of each node over its incoming edges only, on the edge list.

    Equal to :func:`attnlab.functional.attend` with ``mask = masks.graph(edge_index, n,
    self_loops=False)`` when ``edge_index`` has no duplicate edge (a duplicate counts twice
    here; the dense mask is a set), at ``O(E * b * h * d)`` memory instead of ``O(b h n^2)``.

    Args:
        q: ``(b, h, n, d)`` queries of the ``n`` nodes.
        k: ``(b, h, n, d)`` keys of the ``n`` nodes.
        v: ``(b, h, n, e)`` values.
        edge_index: ``(2, E)`` long, edge ``(src, dst)`` lets ``dst`` attend to ``src``.
        score: a name from :data:`~attnlab.functional.SCORES` or a score object.
        normalize: a name from :data:`~attnlab.functional.NORMALIZATIONS` or an object;
            elementwise ones see each node's in-degree as its number of allowed keys.
        dropout: dropout on the edge weights when ``training``.
        training: apply dropout.
        check: validate ``edge_index`` (one pass over it).

    Returns:
        ``EdgeAttentionOutput(out (b, h, n, e), weights (E, b, h))``; a node with no incoming
        edge has a zero output.
    """
    if q.dim() != 4 or k.shape[:3] != q.shape[:3] or v.shape[:3] != q.shape[:3]:
        raise ValueError(
            "edge_attention expects q, k of shape (b, h, n, d) and v of shape (b, h, n, e) "
            f"with the same b, h, n; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    n = q.shape[2]
    if check:
        check_edge_index(edge_index, n)
    src, dst = edge_index[0].long(), edge_index[1].long()
    # Node-major copies, so every gather and scatter runs along dim 0 on contiguous rows.
    qn, kn, vn = (t.permute(2, 0, 1, 3) for t in (q, k, v))  # (n, b, h, d)
    s = edge_scores(get_score(score), qn, kn, src, dst)  # (E, b, h)
    norm = get_normalize(normalize)
    if norm.elementwise:
        counts = in_degree(dst, n, at_least_float32(s).dtype).index_select(0, dst)  # (E,)
        w = norm.weights(at_least_float32(s), counts.view(-1, 1, 1))
    else:
        w = edge_softmax(s, dst, n)
    a = drop(w, dropout, training)
    out = edge_aggregate(vn, a, src, dst, n)  # (n, b, h, e)
    return EdgeAttentionOutput(out.permute(1, 2, 0, 3), w.to(q.dtype))
