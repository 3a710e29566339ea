"""Deterministic data order: seeded epoch shuffles, batches, and their split over ranks.

Epoch ``e`` shuffles with its own generator seeded ``seed + e``: the order of any epoch can be
rebuilt from the seed alone, so a run resumed in the middle of an epoch skips the batches it
already consumed and sees exactly the same ones after. The global batch of an optimizer step is
split into ``world_size * grad_accum`` contiguous micro-batches; rank ``r`` takes micro-batches
``r * grad_accum ... r * grad_accum + grad_accum - 1`` (a DistributedSampler-equivalent sharding
that keeps every optimizer step's global batch identical whatever the number of processes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = [
    "epoch_order", "eval_order", "make_batches", "bucket_batches", "split_batch",
    "rank_micro_batches",
]  # fmt: skip


def epoch_order(n: int, *, seed: int, epoch: int) -> list[int]:
    """A permutation of ``range(n)``, a pure function of ``seed + epoch``."""
    gen = torch.Generator().manual_seed(seed + epoch)
    return torch.randperm(n, generator=gen).tolist()


def eval_order(task: Any, examples: Sequence) -> list[int]:
    """The order evaluation visits ``examples`` in: by ``task.batch_size_of`` (an example's
    length or cost), stably, so that a batch holds examples of similar lengths and little of it
    is padding. Evaluation metrics are sums over examples, so the order changes them only by how
    floating-point sums add up (and by padding, which the models mask).
    """
    costs = [task.batch_size_of(example) for example in examples]
    return sorted(range(len(examples)), key=costs.__getitem__)


def make_batches(
    order: Sequence[int],
    *,
    batch_size: int,
    costs: Sequence[int] | None = None,
    max_cost: int = 0,
) -> list[list[int]]:
    """Cut ``order`` into global batches, keeping a short last batch.

    Args:
        order: example indices in visiting order.
        batch_size: examples per batch (used when ``max_cost`` is 0).
        costs: per-example cost, indexed by example index (e.g. its number of tokens).
        max_cost: if > 0, a batch takes examples while the sum of their ``costs`` stays
            ``<= max_cost`` (an example costlier than ``max_cost`` gets a batch of its own).
    """
    if max_cost <= 0:
        return [list(order[i : i + batch_size]) for i in range(0, len(order), batch_size)]
    if costs is None:
        raise ValueError("token-based batching (max_cost > 0) needs per-example costs")
    batches: list[list[int]] = []
    current: list[int] = []
    total = 0
    for idx in order:
        cost = costs[idx]
        if current and total + cost > max_cost:
            batches.append(current)
            current, total = [], 0
        current.append(idx)
        total += cost
    if current:
        batches.append(current)
    return batches


def bucket_batches(
    order: Sequence[int],
    *,
    costs: Sequence[int],
    bucket: int,
    batch_size: int,
    max_cost: int = 0,
    seed: int,
) -> list[list[int]]:
    """Length-bucketed batches: examples of similar cost share a batch, so less is padding.

    ``order`` is read in pools of ``bucket`` batches' worth of examples (``bucket *
    batch_size`` examples, or, under token batching, examples costing up to ``bucket *
    max_cost`` in all); each pool is sorted by cost (stably) and cut by :func:`make_batches`.
    Under token batching the last, partly filled batch of a pool is carried into the next pool
    rather than kept, so pools do not add underfilled batches. Then all the batches are
    shuffled with a generator seeded ``seed``. Every example is seen once; with fixed-size
    batches there are as many batches as :func:`make_batches` makes. Sorting within a window
    of ``bucket`` batches (as fairseq and tensor2tensor do) keeps the order random at the
    scale of the window while the padding falls as the window grows.
    """
    if bucket < 1:
        raise ValueError(f"bucket must be >= 1 batches per pool, got {bucket}")
    window = bucket * (max_cost if max_cost > 0 else batch_size)

    def size(i: int) -> int:  # what fills a window: cost under token batching, else 1
        return costs[i] if max_cost > 0 else 1

    def cut(pool: list[int]) -> list[list[int]]:
        return make_batches(sorted(pool, key=costs.__getitem__), batch_size=batch_size,
                            costs=costs, max_cost=max_cost)  # fmt: skip

    batches: list[list[int]] = []
    pool: list[int] = []
    total = 0
    for idx in order:
        if pool and total + size(idx) > window:
            pooled = cut(pool)
            carry = pooled.pop() if max_cost > 0 and len(pooled) > 1 else []
            batches += pooled
            pool, total = carry, sum(map(size, carry))
        pool.append(idx)
        total += size(idx)
    if pool:
        batches += cut(pool)
    perm = torch.randperm(len(batches), generator=torch.Generator().manual_seed(seed))
    return [batches[i] for i in perm.tolist()]


def split_batch(batch: Sequence[int], parts: int) -> list[list[int]]:
    """``parts`` contiguous chunks of near-equal size (the first ones larger; some may be
    empty when ``len(batch) < parts``)."""
    size, extra = divmod(len(batch), parts)
    chunks, start = [], 0
    for k in range(parts):
        end = start + size + (1 if k < extra else 0)
        chunks.append(list(batch[start:end]))
        start = end
    return chunks


def rank_micro_batches(
    batch: Sequence[int], *, rank: int, world_size: int, grad_accum: int
) -> list[list[int]]:
    """The ``grad_accum`` micro-batches of ``batch`` that rank ``rank`` processes (some may be
    empty; the trainer then runs a zero-weight dummy so collectives stay aligned)."""
    chunks = split_batch(batch, world_size * grad_accum)
    return chunks[rank * grad_accum : (rank + 1) * grad_accum]
