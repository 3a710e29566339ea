"""BigBird's pattern against a plain-Python loop definition from the paper.

Zaheer et al. 2020 (Sec. 2, App. D, "BigBird-ITC"): the sequence is cut into blocks of
``block`` tokens; query block ``p`` attends to key block ``q`` when

* ``|p - q| <= window`` (sliding blocks),
* ``p < globals`` or ``q < globals`` (global blocks attend everywhere and are seen by all), or
* ``q`` is one of the ``random`` blocks drawn for ``p``: for every non-global query block,
  ``random`` distinct blocks (fewer if fewer exist) among those that are neither in its window
  nor global, drawn once from the kernel's seed.

Checked here: the random table's properties and its draw; :class:`BigBirdMask`'s dense and
block renderings; and the kernel's output, which must equal exact attention under the loop
pattern combined with padding, causal and local masks, for sizes with a ragged last block and
for decoding from an offset.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

import pytest
import torch

from attnlab import masks
from attnlab.efficient import BigBirdMask, make_kernel
from attnlab.functional import attend

DIM, HEADS = 32, 2
D = DIM // HEADS
#: (n, block, window_blocks, global_blocks, random_blocks, seed)
SIZES = [
    (32, 4, 1, 1, 1, 3),
    (37, 4, 1, 1, 2, 0),  # ragged last block
    (64, 8, 2, 2, 3, 5),
    (20, 4, 0, 0, 2, 1),  # no window, no global blocks
    (16, 4, 1, 1, 3, 2),  # fewer candidates than random blocks: the table holds -1
    (48, 4, 1, 3, 1, 7),
    (9, 4, 1, 1, 1, 0),  # fewer blocks than the window spans
]
IDS = [f"n{n}-c{c}-w{w}-g{g}-s{s}-seed{seed}" for n, c, w, g, s, seed in SIZES]


def loop_random_table(blocks: int, count: int, window: int, globals_: int, seed: int):
    """The random blocks of each query block, as lists, drawn as the paper's implementation
    does: candidates in increasing order, a seeded permutation, the first ``count``."""
    gen = torch.Generator().manual_seed(seed)
    table = [[] for _ in range(blocks)]
    for p in range(globals_, blocks):
        candidates = [q for q in range(blocks) if abs(q - p) > window and q >= globals_]
        order = torch.randperm(len(candidates), generator=gen).tolist()
        table[p] = [candidates[x] for x in order[:count]]
    return table


def loop_pattern(n: int, block: int, window: int, globals_: int, table) -> torch.Tensor:
    """The ``(n, n)`` pattern, one (query, key) pair at a time."""
    dense = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(n):
            p, q = i // block, j // block
            dense[i, j] = abs(p - q) <= window or p < globals_ or q < globals_ or q in table[p]
    return dense


def kernel_and_pattern(n, block, window, globals_, count, seed, **opts):
    kernel = make_kernel(
        "bigbird", dim=DIM, heads=HEADS, block=block, window_blocks=window,
        global_blocks=globals_, random_blocks=count, seed=seed, **opts,
    )  # fmt: skip
    blocks = -(-n // block)
    table = loop_random_table(blocks, count, window, globals_, seed)
    return kernel, table, loop_pattern(n, block, window, globals_, table)


@pytest.mark.parametrize(("n", "block", "window", "globals_", "count", "seed"), SIZES, ids=IDS)
def test_random_table_follows_the_definition(n, block, window, globals_, count, seed):
    kernel, table, _ = kernel_and_pattern(n, block, window, globals_, count, seed)
    random = kernel.pattern(n).random  # (blocks, count), -1 = none
    blocks = -(-n // block)
    assert random.shape == (blocks, count)
    for p in range(blocks):
        drawn = [q for q in random[p].tolist() if q >= 0]
        assert drawn == table[p]  # the seeded draw, in order
        assert all(q == -1 for q in random[p, len(drawn) :].tolist())  # -1 only at the end
        assert len(set(drawn)) == len(drawn)  # distinct
        if p < globals_:
            assert drawn == []  # global query blocks already see everything
            continue
        candidates = [q for q in range(blocks) if abs(q - p) > window and q >= globals_]
        assert set(drawn) <= set(candidates)  # outside the window, not global
        assert len(drawn) == min(count, len(candidates))


def test_random_table_is_fixed_by_the_seed():
    a = make_kernel("bigbird", dim=DIM, heads=HEADS, block=4, random_blocks=2, seed=3)
    b = make_kernel("bigbird", dim=DIM, heads=HEADS, block=4, random_blocks=2, seed=3)
    c = make_kernel("bigbird", dim=DIM, heads=HEADS, block=4, random_blocks=2, seed=4)
    assert torch.equal(a.pattern(64).random, b.pattern(64).random)
    assert torch.equal(a.pattern(64).random, a.pattern(64).random)  # same draw every call
    assert not torch.equal(a.pattern(64).random, c.pattern(64).random)


@pytest.mark.parametrize(("n", "block", "window", "globals_", "count", "seed"), SIZES, ids=IDS)
def test_dense_rendering_equals_the_loop_pattern(n, block, window, globals_, count, seed):
    kernel, _, expected = kernel_and_pattern(n, block, window, globals_, count, seed)
    pattern = kernel.pattern(n)
    assert isinstance(pattern, BigBirdMask)
    dense = pattern.dense(1, 1, n, n)
    assert torch.equal(dense.expand(1, 1, n, n)[0, 0], expected)
    offset = n // 2  # decoding: queries offset..n-1 over all n keys
    rows = pattern.dense(1, 1, n - offset, n, q_offset=offset)
    assert torch.equal(rows.expand(1, 1, n - offset, n)[0, 0], expected[offset:])


@pytest.mark.parametrize(
    ("n", "block", "window", "globals_", "count", "seed"), SIZES[:3], ids=IDS[:3]
)
def test_block_rendering_equals_the_loop_pattern(n, block, window, globals_, count, seed):
    kernel, _, expected = kernel_and_pattern(n, block, window, globals_, count, seed)
    blocks = -(-n // block)
    size = blocks * block  # the block mask's grid covers whole blocks
    bm = kernel.pattern(n).block_mask(1, 1, n, n, block_size=block)
    live = bm.to_dense()[0, 0].bool()[:blocks, :blocks]  # (query blocks, key blocks)
    padded = torch.zeros(size, size, dtype=torch.bool)
    padded[:n, :n] = expected
    assert torch.equal(live, padded.view(blocks, block, blocks, block).any(-1).any(1))


MASKS = {
    "none": lambda n: None,
    "padding": lambda n: masks.padding([n, n - 5, 0]),
    "causal": lambda n: masks.causal(),
    "causal&padding": lambda n: masks.causal() & masks.padding([n, n - 5, 0]),
    "local": lambda n: masks.local(6),
    "local&padding": lambda n: masks.local(6) & masks.padding([n, n - 5, 0]),
}


@pytest.mark.parametrize("backend", ["banded", "exact", "auto"])
@pytest.mark.parametrize("mask_kind", list(MASKS))
@pytest.mark.parametrize(("n", "block", "window", "globals_", "count", "seed"), SIZES, ids=IDS)
def test_kernel_is_exact_attention_under_the_loop_pattern(
    n, block, window, globals_, count, seed, mask_kind, backend
):
    """Every query sees exactly the loop pattern's keys (and the mask's): the kernel equals
    reference attention under ``loop pattern & mask``, rendered densely here."""
    kernel, _, pattern = kernel_and_pattern(
        n, block, window, globals_, count, seed, backend=backend
    )
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(3, HEADS, n, D, generator=g, dtype=torch.float64) for _ in range(3))
    mask = MASKS[mask_kind](n)
    full = pattern.view(1, 1, n, n)
    if mask is not None:
        full = full & mask.dense(3, HEADS, n, n)
    expected = attend(q, k, v, mask=full).out  # rows with no key: zeros
    torch.testing.assert_close(kernel(q, k, v, mask=mask), expected, atol=1e-12, rtol=1e-12)
    if mask_kind.startswith("causal") and backend != "exact":
        # Decoding the last blocks over a cache of the first ones (an offset of whole blocks,
        # which the gathered path needs).
        offset = (n // block // 2) * block
        out = kernel(q[:, :, offset:], k, v, mask=mask, q_offset=offset)
        torch.testing.assert_close(out, expected[:, :, offset:], atol=1e-12, rtol=1e-12)
