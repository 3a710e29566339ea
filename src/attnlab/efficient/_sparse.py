"""Exact attention over a few gathered keys per query block (the sparse kernels' fast path).

Local, Longformer and BigBird attention are *exact* attention under a sparse mask. For long
sequences they never build the ``(i, j)`` score matrix: queries are cut into blocks of ``c``,
each block gathers the ``kk`` key positions its mask can allow (a band, global tokens, random
blocks) and attends to those only, so scores cost ``O(i * kk)`` instead of ``O(i * j)``. The
mask is still evaluated, on the gathered positions, so a gathered key that a query may not see
(outside its own window, padding, the future) gets no weight. The few queries that attend
everywhere (global tokens) get full rows, ``O(g * j)``.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim, ``r`` query blocks, ``c`` block length, ``kk`` gathered keys per block,
``g`` full rows.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..backends.sdpa import lowp_runs_float32_on_cpu
from ..masks import Mask
from ..numerics import masked_softmax

__all__ = ["band_index", "append_keys", "dedupe", "gathered_attention", "full_rows"]


def band_index(
    blocks: int, block: int, *, before: int, after: int, q_offset: int, kv_len: int
) -> Tensor:
    """Key positions ``[p0 - before, p1 + after]`` of each query block ``[p0, p1]``: ``(r, kk)``.

    Positions outside ``[0, kv_len)`` are -1 (no key).
    """
    start = q_offset + torch.arange(blocks) * block - before  # (r,)
    idx = start.view(-1, 1) + torch.arange(block + before + after)  # (r, kk)
    return idx.masked_fill((idx < 0) | (idx >= kv_len), -1)


def append_keys(index: Tensor, extra: Tensor) -> Tensor:
    """``index (r, kk)`` with the positions ``extra`` (``(x,)`` for all blocks, or ``(r, x)``)
    appended to every row; duplicates within a row become -1."""
    if extra.dim() == 1:
        extra = extra.view(1, -1).expand(index.shape[0], -1)
    return dedupe(torch.cat([index, extra.to(index)], dim=1))


def dedupe(index: Tensor) -> Tensor:
    """Each position at most once per row (a key listed twice would get twice its weight)."""
    s, _ = index.sort(dim=-1)
    dup = torch.zeros_like(s, dtype=torch.bool)
    dup[:, 1:] = s[:, 1:] == s[:, :-1]
    return s.masked_fill(dup, -1)


def gathered_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    index: Tensor,
    *,
    block: int,
    mask: Mask | None,
    q_offset: int = 0,
) -> Tensor:
    """Scaled dot-product softmax attention of each query block over its gathered keys.

    Args:
        q: ``(b, h, i, d)``; k: ``(b, h, j, d)``; v: ``(b, h, j, e)``.
        index: ``(r, kk)`` key positions for query block ``r`` (-1 = none), each at most once;
            ``r = ceil(i / block)``.
        block: query block length ``c``.
        mask: evaluated on the gathered positions (True = may attend); None = all gathered.
        q_offset: position of the first query.

    Returns:
        ``(b, h, i, e)``; queries that may attend to no gathered key get zeros.
    """
    b, h, i, d = q.shape
    e = v.shape[-1]
    r, kk = index.shape
    if r * block < i:
        raise ValueError(f"index has {r} blocks of {block}, too few for {i} queries")
    idx = index.clamp(min=0).to(q.device)
    qb = F.pad(q, (0, 0, 0, r * block - i)).view(b, h, r, block, d)  # (b, h, r, c, d)
    kg = k.index_select(2, idx.flatten()).view(b, h, r, kk, d)  # (b, h, r, kk, d)
    vg = v.index_select(2, idx.flatten()).view(b, h, r, kk, e)  # (b, h, r, kk, e)
    allowed = (index >= 0).to(q.device).view(1, 1, r, 1, kk)
    if mask is not None:
        # Padding rows of the last block evaluate at the last real query (their output is cut).
        q_pos = (q_offset + torch.arange(r * block, device=q.device)).clamp(max=q_offset + i - 1)
        bi = torch.arange(b, device=q.device).view(b, 1, 1, 1, 1)
        hi = torch.arange(h, device=q.device).view(1, h, 1, 1, 1)
        m = mask.mask_mod(bi, hi, q_pos.view(1, 1, r, block, 1), idx.view(1, 1, r, 1, kk))
        allowed = allowed & torch.as_tensor(m, device=q.device)
    # Each (head, query block) pair is one batch entry of the fused SDPA kernel: the score tile
    # (c x kk) never leaves it, in the forward or the backward pass (about 1.8x faster than
    # materialising scores and softmax here).
    mb = allowed.shape[0]
    attn_mask = allowed.expand(mb, h, r, block, kk).reshape(mb, h * r, block, kk)
    tiles = (
        qb.reshape(b, h * r, block, d),
        kg.reshape(b, h * r, kk, d),
        vg.reshape(b, h * r, kk, e),
    )
    if lowp_runs_float32_on_cpu(q, max(block, kk)):
        # Small tiles in bf16 / fp16 run faster through the float32 kernel (as the sdpa
        # backend does for short sequences).
        with torch.autocast("cpu", enabled=False):
            out = F.scaled_dot_product_attention(*(t.float() for t in tiles), attn_mask=attn_mask)
        out = out.to(q.dtype)
    else:
        out = F.scaled_dot_product_attention(*tiles, attn_mask=attn_mask)
    out = out.view(b, h, r, block, e)
    out = out * allowed.any(-1, keepdim=True)  # no allowed key: zeros, whatever the kernel did
    return out.reshape(b, h, r * block, e)[:, :, :i]


def full_rows(
    out: Tensor, q: Tensor, k: Tensor, v: Tensor, rows: Tensor, *, mask: Mask | None, q_offset: int
) -> Tensor:
    """``out`` with the query rows ``rows`` (indices into ``i``) replaced by exact attention
    over all keys: for tokens that attend everywhere (global tokens), ``O(g * j)``."""
    if rows.numel() == 0:
        return out
    b, h, _, d = q.shape
    j = k.shape[2]
    rows = rows.to(q.device)
    qr = q.index_select(2, rows)  # (b, h, g, d)
    s = qr @ k.transpose(-2, -1) / math.sqrt(d)  # (b, h, g, j)
    allowed = None
    if mask is not None:
        allowed = mask.evaluate(b, h, rows + q_offset, torch.arange(j, device=q.device))
    w = masked_softmax(s, allowed)
    return out.index_copy(2, rows, (w.to(v.dtype) @ v).to(out.dtype))  # (b, h, i, e)
