"""Neighbour sampling keeps only real edges, at most `fanout` per node and hop, seeds first,
reproducibly; fanout -1 gives the whole k-hop in-neighbourhood."""

from __future__ import annotations

import pytest
import torch

from attnlab.graph import GATConv
from attnlab.graph.sampling import sample_neighbors

N = 60


def graph(seed=0, e=400):
    return torch.randint(0, N, (2, e), generator=torch.Generator().manual_seed(seed))


def test_sampled_edges_exist_and_respect_the_fanout():
    ei = graph()
    seeds = torch.tensor([3, 17, 42])
    sub = sample_neighbors(ei, N, seeds, [4, 3], generator=torch.Generator().manual_seed(1))
    assert torch.equal(sub.nodes[:3], seeds) and sub.num_seeds == 3
    assert torch.unique(sub.nodes).numel() == sub.nodes.numel()
    real = set(zip(ei[0].tolist(), ei[1].tolist()))
    src, dst = sub.nodes[sub.edge_index]
    counts: dict[int, int] = {}
    for s, d in zip(src.tolist(), dst.tolist()):
        assert (s, d) in real
        counts[d] = counts.get(d, 0) + 1
    indeg = torch.bincount(ei[1], minlength=N)
    for seed in seeds.tolist():  # first hop: min(in-degree, 4) edges, sampled without repeats
        assert counts.get(seed, 0) == min(int(indeg[seed]), 4)


def test_seeded_sampling_is_reproducible():
    ei, seeds = graph(), torch.tensor([0, 5])
    a = sample_neighbors(ei, N, seeds, [2, 2], generator=torch.Generator().manual_seed(7))
    b = sample_neighbors(ei, N, seeds, [2, 2], generator=torch.Generator().manual_seed(7))
    assert torch.equal(a.nodes, b.nodes) and torch.equal(a.edge_index, b.edge_index)


def test_all_neighbours_give_the_seeds_the_full_graph_output():
    # fanout -1 at every hop: a 2-layer GAT on the subgraph equals it on the whole graph.
    torch.manual_seed(0)
    ei = graph(e=150)
    x = torch.randn(N, 5, dtype=torch.float64)
    c1 = GATConv(5, 4, heads=2).double()
    c2 = GATConv(8, 3).double()
    seeds = torch.tensor([1, 2, 30])
    sub = sample_neighbors(ei, N, seeds, [-1, -1])
    full = c2(c1(x, ei), ei)[seeds]
    xs = x[sub.nodes]
    part = c2(c1(xs, sub.edge_index), sub.edge_index)[: sub.num_seeds]
    torch.testing.assert_close(part, full)


@pytest.mark.parametrize(
    "seeds, fanouts, match",
    [
        (torch.tensor([0, 0]), [2], "seeds must not repeat a node"),
        (torch.tensor([0, N]), [2], rf"seeds must be node ids in \[0, {N}\)"),
        (torch.tensor([0.0]), [2], "seeds must be a 1-D integer tensor"),
        (torch.tensor([0]), [-2], "fanouts must be ints >= 0"),
    ],
)
def test_bad_arguments(seeds, fanouts, match):
    with pytest.raises(ValueError, match=match):
        sample_neighbors(graph(), N, seeds, fanouts)
