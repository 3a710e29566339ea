"""2x2 max pooling with stride 2, fused on a CPU for channels-last activations.

``F.max_pool2d(x, 2)`` exactly (the same values, and the gradient sent to the same element of
each window: the first maximum, or the last NaN), by the compiled operator of ``max_pool.cpp``
for a channels-last float32 or bfloat16 CPU input: PyTorch's kernel writes an int64 index per
output and zeroes the whole input gradient before it scatters into it; this one keeps nothing
but the input, finds each window's maximum again in the backward pass, and writes every
element of the gradient once. Elsewhere (other layouts, dtypes or devices, ``torch.compile``,
or where the operator could not be built) it is ``F.max_pool2d``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from . import build

__all__ = ["MaxPool2x2"]


class _Fused(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:  # type: ignore[override]
        pixels = x.permute(0, 2, 3, 1)  # (b, h, w, c): a contiguous view of channels last
        ctx.save_for_backward(pixels)
        with torch.profiler.record_function("attnlab::max_pool2x2"):  # profiles name it
            y = build.load().max_pool_forward(pixels)  # (b, h / 2, w / 2, c)
        return y.permute(0, 3, 1, 2)  # (b, c, h / 2, w / 2) channels last

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy: Tensor) -> Tensor:  # type: ignore[override]
        (pixels,) = ctx.saved_tensors
        with torch.profiler.record_function("attnlab::max_pool2x2_backward"):
            dx = build.load().max_pool_backward(dy.permute(0, 2, 3, 1).contiguous(), pixels)
        return dx.permute(0, 3, 1, 2)


class MaxPool2x2(nn.MaxPool2d):
    """``nn.MaxPool2d(2)``, fused on a CPU for channels-last inputs (module docstring).

    Shapes: x ``(b, c, h, w)`` -> ``(b, c, h // 2, w // 2)``.
    """

    def __init__(self) -> None:
        super().__init__(2)

    def fused(self, x: Tensor) -> bool:
        """Whether ``forward(x)`` runs the compiled operator."""
        return (
            x.device.type == "cpu"
            and x.dim() == 4
            and x.shape[-2] >= 2
            and x.shape[-1] >= 2
            and x.dtype in (torch.float32, torch.bfloat16)
            and x.is_contiguous(memory_format=torch.channels_last)
            and not torch.compiler.is_compiling()
            and build.load() is not None
        )

    def forward(self, x: Tensor) -> Tensor:
        return _Fused.apply(x) if self.fused(x) else super().forward(x)
