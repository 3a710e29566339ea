"""The ``chunked`` backend: exact attention in query x key blocks with an online softmax
(Milakov & Gimelshein 2018; Rabe & Staats 2021), ``O(i * block)`` memory, for every score and
normalisation; blocks wholly masked are skipped, and training recomputes each query block in
the backward pass instead of storing it.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from ..dropout import dropout
from ..functional import key_counts
from ..numerics import at_least_float32, safe_max
from .base import BACKENDS, Backend, Problem

__all__ = ["ChunkedBackend"]


@BACKENDS.register("chunked")
class ChunkedBackend(Backend):
    """Exact attention in blocks: memory ``O(i * block)`` instead of ``O(i * j)``.

    Args:
        block: query and key block length; default: the largest power of two whose score
            block (``b * h * block^2`` pairs times the score's ``pair_cost``) fits ``budget``
            elements, between 16 and 1024.
        budget: elements per score block when ``block`` is not given.
    """

    name = "chunked"

    def __init__(self, block: int | None = None, budget: int = 1 << 22) -> None:
        if block is not None and (not isinstance(block, int) or block <= 0):
            raise ValueError(f"block must be a positive int or None, got {block!r}")
        self.block, self.budget = block, budget

    def unsupported(self, p: Problem) -> str | None:
        if p.need_weights:
            return "it does not materialise the attention weights (need_weights=True)"
        return None

    def block_for(self, p: Problem) -> int:
        """The block length for ``p``: :attr:`block`, or the largest that fits the budget."""
        if self.block:
            return self.block
        b, h, _, _ = p.shape
        side = math.isqrt(max(1, self.budget // max(1, b * h * p.score.pair_cost)))
        return max(16, min(1024, 1 << (side.bit_length() - 1)))

    @staticmethod
    def _slice(t: Tensor | None, qs: int, qe: int, ks: int, ke: int) -> Tensor | None:
        if t is None:
            return None
        while t.dim() < 4:
            t = t.unsqueeze(0)
        t = t if t.shape[2] == 1 else t[:, :, qs:qe]
        return t if t.shape[3] == 1 else t[:, :, :, ks:ke]

    def _query_block(self, p: Problem, qs: int, qe: int, q: Tensor, k: Tensor, v: Tensor):
        _, _, _, j = p.shape
        mask = p.mask_object()
        dev, t = q.device, self.block_for(p)
        q_idx = torch.arange(qs + p.q_offset, qe + p.q_offset, device=dev)
        blocks = []
        for ks in range(0, j, t):
            ke = min(ks + t, j)
            m = None if mask is None else mask.evaluate(*p.shape[:2], q_idx, torch.arange(ks, ke, device=dev))  # fmt: skip
            if m is not None and not bool(m.any()):
                continue  # a wholly masked block contributes nothing
            blocks.append((ks, ke, m))
        b, h = q.shape[:2]
        wide = torch.promote_types(v.dtype, torch.float32)
        acc = q.new_zeros(b, h, qe - qs, v.shape[-1], dtype=wide)
        softmax = not p.normalize.elementwise
        if softmax:
            run_max = q.new_full((b, h, qe - qs, 1), float("-inf"), dtype=wide)
            run_sum = q.new_zeros(b, h, qe - qs, 1, dtype=wide)
        else:
            counts = key_counts(None, j, acc)
            if mask is not None:
                counts = sum(m.sum(-1, keepdim=True).to(acc.dtype) for _, _, m in blocks)
                counts = counts if isinstance(counts, Tensor) else acc.new_zeros(1, 1, 1, 1)
        for ks, ke, m in blocks:
            s = p.score(q, k[:, :, ks:ke])  # (b, h, iq, jk)
            bias = self._slice(p.bias, qs, qe, ks, ke)
            s = at_least_float32(s if bias is None else s + bias)
            vt = v[:, :, ks:ke].to(wide)
            if softmax:
                if m is not None:
                    s = s.masked_fill(~m, float("-inf"))
                new_max = torch.maximum(run_max, safe_max(s))  # 0 while nothing is allowed
                e = torch.exp(s - new_max)  # (b, h, iq, jk)
                rescale = torch.exp(run_max - new_max)
                run_sum = run_sum * rescale + e.sum(-1, keepdim=True)
                e = dropout(e, p.dropout)
                acc = acc * rescale + e @ vt
                run_max = new_max
            else:
                w = p.normalize.weights(s, counts)
                w = w if m is None else w.masked_fill(~m, 0.0)
                w = dropout(w, p.dropout)
                acc = acc + w @ vt
        if softmax:
            acc = acc / run_sum.clamp_min(torch.finfo(acc.dtype).tiny)
        return acc.to(v.dtype)

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        b, h, i, j = p.shape
        mask = p.mask_object()
        if mask is not None:
            # Blocks evaluate the mask piecewise, never via dense(): validate its size once here.
            mask.check(b, i + p.q_offset, j)
        if p.q.numel() == 0 or j == 0:  # an empty batch (or no head): nothing to attend
            return p.q.new_zeros(b, h, i, p.v.shape[-1]), None
        t = self.block_for(p)
        outs = []
        for qs in range(0, i, t):
            qe = min(qs + t, i)
            qt = p.q[:, :, qs:qe]
            if p.needs_grad:
                # Recompute the block in backward: keeps training memory O(i * block) too.
                o = checkpoint(self._query_block, p, qs, qe, qt, p.k, p.v, use_reentrant=False)
            else:
                o = self._query_block(p, qs, qe, qt, p.k, p.v)
            outs.append(o)
        return torch.cat(outs, dim=2), None
