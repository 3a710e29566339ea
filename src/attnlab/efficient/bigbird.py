"""BigBird attention: sliding blocks, global blocks and random blocks, exact under its mask.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``r`` blocks, ``s`` random blocks per query block.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..masks import Mask
from ._sparse import dedupe, full_rows, gathered_attention
from .base import AttentionKernel, MaskParts
from .local import check_backend, exact_attention

__all__ = ["BigBirdKernel", "BigBirdMask", "random_blocks"]


def random_blocks(blocks: int, *, count: int, window: int, globals_: int, seed: int) -> Tensor:
    """For each query block, ``count`` distinct random key blocks outside its window and the
    global blocks: ``(r, s)`` block ids, -1 where fewer candidates exist. Fixed by ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    table = torch.full((blocks, count), -1, dtype=torch.long)
    ids = torch.arange(blocks)
    for r in range(globals_, blocks):
        cand = ids[((ids - r).abs() > window) & (ids >= globals_)]
        pick = cand[torch.randperm(cand.numel(), generator=gen)[:count]]
        table[r, : pick.numel()] = pick
    return table


class BigBirdMask(Mask):
    """BigBird-ITC's block pattern as a mask (True = may attend).

    Query block ``p = i // block`` may attend key block ``q = j // block`` when
    ``|p - q| <= window`` (sliding blocks), either is a global block (``< globals_``), or ``q``
    is one of ``random[p]``. A :class:`~attnlab.masks.Mask`, so it renders densely
    (:meth:`dense`) and as a FlexAttention block mask (:meth:`block_mask`).

    Args:
        block: block length.
        window: sliding blocks on each side (a radius in blocks, as ``masks.local``'s window is
            in positions).
        globals_: the first ``globals_`` blocks are global.
        random: ``(r, s)`` random key block ids per query block (-1 = none).
    """

    key_fields = ("block", "window", "globals_", "random")  # block masks cached by value

    def __init__(self, *, block: int, window: int, globals_: int, random: Tensor) -> None:
        self.block, self.window, self.globals_ = block, window, globals_
        self.random = random

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        if -(-q_len // self.block) > self.random.shape[0]:
            raise ValueError(
                f"BigBirdMask: random blocks drawn for {self.random.shape[0]} query blocks of "
                f"{self.block}, got {q_len} queries"
            )

    def mask_mod(self, b, h, q_idx, kv_idx):
        qb, kb = q_idx // self.block, kv_idx // self.block
        sliding = (qb - kb).abs() <= self.window
        glob = (qb < self.globals_) | (kb < self.globals_)
        table = self.random.to(q_idx.device)[qb.clamp(0, self.random.shape[0] - 1)]  # (..., s)
        rand = (table == kb.unsqueeze(-1)).any(-1)
        return sliding | glob | rand

    def __repr__(self) -> str:
        return (
            f"bigbird(block={self.block}, window={self.window}, globals={self.globals_}, "
            f"random={self.random.shape[1]})"
        )


class BigBirdKernel(AttentionKernel):
    r"""BigBird attention (Zaheer et al. 2020, Sec. 2 and App. D, "ITC"): exact softmax
    attention under a block-sparse pattern of sliding, global and random blocks.

    The sequence is cut into blocks of ``block`` tokens. Query block ``p`` attends to key blocks
    ``p - w .. p + w`` (sliding), the first ``global_blocks`` blocks (global: these also attend
    everywhere) and ``random_blocks`` random blocks, drawn once per number of blocks from the
    kernel's ``seed`` (fixed, as in the paper's implementation, so the model trains against one
    pattern). The pattern is a :class:`BigBirdMask`; the kernel computes

    .. math::
        o_i = \sum_j \mathrm{softmax}_j\Big(\frac{q_i \cdot k_j}{\sqrt d}
        \;\Big|\; M_{\mathrm{bigbird}} \land \mathrm{mask}\Big) v_j

    exactly, so every mask composes (causal: random blocks in the future are masked out).

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        block: block length (default 64).
        window_blocks: sliding blocks on each side ``w``, a radius in blocks (default 1: 3
            blocks, as the paper).
        global_blocks: leading global blocks (default 1).
        random_blocks: random key blocks per query block (default 3, as the paper).
        seed: seed of the random blocks (default 0).
        backend: ``"auto"`` (default: gathered blocks when sparse, else exact backends),
            ``"banded"`` (gathered blocks), ``"exact"`` or an exact backend's name.

    Complexity: time ``O(n (2w + 1 + s + g) c d)`` with ``c = block``; memory likewise.
    """

    name = "bigbird"
    supports_causal = True
    supports_structured = True

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        block: int = 64,
        window_blocks: int = 1,
        global_blocks: int = 1,
        random_blocks: int = 3,
        seed: int = 0,
        backend: str = "auto",
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        for key, val, low in (
            ("block", block, 1),
            ("window_blocks", window_blocks, 0),
            ("global_blocks", global_blocks, 0),
            ("random_blocks", random_blocks, 0),
        ):
            if not isinstance(val, int) or val < low:
                raise ValueError(f"{key} must be an int >= {low}, got {val!r}")
        self.block, self.window_blocks = block, window_blocks
        self.global_blocks, self.random_count = global_blocks, random_blocks
        self.seed, self.backend = seed, check_backend(backend)
        self._tables: dict[int, Tensor] = {}

    def pattern(self, n: int) -> BigBirdMask:
        """The block pattern for sequences of up to ``n`` tokens (random blocks fixed by seed)."""
        blocks = -(-n // self.block)
        if blocks not in self._tables:
            self._tables[blocks] = random_blocks(
                blocks, count=self.random_count, window=self.window_blocks,
                globals_=self.global_blocks, seed=self.seed,
            )  # fmt: skip
        return BigBirdMask(
            block=self.block, window=self.window_blocks, globals_=self.global_blocks,
            random=self._tables[blocks],
        )  # fmt: skip

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        i, j = q.shape[2], k.shape[2]
        pattern = self.pattern(max(i + q_offset, j))
        mask = pattern if parts.mask is None else pattern & parts.mask
        blocks = -(-j // self.block)
        per_block = min(blocks, 2 * self.window_blocks + 1 + self.random_count + self.global_blocks)
        sparse = 2 * per_block * self.block <= j and q_offset % self.block == 0
        if self.backend == "banded" and q_offset % self.block:
            raise ValueError("bigbird: the gathered path needs q_offset to be a multiple of block")
        if not (self.backend == "banded" or (self.backend == "auto" and sparse)):
            return exact_attention(q, k, v, mask, q_offset=q_offset, backend=self.backend)
        # Key blocks of each query block: sliding, random, global; each once; -1 = none.
        first = q_offset // self.block
        rq = -(-i // self.block)
        p = first + torch.arange(rq).view(-1, 1)  # (r, 1) query block ids
        sliding = p + torch.arange(-self.window_blocks, self.window_blocks + 1)
        table = pattern.random[p.squeeze(1).clamp(max=pattern.random.shape[0] - 1)]
        glob = torch.arange(self.global_blocks).expand(rq, -1)
        kb = torch.cat([sliding, table, glob], dim=1)
        kb = dedupe(kb.masked_fill((kb < 0) | (kb >= blocks), -1))  # (r, blocks per row)
        index = kb.unsqueeze(-1) * self.block + torch.arange(self.block)  # (r, x, c)
        index = index.masked_fill((kb.unsqueeze(-1) < 0) | (index >= j), -1).flatten(1)
        out = gathered_attention(q, k, v, index, block=self.block, mask=mask, q_offset=q_offset)
        rows = torch.arange(self.global_blocks * self.block) - q_offset
        rows = rows[(rows >= 0) & (rows < i)]  # queries in global blocks attend everywhere
        return full_rows(out, q, k, v, rows, mask=mask, q_offset=q_offset)

    def extra_repr(self) -> str:
        return (
            f"block={self.block}, window_blocks={self.window_blocks}, "
            f"global_blocks={self.global_blocks}, random_blocks={self.random_count}, "
            f"seed={self.seed}, backend={self.backend!r}"
        )
