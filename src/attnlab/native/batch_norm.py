r"""Batch normalisation and ReLU as one layer, fused on a CPU in training.

.. math::
    y = \max\!\Big(0,\; \gamma \frac{x - \mu_B}{\sqrt{\sigma_B^2 + \epsilon}} + \beta\Big)

with :math:`\mu_B, \sigma_B^2` the batch's mean and (biased) variance per channel, exactly
``F.relu(nn.BatchNorm2d(...)(x))``. In training, on a CPU, for a channels-last float32 or
bfloat16 input (what a convolution gives under autocast in the lab's image models), it runs the
compiled operator of ``batch_norm_relu.cpp``: two passes over the activations forward and two
backward, where PyTorch's four operators take seven, and only the input kept for the backward
pass. In bfloat16 on the Fashion-MNIST hybrid's stem it ran the pair 1.5-1.8x as fast, and
the whole training step 1.12x (BENCHMARKS.md, "A fused batch norm and ReLU, and max
pooling"). Everywhere else (evaluation, other
layouts or devices, ``torch.compile``, or where the operator could not be built:
:func:`attnlab.native.build.unavailable_reason`) it is PyTorch's batch norm then ReLU.

The fused path's statistics are sums in float over fixed chunks of rows merged in double, so
they do not depend on the number of threads, and are closer to the float64 result than
PyTorch's (tests/native/test_batch_norm.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import build

__all__ = ["BatchNormReLU2d"]


class _Fused(torch.autograd.Function):
    """The compiled forward and backward on ``x`` seen as ``(M, C)`` rows (channels last)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor, eps: float):  # type: ignore[override]
        ops = build.load()
        b, c, h, w = x.shape
        rows = x.permute(0, 2, 3, 1).reshape(b * h * w, c)  # (M, C): a view of channels last
        with torch.profiler.record_function("attnlab::batch_norm_relu"):  # profiles name it
            y, mean, invstd, var = ops.batch_norm_relu_forward(rows, weight, bias, eps)
        ctx.save_for_backward(rows, weight, bias, mean, invstd)
        ctx.mark_non_differentiable(mean, var)
        return y.view(b, h, w, c).permute(0, 3, 1, 2), mean, var  # (b, c, h, w) channels last

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dy: Tensor, _dmean: Tensor, _dvar: Tensor):  # type: ignore[override]
        rows, weight, bias, mean, invstd = ctx.saved_tensors
        b, c, h, w = dy.shape
        dy_rows = dy.permute(0, 2, 3, 1).reshape(b * h * w, c)  # a copy only if not channels last
        with torch.profiler.record_function("attnlab::batch_norm_relu_backward"):
            dx, dweight, dbias = build.load().batch_norm_relu_backward(
                dy_rows.contiguous(), rows, weight, bias, mean, invstd
            )
        return dx.view(b, h, w, c).permute(0, 3, 1, 2), dweight, dbias, None


class BatchNormReLU2d(nn.BatchNorm2d):
    """``nn.BatchNorm2d`` followed by ReLU: the same parameters, buffers and state dict as a
    ``BatchNorm2d`` (a model's checkpoints load either way), fused on a CPU in training (module
    docstring).

    Shapes: x ``(b, c, h, w)`` -> ``(b, c, h, w)``.
    """

    def fused(self, x: Tensor) -> bool:
        """Whether ``forward(x)`` runs the compiled operator."""
        return (
            self.training
            and x.device.type == "cpu"
            and x.dim() == 4
            and x.dtype in (torch.float32, torch.bfloat16)
            and x.is_contiguous(memory_format=torch.channels_last)
            and x.numel() > x.shape[1]  # more than one value per channel
            and (self.weight is None or self.weight.dtype == torch.float32)
            and (self.running_mean is None or self.running_mean.dtype == torch.float32)
            and not torch.compiler.is_compiling()
            and build.load() is not None
        )

    def forward(self, x: Tensor) -> Tensor:
        if not self.fused(x):
            return F.relu(super().forward(x))
        self._check_input_dim(x)
        c = x.shape[1]
        weight = self.weight if self.weight is not None else x.new_ones(c, dtype=torch.float32)
        bias = self.bias if self.bias is not None else x.new_zeros(c, dtype=torch.float32)
        y, mean, var = _Fused.apply(x, weight, bias, self.eps)
        if self.track_running_stats:  # as nn.BatchNorm2d: the unbiased variance
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                momentum = self.momentum
                if momentum is None:  # a cumulative average
                    momentum = 1.0 / float(self.num_batches_tracked)
                rows = x.numel() // c
                self.running_mean.lerp_(mean, momentum)
                self.running_var.lerp_(var * (rows / (rows - 1)), momentum)
        return y
