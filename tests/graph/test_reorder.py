"""Reverse Cuthill-McKee returns a permutation that keeps the graph and packs a shuffled
banded graph's edges back into few tiles."""

from __future__ import annotations

import pytest
import torch

from attnlab.graph.reorder import block_density, permute_edges, rcm_order

pytest.importorskip("scipy", reason="scipy is needed for reverse Cuthill-McKee")


def banded(n: int, width: int) -> torch.Tensor:
    i = torch.arange(n).repeat_interleave(2 * width)
    offsets = torch.cat([torch.arange(-width, 0), torch.arange(1, width + 1)]).repeat(n)
    j = i + offsets
    keep = (j >= 0) & (j < n)
    return torch.stack([j[keep], i[keep]])


def shuffled_banded(n=600, width=3, seed=0):
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return perm[banded(n, width)]


def test_rcm_is_a_permutation_that_keeps_the_graph():
    n = 600
    ei = shuffled_banded(n)
    perm = rcm_order(ei, n)
    assert perm.dtype == torch.long and torch.equal(perm.sort().values, torch.arange(n))
    new = permute_edges(ei, perm)
    # Relabelling back gives the same edge set.
    assert torch.equal(perm[new], ei)


def test_rcm_packs_a_shuffled_banded_graph_into_fewer_tiles():
    n = 600
    ei = shuffled_banded(n)
    before = block_density(ei, n, block=32)
    after = block_density(permute_edges(ei, rcm_order(ei, n)), n, block=32)
    assert after.density <= before.density
    assert after.nonempty < before.nonempty / 3  # a band of width 3 touches ~3 tiles per row
    assert block_density(banded(n, 3), n, block=32).nonempty <= after.nonempty + 19


def test_block_density_counts():
    ei = torch.tensor([[0, 1, 5, 5], [0, 0, 6, 6]])  # tiles (0, 0) and (1, 1) at block 4
    d = block_density(ei, 8, block=4)
    assert (d.tiles, d.nonempty, d.density) == (4, 2, 0.5)
    assert d.fill == 3 / 32  # 3 distinct edges in 2 tiles of 16 pairs
    with pytest.raises(ValueError, match="block must be a positive int, got 0"):
        block_density(ei, 8, block=0)
