r"""Softmax attention with dropout on its weights, a block of queries at a time, on a CPU.

PyTorch's fused CPU kernel has no attention dropout, and its math path materialises every
weight: the ``(b h, i, j)`` scores, softmax, the dropout mask and the dropped weights each make a
pass through memory, forward and backward, and past a few hundred positions those passes, not
the products, are the step (Cora's full attention over 2,708 nodes: 2 s of a 2.2 s step).
A :class:`~attnlab.pair_bias.PairBias` is added to each block at its pairs, so its dense
``(h, i, j)`` form is never made; with one, the sdpa backend runs here without dropout too.
Here the queries go in blocks small enough that a block's scores stay in cache
(:func:`block_rows`), as in FlashAttention (Dao et al. 2022) with a block as wide as the
keys:

.. math::
    P = \operatorname{softmax}(\alpha Q K^\top + A), \qquad
    O = \tfrac{1}{1 - p}\,(M \odot P)\, V,

with :math:`A` the additive mask or bias and :math:`M` the keep-mask of
:func:`attnlab.dropout.dropout_mask`, drawn block by block. Only :math:`O`, the log-sum-exp
of each query's scores and :math:`M` (a boolean: a quarter of the memory a float32 copy takes,
and of the fresh pages a step must fault in; applied as 0 / 1 bytes) are kept for the backward
pass, which recomputes :math:`P` from them and uses
:math:`\sum_j P_{ij}\, \partial P_{ij} = \partial O_i \cdot O_i` (Dao et al.) for the softmax's
gradient:

.. math::
    \partial V = \tfrac{1}{1-p} (M \odot P)^\top \partial O, \quad
    \partial S = P \odot \bigl(\tfrac{1}{1-p} M \odot \partial O\, V^\top
    - (\partial O \odot O) \mathbf{1}\bigr), \quad
    \partial Q = \alpha\, \partial S K, \quad \partial K = \alpha\, \partial S^\top Q,
    \quad \partial A = \partial S.

Scores, softmax and the gradients' elementwise maths are in float32 (float64 for float64
inputs); the products in the inputs' dtype, except for heads of up to
:data:`FLOAT32_PRODUCTS_UP_TO` dimensions: there a bfloat16 product, with its cast of every
``(c, j)`` block of scores or weights, is slower than a float32 one (Cora's 8-dimensional
heads 1.16x as fast, 16: 1.12x; at 32 bfloat16 is 1.07x ahead), so those multiply in float32
and return the inputs' dtype. In float64 it equals the materialised computation
with the same mask to 1e-15 (``tests/test_backends.py``). Forward and backward with a
key-padding mask, against the materialised path (``benchmarks/bench_core.py --only dropout``,
2026-12-05): 1.4-2.9x as fast from 16.8M weights (``b h i j``), with a seventh to a twelfth of
the peak memory; 0.6-0.9x up to 4.2M, where the weights fit in cache, so the sdpa backend
uses it from 16.8M (:data:`attnlab.backends.sdpa.DROPOUT_BLOCKS_FROM`).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from ..dropout import dropout_mask
from ..pair_bias import PairBias

__all__ = ["BLOCK_ELEMENTS", "attention_with_dropout", "block_rows"]

#: about this many scores per block (2 MiB in float32: a core's L2 holds a block and its mask)
BLOCK_ELEMENTS = 1 << 19
MIN_BLOCK, MAX_BLOCK = 32, 1024
#: a head dimension up to which the products are float32 whatever the inputs' dtype
FLOAT32_PRODUCTS_UP_TO = 16


def block_rows(batch_heads: int, keys: int) -> int:
    """Queries per block for ``batch_heads`` (``b * h``) problems over ``keys`` keys: the
    largest power of two with ``batch_heads * rows * keys <= BLOCK_ELEMENTS``, within 32-1,024
    (measured best on two CPUs; ``benchmarks/bench_core.py --only dropout``)."""
    rows = max(1, BLOCK_ELEMENTS // max(1, batch_heads * keys))
    return min(MAX_BLOCK, max(MIN_BLOCK, 1 << (rows.bit_length() - 1)))


def attention_with_dropout(
    q: Tensor, k: Tensor, v: Tensor, add: Tensor | None, p: float, alpha: float
) -> Tensor:
    """:math:`\\frac{1}{1-p} (M \\odot \\operatorname{softmax}(\\alpha Q K^\\top + A)) V`
    (module docstring), differentiable in ``q``, ``k``, ``v`` and ``add``.

    Args:
        q: queries ``(b, h, i, d)``.
        k: keys ``(b, h, j, d)``, in ``q``'s dtype.
        v: values ``(b, h, j, e)``, in ``q``'s dtype.
        add: None, or added to the scores: 4-D, broadcastable to ``(b, h, i, j)`` (a mask
            as a large negative number where forbidden, a bias, or both), or a
            :class:`~attnlab.pair_bias.PairBias`, added at its pairs only (its gradient, with
            respect to its values, read there).
        p: drop probability, in ``[0, 1)``; 0 draws no mask.
        alpha: the scores' scale (``1 / sqrt(d)``).

    Returns:
        ``(b, h, i, e)`` in ``q``'s dtype.
    """
    b, h, i, _ = q.shape
    pairs = add if isinstance(add, PairBias) else None
    if pairs is not None:
        pairs.check(i, k.shape[2], h)  # each block writes its pairs' gradient, so all of them
        add = None
    elif add is not None and not add.dtype.is_floating_point:
        raise TypeError(f"add: expected a floating-point tensor, got {add.dtype}")
    # ``add`` stays in its dtype (bfloat16 under autocast: half the memory of a float32
    # copy); each block adds its rows into the float32 scores.
    block = block_rows(b * h, k.shape[2])
    values = None if pairs is None else pairs.values
    return _Blocks.apply(q, k, v, add, values, pairs, p, alpha, block)


def _scores(
    qa: Tensor, kt: Tensor, add: Tensor | None, bias: tuple | None, rows: slice, heads: int, acc
) -> Tensor:
    """A block's scores ``(b h, c, j)`` in ``acc``: its (pre-scaled) queries times the keys,
    plus its rows of ``add``, or of a pair bias (``bias``: the :class:`PairBias` and its values,
    added at the block's pairs only)."""
    s = torch.bmm(qa[:, rows], kt).to(acc)
    if add is not None:
        part = add if add.shape[2] == 1 else add[:, :, rows]
        s.view(-1, heads, *s.shape[1:]).add_(part)
    if bias is not None:
        pairs, values = bias
        some, places = pairs.rows(rows.start, rows.stop)
        flat = s.view(-1, heads, s.shape[1] * s.shape[2])  # (b, h, c j)
        part = values[:, some].to(acc).expand(flat.shape[0], heads, -1)
        flat.index_add_(2, places, part)
    return s


def _pair_grad(dvalues: Tensor, ds: Tensor, pairs: PairBias, rows: slice, heads: int) -> None:
    """Write a block's score gradient ``ds`` ``(b h, c, j)`` at its pairs into ``dvalues``
    ``(heads or 1, P)``, summed over the batch (and the heads, for values shared by them)."""
    some, places = pairs.rows(rows.start, rows.stop)
    g = ds.view(-1, heads, ds.shape[1] * ds.shape[2])[:, :, places].sum(0)  # (h, pairs)
    dvalues[:, some] = g if dvalues.shape[0] == heads else g.sum(0, keepdim=True)


def _grad_buffer(add: Tensor, acc: torch.dtype) -> Tensor:
    """Where :func:`_accumulate` writes ``add``'s gradient. Every block adds into an ``add``
    broadcast along the queries: zeros in ``acc``. Otherwise each block writes its own rows
    once (summed in ``acc`` over a broadcast batch or head dimension first): uninitialised, in
    ``add``'s dtype (no zero fill, and no float32 copy of a bfloat16 bias)."""
    if add.shape[2] == 1:
        return torch.zeros(add.shape, dtype=acc)
    return torch.empty(add.shape, dtype=add.dtype)


def _accumulate(dadd: Tensor, ds: Tensor, rows: slice, heads: int) -> None:
    """Write a block's score gradient ``ds`` ``(b h, c, j)`` into ``dadd``, summed over the
    dimensions ``add`` was broadcast along."""
    g = ds.view(-1, heads, *ds.shape[1:])
    for dim in (0, 1, 3):
        if dadd.shape[dim] == 1 and g.shape[dim] != 1:  # (a sum over one is a copy)
            g = g.sum(dim, keepdim=True)
    if dadd.shape[2] == 1:
        dadd += g.sum(2, keepdim=True)
    else:  # the block's rows, written once
        dadd[:, :, rows] = g


class _Blocks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, add, values, pairs, p, alpha, block):
        b, h, i, d = q.shape
        j, e = k.shape[2], v.shape[-1]
        acc = torch.promote_types(q.dtype, torch.float32)
        # The products' dtype: the inputs', unless their rows are too short for a low-precision
        # product to pay for the casts of its (c, j) result (module docstring).
        work = acc if max(d, e) <= FLOAT32_PRODUCTS_UP_TO else q.dtype
        with torch.autocast(q.device.type, enabled=False):
            qa = (q.to(work) * alpha).reshape(b * h, i, d)
            k3, v3 = k.to(work).reshape(b * h, j, d), v.to(work).reshape(b * h, j, e)
            kt = k3.transpose(1, 2)
            bias = None if pairs is None else (pairs, values)
            # p = 0 (a pair bias in evaluation): no mask to draw or keep
            keep = torch.empty(b * h, i, j, dtype=torch.bool) if p > 0 else None
            out = torch.empty(b * h, i, e, dtype=acc)
            lse = torch.empty(b * h, i, 1, dtype=acc)
            scale = 1.0
            for start in range(0, i, block):
                rows = slice(start, min(start + block, i))
                w = _scores(qa, kt, add, bias, rows, h, acc)
                top = w.amax(-1, keepdim=True)
                w.sub_(top).exp_()
                total = w.sum(-1, keepdim=True)
                if keep is not None:
                    mask, scale = dropout_mask(w.shape, p, out=keep[:, rows])
                    w.mul_(mask.view(torch.uint8))
                out[:, rows] = torch.bmm(w.to(work), v3).to(acc).mul_(scale / total)
                lse[:, rows] = top.add_(total.log_())
            out = out.to(work)
        ctx.save_for_backward(qa, k3, v3, add, values, out, lse, keep)
        ctx.pairs = pairs
        ctx.alpha, ctx.scale, ctx.block, ctx.heads = alpha, scale, block, h
        ctx.dtypes = q.dtype, k.dtype, v.dtype
        return out.view(b, h, i, e).to(v.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        qa, k3, v3, add, values, out, lse, keep = ctx.saved_tensors
        alpha, scale, block, h, pairs = ctx.alpha, ctx.scale, ctx.block, ctx.heads, ctx.pairs
        bias = None if pairs is None else (pairs, values)
        bh, i, d = qa.shape
        acc = lse.dtype
        with torch.autocast(qa.device.type, enabled=False):
            dout = dout.reshape(out.shape).to(out.dtype)
            kt, vt = k3.transpose(1, 2), v3.transpose(1, 2)
            D = (dout.to(acc) * out.to(acc)).sum(-1, keepdim=True)  # sum_j P dP, per query
            dos = dout.mul(scale)
            dq = torch.empty_like(qa)
            dk, dv = torch.zeros(k3.shape, dtype=acc), torch.zeros(v3.shape, dtype=acc)
            dadd = _grad_buffer(add, acc) if ctx.needs_input_grad[3] else None
            dvalues = torch.empty(values.shape, dtype=acc) if ctx.needs_input_grad[4] else None
            for start in range(0, i, block):
                rows = slice(start, min(start + block, i))
                w = _scores(qa, kt, add, bias, rows, h, acc).sub_(lse[:, rows]).exp_()
                do = dos[:, rows]
                if keep is None:
                    dv += torch.bmm(w.to(v3.dtype).transpose(1, 2), do).to(acc)
                    ds = torch.bmm(do, vt).to(acc).sub_(D[:, rows]).mul_(w)
                else:
                    kept = keep[:, rows].view(torch.uint8).to(acc)
                    dv += torch.bmm((w * kept).to(v3.dtype).transpose(1, 2), do).to(acc)
                    ds = torch.bmm(do, vt).to(acc).mul_(kept).sub_(D[:, rows]).mul_(w)
                if dadd is not None:
                    _accumulate(dadd, ds, rows, h)
                if dvalues is not None:
                    _pair_grad(dvalues, ds, pairs, rows, h)
                ds = ds.to(qa.dtype)
                dq[:, rows] = torch.bmm(ds, k3)
                dk += torch.bmm(ds.transpose(1, 2), qa[:, rows]).to(acc)
            b = bh // h
            dq_t, dk_t, dv_t = ctx.dtypes
            grads = (
                dq.mul_(alpha).view(b, h, i, d).to(dq_t),
                dk.view(b, h, *k3.shape[1:]).to(dk_t),
                dv.view(b, h, *v3.shape[1:]).to(dv_t),
                None if dadd is None else dadd.to(add.dtype),
                None if dvalues is None else dvalues.to(values.dtype),
            )
        return (*grads, None, None, None, None)
