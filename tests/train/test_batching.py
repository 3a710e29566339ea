"""Seeded epoch order, batching and the split of a global batch over ranks."""

from __future__ import annotations

import pytest

from attnlab.train.batching import epoch_order, make_batches, rank_micro_batches, split_batch


def test_epoch_order_is_a_seeded_permutation():
    a = epoch_order(50, seed=3, epoch=1)
    assert sorted(a) == list(range(50))
    assert a == epoch_order(50, seed=3, epoch=1)
    assert a != epoch_order(50, seed=3, epoch=2)
    assert epoch_order(50, seed=3, epoch=1) == epoch_order(50, seed=4, epoch=0)  # seed + epoch


def test_fixed_size_batches_keep_the_short_last_one():
    assert make_batches(list(range(7)), batch_size=3) == [[0, 1, 2], [3, 4, 5], [6]]


def test_token_batches_respect_the_budget():
    costs = [5, 3, 9, 1, 1, 12, 2]
    batches = make_batches(range(7), batch_size=1, costs=costs, max_cost=10)
    assert batches == [[0, 1], [2, 3], [4], [5], [6]]  # 12 > 10 gets a batch of its own
    with pytest.raises(ValueError, match="costs"):
        make_batches(range(3), batch_size=1, max_cost=4)


@pytest.mark.parametrize(("n", "parts"), [(10, 4), (3, 4), (8, 2), (0, 3)])
def test_split_batch_partitions_in_order(n, parts):
    chunks = split_batch(list(range(n)), parts)
    assert len(chunks) == parts and sum(chunks, []) == list(range(n))
    assert max(map(len, chunks)) - min(map(len, chunks)) <= 1


def test_ranks_cover_the_global_batch_exactly_once():
    batch = list(range(11))
    world, accum = 2, 3
    seen = [
        i
        for rank in range(world)
        for micro in rank_micro_batches(batch, rank=rank, world_size=world, grad_accum=accum)
        for i in micro
    ]
    assert seen == batch
