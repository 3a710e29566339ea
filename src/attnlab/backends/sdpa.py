"""The ``sdpa`` backend: ``F.scaled_dot_product_attention`` (a fused flash kernel on CPU), for
dot-product scores with softmax.

With attention dropout on a CPU, PyTorch's flash kernel does not apply: SDPA runs its math path
(every weight materialised, a ``bernoulli_`` mask drawn over them). Past 16.8M weights this
backend computes it a block of queries at a time instead (:mod:`.dropout_blocks`: the blocks'
scores stay in cache, the backward pass recomputes them; 1.5-2.6x as fast as the materialised
path, Cora's full-attention training step 2.9x); below, and under ``torch.compile`` (which
cannot trace that loop), it materialises the weights as SDPA does (:func:`_math_with_dropout`).
Both draw :mod:`attnlab.dropout`'s mask, and both equal the reference without dropout, and the
materialised computation with the same mask, to 1e-12 in float64 (``tests/test_backends.py``).
A :class:`~attnlab.pair_bias.PairBias` goes to the blocks from the same size, with or without
dropout (eager, on a CPU, without a mask), which add it at its pairs; anywhere else it is made
dense (:meth:`~.base.Problem.with_dense_bias`).

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor

from ..dropout import dropout, fast_path
from ..functional import Normalization, Score
from ..masks import Causal
from ..pair_bias import PairBias
from .base import BACKENDS, Backend, Problem
from .dropout_blocks import attention_with_dropout

__all__ = ["SDPABackend", "lowp_runs_float32_on_cpu"]


def _zero_empty_rows(out: Tensor, mask: Tensor | None) -> Tensor:
    """Queries that may attend to no key get zeros (kernels differ: NaN, mean of values, ...)."""
    if mask is None:
        return out
    return out.masked_fill(~mask.any(-1, keepdim=True), 0.0)


# On CPU, PyTorch's flash kernel in bfloat16 / float16 is slower than in float32 on short
# sequences: forward + backward 1.3-11x slower wherever positions x head dim <= 8,192 (16 to
# 256 positions at d = 32, up to 64 at d = 128), and about even past that; at head dim 16 it is
# slower at every length (1.15x at 2,048 positions), ``python benchmarks/bench_core.py --only
# lowp``; BENCHMARKS.md). There, such inputs are computed by the float32 kernel and the output
# cast back.
CPU_LOWP_FLOAT32_MAX_WORK = 8192  # max(query, key positions) * head dim
CPU_LOWP_FLOAT32_MAX_HEAD_DIM = 16  # head dims up to this run float32 at any length


def lowp_runs_float32_on_cpu(q: Tensor, positions: int) -> bool:
    """Whether an attention of ``q`` (``(..., d)``) over at most ``positions`` query or key
    positions would run PyTorch's CPU kernel in reduced precision (``q``'s, or autocast's,
    dtype) where the float32 kernel is faster (``d <= 16``, or ``positions * d <= 8,192``);
    callers then compute it in float32 and cast the output back."""
    if q.device.type != "cpu":
        return False
    d = q.shape[-1]
    if d > CPU_LOWP_FLOAT32_MAX_HEAD_DIM and positions * d > CPU_LOWP_FLOAT32_MAX_WORK:
        return False
    dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else q.dtype
    return dtype in (torch.bfloat16, torch.float16)


def _float32_on_cpu(p: Problem) -> bool:
    """:func:`lowp_runs_float32_on_cpu` for a problem ``p``."""
    return lowp_runs_float32_on_cpu(p.q, max(p.shape[2:]))


@BACKENDS.register("sdpa")
class SDPABackend(Backend):
    name = "sdpa"
    takes_pair_bias = True  # the block kernel adds it at its pairs (_pairs_in_blocks)

    def refuses(self, score: Score, normalize: Normalization) -> str | None:
        if score.fused_scale(1) is None or normalize.name != "softmax":
            return (
                "computes dot-product scores with softmax only; got "
                f"score={score.name!r}, normalize={normalize.name!r}"
            )
        return None

    def unsupported(self, p: Problem) -> str | None:
        reason = super().unsupported(p)
        if reason is None and p.need_weights:
            reason = "it does not return attention weights (need_weights=True)"
        return reason

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        if isinstance(p.bias, PairBias):
            if _pairs_in_blocks(p):  # added at its pairs only, with or without dropout
                return _math_with_dropout(p, blocks=True), None
            p = p.with_dense_bias()
        if p.dropout > 0 and fast_path(p.q):  # SDPA's math path (module docstring)
            return _math_with_dropout(p), None
        if _float32_on_cpu(p):
            up = replace(p, q=p.q.float(), k=p.k.float(), v=p.v.float())
            with torch.autocast("cpu", enabled=False):  # autocast would cast back down
                out, _ = self._compute(up)
            return out.to(p.q.dtype), None
        return self._compute(p)

    def _compute(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        _, _, i, j = p.shape
        scale = p.score.fused_scale(p.q.shape[-1])
        if isinstance(p.mask, Causal) and p.bias is None and p.q_offset == 0 and i == j:
            # is_causal lets the flash kernel skip the upper triangle's blocks.
            out = F.scaled_dot_product_attention(
                p.q, p.k, p.v, dropout_p=p.dropout, is_causal=True, scale=scale
            )
            return out, None
        mask = p.dense_mask()
        attn_mask = mask
        if p.bias is not None:
            bias = p.bias.to(p.q.dtype)
            attn_mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        out = F.scaled_dot_product_attention(
            p.q, p.k, p.v, attn_mask=attn_mask, dropout_p=p.dropout, scale=scale
        )
        return _zero_empty_rows(out, mask), None


def _pairs_in_blocks(p: Problem) -> bool:
    """Whether ``p``'s :class:`~attnlab.pair_bias.PairBias` is added by the block kernel, which
    reads it at its pairs only: eager, on a CPU, without a mask, from
    :data:`DROPOUT_BLOCKS_FROM` weights (with or without dropout: below, a dense bias and the
    fused kernel or the materialised weights are faster). Elsewhere it is made dense."""
    return fast_path(p.q) and p.mask is None and _blocks_pay(p)


def _blocks_pay(p: Problem) -> bool:
    """Whether the block kernel's Python loop runs for ``p``: eager, from
    :data:`DROPOUT_BLOCKS_FROM` weights."""
    b, h, i, j = p.shape
    return not torch.compiler.is_compiling() and b * h * i * j >= DROPOUT_BLOCKS_FROM


# With attention dropout, queries in blocks (eager) against the weights materialised, forward +
# backward with a key-padding mask: 0.6-0.9x as fast up to 4.2M weights (b h i j), 1.4-2.9x from
# 16.8M (``python benchmarks/bench_core.py --only dropout``; BENCHMARKS.md).
DROPOUT_BLOCKS_FROM = 1 << 24  # weights


def _math_with_dropout(p: Problem, blocks: bool | None = None) -> Tensor:
    """What ``F.scaled_dot_product_attention`` computes on a CPU with ``dropout_p > 0``, with
    :func:`attnlab.dropout.dropout`'s mask on the weights: in blocks of queries
    (:func:`.dropout_blocks.attention_with_dropout`) if ``blocks`` (default: when eager and
    there are at least :data:`DROPOUT_BLOCKS_FROM` weights), else materialised (SDPA's math
    path; under ``torch.compile``). Also without dropout (``p.dropout == 0``), for a
    :class:`~attnlab.pair_bias.PairBias` that the blocks add at its pairs (:func:`_pairs_in_blocks`).

    Forbidden pairs get the compute dtype's lowest finite score, added to the scores, so a
    query with no allowed key has uniform weights instead of NaN, and then a zero output (as
    every backend gives it).
    """
    b, h, i, j = p.shape
    d, e = p.q.shape[-1], p.v.shape[-1]
    dtype = p.compute_dtype
    mask = p.dense_mask()  # broadcastable to (b, h, i, j), or None
    if blocks is None:  # a Python loop of blocks: eager only, and where it pays
        blocks = _blocks_pay(p)
    if not blocks or mask is not None:
        p = p.with_dense_bias()
    pairs = isinstance(p.bias, PairBias)  # kept as values at pairs (float32 or finer)
    add = None if p.bias is None or pairs else p.bias.to(dtype)
    if mask is not None:
        low = torch.finfo(dtype).min
        add = torch.zeros((), dtype=dtype) if add is None else add
        add = add.masked_fill(~mask, low)  # broadcast to the mask's shape
    while add is not None and add.dim() < 4:
        add = add.unsqueeze(0)
    alpha = p.score.fused_scale(d)
    if blocks:
        compute = torch.float32 if _float32_on_cpu(p) else dtype  # as without dropout
        q, k, v = (t.to(compute) for t in (p.q, p.k, p.v))
        add = p.bias if pairs else add
        out = attention_with_dropout(q, k, v, add, p.dropout, alpha).to(dtype)
        return _zero_empty_rows(out, mask)
    q = p.q.reshape(b * h, i, d)
    kt = p.k.reshape(b * h, j, d).transpose(1, 2)  # (b*h, d, j)
    if add is None:
        s = torch.bmm(q, kt).mul_(alpha)  # (b*h, i, j)
    else:
        rows = add.shape[2]  # 1 or i
        add = add.expand(b, h, rows, j).reshape(b * h, rows, j)
        s = torch.baddbmm(add, q, kt, alpha=alpha)  # (b*h, i, j)
    w = torch.softmax(s, -1, dtype=torch.promote_types(s.dtype, torch.float32)).to(dtype)
    out = torch.bmm(dropout(w, p.dropout), p.v.reshape(b * h, j, e)).view(b, h, i, e)
    return _zero_empty_rows(out, mask)  # in q's dtype, or autocast's (as SDPA's)
