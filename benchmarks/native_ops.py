"""attnlab.native's fused CPU operators against the PyTorch operators they replace, side by side.

Forward and backward (``torch.autograd.grad`` of the input, and of batch norm's affine
parameters) at the shapes of the Fashion-MNIST hybrid's stem (batch 128: 28x28x32, 14x14x64,
7x7x112; its two 2x2 max poolings after the first two), channels last, in bfloat16 (what a
convolution gives under autocast) and float32. The two paths take turns over ``--rounds``;
each figure is the median of its rounds (time_call's autorange).

    python benchmarks/native_ops.py [--rounds 3] [--min-time 0.5] [--threads 2]

Written for issue 34 (BENCHMARKS.md, "A fused batch norm and ReLU, and max pooling").
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from common import machine
from torch import nn

from attnlab.lab.bench import time_call
from attnlab.native import BatchNormReLU2d, MaxPool2x2, unavailable_reason

SHAPES = [(128, 32, 28, 28), (128, 64, 14, 14), (128, 112, 7, 7)]


def _step(layer, x: torch.Tensor, dy: torch.Tensor, *, relu: bool = False):
    inputs = [x, *layer.parameters()] if isinstance(layer, nn.Module) else [x]

    def step() -> None:
        y = F.relu(layer(x)) if relu else layer(x)
        torch.autograd.grad(y, inputs, dy)

    return step


def _cases(dtype: torch.dtype):
    """(operator, shape, PyTorch's step, the fused step) on seeded channels-last tensors."""
    for k, shape in enumerate(SHAPES):
        g = torch.Generator().manual_seed(k)
        x = torch.randn(shape, generator=g).to(dtype).to(memory_format=torch.channels_last)
        dy = torch.randn(shape, generator=g).to(dtype).to(memory_format=torch.channels_last)
        x.requires_grad_()
        fused = BatchNormReLU2d(shape[1])
        assert fused.fused(x)
        yield ("batch norm, ReLU", shape, _step(nn.BatchNorm2d(shape[1]), x, dy, relu=True),
               _step(fused, x, dy))  # fmt: skip
        if k < 2:  # the stages that end in a pooling
            pooled = dy[:, :, ::2, ::2].contiguous(memory_format=torch.channels_last)
            assert MaxPool2x2().fused(x)
            yield ("max pool 2x2", shape, _step(lambda t: F.max_pool2d(t, 2), x, pooled),
                   _step(MaxPool2x2(), x, pooled))  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--min-time", type=float, default=0.5, help="seconds measured per figure")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if unavailable_reason() is not None:
        raise SystemExit(f"the fused operators are not available: {unavailable_reason()}")
    print(f"machine: {machine()}\n")
    print("| operator | dtype | input (b, c, h, w) | PyTorch (ms) | fused (ms) | ratio |")
    print("|---|---|---|---:|---:|---:|")
    for dtype in (torch.bfloat16, torch.float32):
        for op, shape, pytorch, fused in _cases(dtype):
            times: dict[str, list[float]] = {"pytorch": [], "fused": []}
            for _ in range(args.rounds):
                for name, step in (("pytorch", pytorch), ("fused", fused)):
                    times[name].append(time_call(step, min_time=args.min_time) * 1e3)
            a, b = statistics.median(times["pytorch"]), statistics.median(times["fused"])
            name = str(dtype).removeprefix("torch.")
            print(f"| {op} | {name} | {shape} | {a:.2f} | {b:.2f} | **{a / b:.2f}x** |")


if __name__ == "__main__":
    main()
