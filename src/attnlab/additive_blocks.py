r"""The additive score :math:`w^\top \tanh(a_i + c_j)` of every pair, a block of queries at a time.

:class:`attnlab.functional.AdditiveScore` projects each head's queries and keys to
:math:`a_i = W_q q_i` and :math:`c_j = W_k k_j` (``(b, h, i, a)`` and ``(b, h, j, a)``); the
score of a pair is :math:`s_{ij} = w^\top \tanh(a_i + c_j)`. Written as one broadcast, autograd
keeps the ``(b, h, i, j, a)`` tanh tensor for the backward pass, and the sum, tanh, product,
tanh derivative and the two reductions each pass through it in memory. Here the queries go in
blocks whose ``(b, h, c, j, a)`` slice stays in cache (:func:`block_queries`), and the backward
pass recomputes the block's tanh instead of keeping it:

.. math::
    \partial a_i = \sum_j g_{ij}\, w \odot (1 - t_{ij}^2), \quad
    \partial c_j = \sum_i g_{ij}\, w \odot (1 - t_{ij}^2), \quad
    \partial w = \sum_{i, j} g_{ij}\, t_{ij}, \qquad t_{ij} = \tanh(a_i + c_j),

with :math:`g` the scores' gradient, computed as :math:`\partial a_i = w \odot (\sum_j g_{ij}
- \sum_j g_{ij} t_{ij}^2)` (``w`` and the 1 applied to the sums, not to each element) and
:math:`\partial w` as one matrix product per batch and head: three fewer passes through the
block than the formula's order (forward and backward together 1.5-2.0x as fast at pos-like
and 256-long shapes). It computes in float32 (float64 for float64 inputs): on a
CPU, PyTorch's bfloat16 elementwise maths is slower than float32's, and the scores come back in
the inputs' dtype. Forward and backward, against the broadcast (``benchmarks/bench_core.py
--only addblocks``, 4-8 heads, 48-512 positions): 1.7-2.5x as fast in float32, 1.6-2.2x under
bf16 autocast, with 5-39x less peak memory (the inputs, not the ``a``-times-larger tanh tensor);
the pos tagger's training step with additive scores, 1.30x. In float64 the two agree to 1e-14
(``tests/test_functional.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["BLOCK_ELEMENTS", "additive_scores", "block_queries"]

#: about this many tanh elements per block (the ``(b, h, c, j, a)`` slice): 8 MiB in float32
BLOCK_ELEMENTS = 1 << 21


def block_queries(b: int, h: int, j: int, a: int) -> int:
    """Queries per block: the largest power of two with ``b h c j a <= BLOCK_ELEMENTS`` (at
    least 1)."""
    rows = max(1, BLOCK_ELEMENTS // max(1, b * h * j * a))
    return 1 << (rows.bit_length() - 1)


def additive_scores(qa: Tensor, ka: Tensor, w: Tensor) -> Tensor:
    r""":math:`s_{ij} = w^\top \tanh(a_i + c_j)` per batch and head (module docstring).

    Args:
        qa: projected queries ``(b, h, i, a)``.
        ka: projected keys ``(b, h, j, a)``.
        w: the score's output weights ``(h, a)``.

    Returns:
        ``(b, h, i, j)`` in ``qa``'s dtype.
    """
    b, h, _, a = qa.shape
    block = block_queries(b, h, ka.shape[2], a)
    dtype = qa.dtype
    acc = torch.promote_types(dtype, torch.float32)
    with torch.autocast(qa.device.type, enabled=False):
        # contiguous: the einsum that projects them may leave the heads outermost in memory,
        # and each block's broadcast then reads across the whole tensor
        qa, ka = (t.to(acc).contiguous() for t in (qa, ka))
        out = _Blocks.apply(qa, ka, w.to(acc), block)
    return out.to(dtype)


def _tanh_block(qa: Tensor, ka: Tensor, rows: slice) -> Tensor:
    return torch.add(qa[:, :, rows, None, :], ka[:, :, None, :, :]).tanh_()  # (b, h, c, j, a)


class _Blocks(torch.autograd.Function):
    @staticmethod
    def forward(ctx, qa, ka, w, block):
        b, h, i, a = qa.shape
        j = ka.shape[2]
        out = torch.empty(b, h, i, j, dtype=qa.dtype, device=qa.device)
        wv = w.view(1, h, a, 1)
        for start in range(0, i, block):
            rows = slice(start, min(start + block, i))
            t = _tanh_block(qa, ka, rows)
            c = t.shape[2]
            out[:, :, rows] = torch.matmul(t.view(b, h, c * j, a), wv).view(b, h, c, j)
        ctx.save_for_backward(qa, ka, w)
        ctx.block = block
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        qa, ka, w = ctx.saved_tensors
        b, h, i, a = qa.shape
        j = ka.shape[2]
        grad = grad.to(qa.dtype)
        dqa, dka, dw = torch.empty_like(qa), torch.zeros_like(ka), torch.zeros_like(w)
        # g w (1 - t^2) summed over keys (for a_i) or queries (for c_j) is w (sum g - sum g t^2):
        # w and the 1 apply to the sums, not to every element of the block
        for start in range(0, i, ctx.block):
            rows = slice(start, min(start + ctx.block, i))
            t = _tanh_block(qa, ka, rows)
            c = t.shape[2]
            g = grad[:, :, rows]  # (b, h, c, j)
            # dw: one product per batch and head, (1, c j) @ (c j, a), not a broadcast
            dw += torch.matmul(g.reshape(b, h, 1, c * j), t.view(b, h, c * j, a)).sum(0)[:, 0]
            d = t.mul_(t).mul_(g.unsqueeze(-1))  # g t^2, (b, h, c, j, a)
            dqa[:, :, rows] = g.sum(3, keepdim=True) - d.sum(3)
            dka += g.sum(2).unsqueeze(-1) - d.sum(2)
        wv = w.view(1, h, 1, a)
        return dqa.mul_(wv), dka.mul_(wv), dw, None
