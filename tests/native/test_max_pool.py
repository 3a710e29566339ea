"""attnlab.native.MaxPool2x2: F.max_pool2d(x, 2) bit for bit, values and gradients, ties, NaN and
odd sizes included; PyTorch's path where the fused one does not apply."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.native import MaxPool2x2, unavailable_reason

needs_build = pytest.mark.skipif(
    unavailable_reason() is not None, reason=f"the fused operator: {unavailable_reason()}"
)


def _both(x: torch.Tensor, dy_seed: int = 1):
    """(output, input gradient) of MaxPool2x2 and of F.max_pool2d on the same x and dy."""
    x = x.detach().requires_grad_()
    ours = MaxPool2x2()(x)
    dy = torch.randn(ours.shape, generator=torch.Generator().manual_seed(dy_seed)).to(x.dtype)
    (dx,) = torch.autograd.grad(ours, x, dy)
    theirs = F.max_pool2d(x, 2)
    (dx_theirs,) = torch.autograd.grad(theirs, x, dy)
    return (ours, dx), (theirs, dx_theirs)


@needs_build
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(4, 8, 6, 6), (3, 5, 7, 9), (2, 3, 2, 3), (1, 40, 28, 28)])
@pytest.mark.parametrize("ties", [False, True])
def test_equals_f_max_pool2d_bit_for_bit(dtype, shape, ties):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    if ties:  # ReLU's zeros, and values rounded to a few levels: many windows tie
        x = torch.relu(x).mul(2).round()
    x = x.to(memory_format=torch.channels_last)
    assert MaxPool2x2().fused(x)
    (y, dx), (want_y, want_dx) = _both(x)
    assert torch.equal(y, want_y) and torch.equal(dx, want_dx)
    assert y.is_contiguous(memory_format=torch.channels_last)


@needs_build
def test_nan_and_infinities_go_where_pytorchs_go():
    nan, inf = float("nan"), float("inf")
    windows = [[1.0, nan, nan, 2.0], [nan, 1.0, 2.0, 3.0], [-inf, -inf, -inf, -inf],
               [inf, inf, 0.0, inf], [0.0, -0.0, 0.0, -0.0]]  # fmt: skip
    x = torch.tensor(windows).view(1, len(windows), 2, 2).to(memory_format=torch.channels_last)
    (y, dx), (want_y, want_dx) = _both(x)
    torch.testing.assert_close(y, want_y, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(dx, want_dx)


def test_pytorchs_path_elsewhere():
    x = torch.randn(2, 3, 6, 6, generator=torch.Generator().manual_seed(0))
    for other in (x, x.double().to(memory_format=torch.channels_last)):  # NCHW; float64
        assert not MaxPool2x2().fused(other)
        (y, dx), (want_y, want_dx) = _both(other)
        assert torch.equal(y, want_y) and torch.equal(dx, want_dx)


@needs_build
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_negative_zero_gradient_arrives_as_pytorchs_positive_zero(dtype):
    """PyTorch adds dy into a zeroed dx: -0 arrives as +0."""
    x = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0)).to(dtype)
    x = x.to(memory_format=torch.channels_last).requires_grad_()
    dy = torch.full((2, 3, 2, 2), -0.0, dtype=dtype).to(memory_format=torch.channels_last)
    (ours,) = torch.autograd.grad(MaxPool2x2()(x), x, dy)
    (theirs,) = torch.autograd.grad(F.max_pool2d(x, 2), x, dy)
    assert torch.equal(ours.signbit(), theirs.signbit()) and not ours.signbit().any()
