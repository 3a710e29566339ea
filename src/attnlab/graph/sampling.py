"""Neighbour sampling (GraphSAGE, Hamilton et al. 2017): the mini-batch subgraph that lets a
graph too large for full-batch training be trained a batch of seed nodes at a time.

For ``L`` layers with fanouts ``(f_1, ..., f_L)``, the seeds' incoming edges are sampled
(at most ``f_1`` per seed, uniformly without replacement), then those of the nodes just reached
(at most ``f_2`` each), and so on: an ``L``-layer model on the subgraph computes the seeds'
outputs from a bounded neighbourhood (``prod f`` nodes at most per seed), whatever the graph's
size. Data parallelism then splits the seeds over ranks (DDP over samples).

Legend: ``n`` nodes, ``E`` edges, ``k`` frontier nodes of one hop, ``m`` sampled nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from ..backends.edge_ops import check_edge_index

__all__ = ["SampledSubgraph", "sample_neighbors"]


class SampledSubgraph(NamedTuple):
    """A sampled mini-batch.

    Attributes:
        nodes: ``(m,)`` global ids of the subgraph's nodes, the seeds first (in their order):
            index node features with ``x[nodes]``; the seeds' outputs are ``out[:num_seeds]``.
        edge_index: ``(2, E')`` sampled edges in local ids (positions in ``nodes``).
        num_seeds: number of seeds.
    """

    nodes: Tensor
    edge_index: Tensor
    num_seeds: int


def _check_seeds(seeds: object, num_nodes: int) -> Tensor:
    if not isinstance(seeds, Tensor) or seeds.dim() != 1 or seeds.dtype.is_floating_point or seeds.dtype == torch.bool:  # fmt: skip
        got = f"dtype {seeds.dtype}, shape {tuple(seeds.shape)}" if isinstance(seeds, Tensor) else type(seeds).__name__  # fmt: skip
        raise ValueError(f"seeds must be a 1-D integer tensor of node ids, got {got}")
    seeds = seeds.long()
    if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= num_nodes):
        raise ValueError(
            f"seeds must be node ids in [0, {num_nodes}), got range "
            f"[{int(seeds.min())}, {int(seeds.max())}]"
        )
    if torch.unique(seeds).numel() != seeds.numel():
        raise ValueError("seeds must not repeat a node")
    return seeds


def sample_neighbors(
    edge_index: Tensor,
    num_nodes: int,
    seeds: Tensor,
    fanouts: Sequence[int],
    generator: torch.Generator | None = None,
) -> SampledSubgraph:
    """Sample each layer's incoming edges, hop by hop from ``seeds`` (see the module docstring).

    Args:
        edge_index: ``(2, E)`` long, edge ``(src, dst)`` sends ``src``'s message to ``dst``.
        num_nodes: number of nodes ``n``.
        seeds: ``(s,)`` distinct node ids whose outputs the batch computes.
        fanouts: incoming edges kept per node at each hop, first hop first; ``-1`` keeps all.
        generator: the random generator (seeded for a reproducible sample).

    Returns:
        :class:`SampledSubgraph`: the nodes (seeds first), the sampled edges in local ids.
    """
    check_edge_index(edge_index, num_nodes)
    seeds = _check_seeds(seeds, num_nodes)
    if any(not isinstance(f, int) or (f < 0 and f != -1) for f in fanouts):
        raise ValueError(f"fanouts must be ints >= 0 (or -1 for all edges), got {list(fanouts)}")
    device = edge_index.device
    # Incoming edges of each node, contiguous: a CSR over destinations.
    order = torch.argsort(edge_index[1], stable=True)
    src_by_dst = edge_index[0, order]
    ptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=device)
    ptr[1:] = torch.bincount(edge_index[1], minlength=num_nodes).cumsum(0)
    seen = torch.zeros(num_nodes, dtype=torch.bool, device=device)
    seen[seeds] = True
    nodes, frontier, srcs, dsts = [seeds], seeds, [], []
    for fanout in fanouts:  # one pass per layer; everything inside is vectorised
        start, deg = ptr[frontier], ptr[frontier + 1] - ptr[frontier]  # (k,)
        first = deg.cumsum(0) - deg  # (k,): where each frontier node's edges begin
        seg = torch.repeat_interleave(torch.arange(frontier.numel(), device=device), deg)
        offset = torch.arange(seg.numel(), device=device) - first[seg]  # rank in its node
        pos = start[seg] + offset  # (sum deg,) positions in the CSR
        if fanout != -1:
            # A uniform sample without replacement: random keys, the `fanout` smallest of
            # each node (sorting by node + key keeps the nodes apart, keys in [0, 1)).
            keys = torch.rand(seg.numel(), generator=generator, dtype=torch.float64).to(device)
            perm = torch.argsort(seg.to(torch.float64) + keys)
            keep = perm[(torch.arange(seg.numel(), device=device) - first[seg[perm]]) < fanout]
            pos, seg = pos[keep], seg[keep]
        s, d = src_by_dst[pos], frontier[seg]
        srcs.append(s)
        dsts.append(d)
        new = torch.unique(s[~seen[s]])
        seen[new] = True
        nodes.append(new)
        frontier = new
    nodes_all = torch.cat(nodes)
    local = torch.full((num_nodes,), -1, dtype=torch.long, device=device)
    local[nodes_all] = torch.arange(nodes_all.numel(), device=device)
    if srcs:
        edges = local[torch.stack([torch.cat(srcs), torch.cat(dsts)])]
    else:
        edges = torch.empty(2, 0, dtype=torch.long, device=device)
    return SampledSubgraph(nodes_all, edges, seeds.numel())
