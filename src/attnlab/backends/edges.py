"""The ``edges`` backend: exact attention under a graph mask, computed on the edge list
(:func:`~attnlab.backends.edge_ops.edge_attention`) in ``O(E * b * h)`` memory, never ``n x n``.

It computes every score and normalisation of :mod:`attnlab.functional`, with gradients, for a
:class:`~attnlab.masks.Graph` mask (``masks.graph(edge_index, n)``), without a score bias,
without returning dense weights. ``auto`` picks it when the graph is sparse or its dense mask
would be too large (:func:`edges_pay_off`).

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``n`` nodes (``i = j = n``), ``E`` edges.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..masks import Graph
from .base import BACKENDS, Backend, Problem
from .edge_ops import edge_attention

__all__ = ["EdgeListBackend", "graph_edge_list", "edges_pay_off"]

#: a graph whose edges (self loops included) cover at most this share of the n x n pairs runs on
#: the edge list: per edge it pays gathers and scatters, ~20-30x a dense score's cost, so the
#: break-even is a few per cent (`benchmarks/bench_graph.py --crossover`, n = 2048, fwd+bwd,
#: quiet 2-core CPU: the edge list 1.08x dense SDPA at 3%, 0.60x at 5%; BENCHMARKS.md)
_EDGES_MAX_DENSITY = 0.03
#: above this many pairs (a 16K x 16K mask: 256 MiB of booleans per head and sequence) the dense
#: mask is never built, whatever the density
_EDGES_DENSE_MAX_PAIRS = 1 << 28


def graph_edge_list(mask: Graph) -> Tensor:
    """The edges the mask allows, as the dense mask has them: duplicates merged, one self loop
    per node when ``self_loops``, sorted by destination then source. ``(2, E')`` long, computed
    once per mask object (masks are values)."""
    cached = mask.__dict__.get("_edge_list")
    if cached is not None:
        return cached
    n, ei = mask.num_nodes, mask.edge_index.long()
    codes = ei[1] * n + ei[0]  # one int64 per (dst, src) pair: n^2 < 2^63 up to 3e9 nodes
    if mask.self_loops:
        loops = torch.arange(n, device=ei.device)
        codes = torch.cat([codes, loops * n + loops])
    codes = torch.unique(codes)  # sorted: destination-major, as a CSR matrix would be
    edges = torch.stack([codes % n, codes // n])  # (2, E'): row 0 sources, row 1 destinations
    mask.__dict__["_edge_list"] = edges
    return edges


def edges_pay_off(p: Problem) -> bool:
    """``auto``'s rule: a graph mask the ``edges`` backend can compute, whose allowed pairs
    are at most :data:`_EDGES_MAX_DENSITY` of ``i * j`` (counted from the edge list, an upper
    bound) or whose dense mask would exceed :data:`_EDGES_DENSE_MAX_PAIRS` pairs."""
    mask = p.mask
    if not isinstance(mask, Graph) or EdgeListBackend().unsupported(p) is not None:
        return False
    _, _, i, j = p.shape
    allowed = mask.edge_index.shape[1] + (mask.num_nodes if mask.self_loops else 0)
    return i * j > _EDGES_DENSE_MAX_PAIRS or allowed <= _EDGES_MAX_DENSITY * i * j


@BACKENDS.register("edges")
class EdgeListBackend(Backend):
    """Attention along the edges of a graph mask only: a gather of per-edge scores, a
    max-subtracted segment softmax (or an elementwise normalisation with the in-degree as the
    number of allowed keys) and a scatter back. Exact against the dense masked path; a node
    with no incoming edge gets a zero output, as a fully masked query does there."""

    name = "edges"

    def unsupported(self, p: Problem) -> str | None:
        if not isinstance(p.mask, Graph):
            got = "no mask" if p.mask is None else type(p.mask).__name__
            return (
                f"it needs a graph mask (masks.graph(edge_index, num_nodes)) on its own, got {got}"
            )
        if p.need_weights:
            return "it does not materialise dense (b, h, i, j) weights (need_weights=True)"
        if p.bias is not None:
            return "it does not add a dense score bias"
        if p.q_offset:
            return "it needs all the nodes' queries at once (q_offset=0)"
        return None

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        b, h, i, j = p.shape
        p.mask.check(b, i, j)
        if p.q.numel() == 0 or j == 0:
            return p.q.new_zeros(b, h, i, p.v.shape[-1]), None
        out, _ = edge_attention(
            p.q, p.k, p.v, graph_edge_list(p.mask), score=p.score, normalize=p.normalize,
            dropout=p.dropout, training=p.dropout > 0, check=False,
        )  # fmt: skip
        return out, None
