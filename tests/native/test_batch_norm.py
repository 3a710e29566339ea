"""attnlab.native.BatchNormReLU2d: ``F.relu(nn.BatchNorm2d(x))`` to float64 (output, the three
gradients, the running statistics), closer to it than PyTorch's own operators, the same
whatever the number of threads, a BatchNorm2d's state dict, and PyTorch's path wherever the
fused one does not apply or cannot be built."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlab.native import BatchNormReLU2d, build, unavailable_reason

needs_build = pytest.mark.skipif(
    unavailable_reason() is not None, reason=f"the fused operator: {unavailable_reason()}"
)

CL = torch.channels_last


def _layers(c: int, momentum: float | None = 0.1) -> tuple[BatchNormReLU2d, nn.BatchNorm2d]:
    """The fused layer with random affine parameters, and a float64 BatchNorm2d of the same."""
    fused = BatchNormReLU2d(c, momentum=momentum)
    with torch.no_grad():
        fused.weight.uniform_(0.5, 1.5)
        fused.bias.normal_()
    reference = nn.BatchNorm2d(c, momentum=momentum).double()
    reference.load_state_dict(fused.state_dict())
    return fused, reference


def _input(shape, dtype, *, mean=1.0, std=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * std + mean
    return x.to(dtype).to(memory_format=CL)


def _run(layer, x, dy, *, relu=False):
    """Output and the gradients of x, weight and bias of one training step of ``layer`` (then
    ReLU if ``relu``)."""
    x = x.detach().clone().requires_grad_()
    layer.weight.grad = layer.bias.grad = None
    y = F.relu(layer(x)) if relu else layer(x)
    y.backward(dy.to(y.dtype))
    return y, x.grad, layer.weight.grad, layer.bias.grad


def _errors(got, want):
    return [(g.double() - w).abs().max().item() / w.abs().max().item() for g, w in zip(got, want)]


@needs_build
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(8, 16, 5, 7), (3, 40, 11, 13), (2, 3, 1, 300)])
def test_equals_batch_norm_then_relu_in_float64_better_than_pytorch(dtype, shape):
    fused, reference = _layers(shape[1])
    x = _input(shape, dtype)
    dy = torch.randn(shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    dy = dy.to(dtype).to(memory_format=CL)
    assert fused.fused(x)
    want = _run(reference, x.double(), dy.double(), relu=True)
    got = _run(fused, x, dy)
    pytorch = nn.BatchNorm2d(shape[1])
    pytorch.load_state_dict(reference.state_dict())
    theirs = _run(pytorch, x, dy, relu=True)
    tolerance = 2e-6 if dtype == torch.float32 else 1e-2  # bfloat16's rounding of y and dx
    for name, ours, torchs in zip(("y", "dx", "dweight", "dbias"), _errors(got, want),
                                  _errors(theirs, want)):  # fmt: skip
        assert ours < tolerance, (name, ours)
        assert ours <= 1.05 * torchs + 1e-7, (name, ours, torchs)
    assert got[0].dtype == got[1].dtype == dtype
    assert got[0].is_contiguous(memory_format=CL) and got[1].is_contiguous(memory_format=CL)
    for buffer in ("running_mean", "running_var"):
        torch.testing.assert_close(getattr(fused, buffer).double(), getattr(reference, buffer),
                                   rtol=1e-5, atol=1e-6)  # fmt: skip
    assert fused.num_batches_tracked.item() == reference.num_batches_tracked.item() == 1


@needs_build
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_mean_far_from_zero_costs_no_more_precision_than_pytorchs(dtype):
    """A mean 1,000 standard deviations from zero: the variance and the gradients (taken about
    the mean, not as a sum of large terms that cancel) as close to float64 as PyTorch's."""
    fused, reference = _layers(8)
    x = _input((16, 8, 12, 12), dtype, mean=1000.0, std=1.0)
    dy = _input((16, 8, 12, 12), dtype, mean=0.0, std=1.0, seed=4)
    want = _run(reference, x.double(), dy.double(), relu=True)
    pytorch = nn.BatchNorm2d(8)
    pytorch.load_state_dict(reference.state_dict())
    ours, theirs = _errors(_run(fused, x, dy), want), _errors(_run(pytorch, x, dy, relu=True), want)
    for name, a, b in zip(("y", "dx", "dweight", "dbias"), ours, theirs):
        assert a <= 1.5 * b + 1e-6, (name, a, b)
    torch.testing.assert_close(fused.running_var.double(), reference.running_var, rtol=1e-4,
                               atol=0)  # fmt: skip


@needs_build
def test_a_gradient_in_another_layout_is_taken():
    """dy in NCHW (as a layer after it may give): copied to rows, the same result."""
    fused, reference = _layers(6)
    x = _input((4, 6, 5, 5), torch.float32)
    dy = _input((4, 6, 5, 5), torch.float32, mean=0.0, std=1.0, seed=5).contiguous()
    assert not dy.is_contiguous(memory_format=CL)
    got, want = _run(fused, x, dy), _run(reference, x.double(), dy.double(), relu=True)
    assert max(_errors(got, want)) < 2e-6


@needs_build
def test_running_statistics_over_steps_and_the_cumulative_average():
    for momentum in (0.1, None):
        fused, reference = _layers(6, momentum)
        for seed in range(3):
            x = _input((4, 6, 9, 9), torch.float32, seed=seed)
            with torch.no_grad():
                fused(x)
                reference(x.double())
        for buffer in ("running_mean", "running_var"):  # float32 against float64
            torch.testing.assert_close(getattr(fused, buffer).double(),
                                       getattr(reference, buffer), rtol=1e-6, atol=1e-7)  # fmt: skip
        assert fused.num_batches_tracked.item() == 3


@needs_build
def test_the_same_bits_whatever_the_number_of_threads():
    fused, _ = _layers(32)
    x = _input((16, 32, 14, 14), torch.bfloat16)
    dy = _input((16, 32, 14, 14), torch.bfloat16, mean=0.0, std=1.0, seed=3)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _run(fused, x, dy)
        torch.set_num_threads(2)
        two = _run(fused, x, dy)
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(one, two):
        assert torch.equal(a, b)


@needs_build
def test_under_autocast_a_convolution_feeds_it_bfloat16_channels_last():
    torch.manual_seed(0)
    stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, bias=False), BatchNormReLU2d(8))
    x = torch.randn(4, 1, 10, 10).to(memory_format=CL)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        features = stem[0](x)
        assert stem[1].fused(features)
        y = stem[1](features)
    y.float().sum().backward()
    assert y.dtype == torch.bfloat16
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in stem.parameters())


def test_pytorch_path_where_the_fused_one_does_not_apply():
    """Evaluation, a contiguous (NCHW) input, float64: exactly F.relu(BatchNorm2d(x))."""
    fused, _ = _layers(5)
    plain = nn.BatchNorm2d(5)
    plain.load_state_dict(fused.state_dict())
    x = _input((4, 5, 6, 6), torch.float32)
    cases = [(x.contiguous(), True), (x.double(), True), (x, False)]
    for inp, training in cases:
        fused.train(training)
        plain.train(training)
        layer = plain.double() if inp.dtype == torch.float64 else plain.float()
        fused_ = fused.double() if inp.dtype == torch.float64 else fused.float()
        assert not fused_.fused(inp)
        assert torch.equal(fused_(inp), F.relu(layer(inp)))


def test_one_value_per_channel_in_training_is_pytorchs_error():
    layer = BatchNormReLU2d(3)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        layer(torch.randn(1, 3, 1, 1).to(memory_format=CL))


def test_state_dict_is_a_batch_norms_so_old_checkpoints_load():
    old = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    new = nn.Sequential(nn.Conv2d(1, 4, 3), BatchNormReLU2d(4))
    assert old.state_dict().keys() == new.state_dict().keys()
    new.load_state_dict(old.state_dict())


def test_without_the_operator_it_says_why_and_runs_pytorchs(monkeypatch):
    import torch.utils.cpp_extension

    def no_compiler(**kwargs):
        raise RuntimeError("Error building extension 'attnlab_native'\nmore lines")

    monkeypatch.setattr(torch.utils.cpp_extension, "load", no_compiler)
    build._build.cache_clear()
    try:
        assert build.load() is None
        assert unavailable_reason() == (
            "could not be built (RuntimeError: Error building extension 'attnlab_native')"
        )
        layer = BatchNormReLU2d(4)
        x = _input((2, 4, 3, 3), torch.float32)
        assert not layer.fused(x)
        plain = nn.BatchNorm2d(4)
        assert torch.equal(layer(x), F.relu(plain(x)))
        monkeypatch.setenv("ATTNLAB_NATIVE", "0")
        build._build.cache_clear()
        assert unavailable_reason() == "ATTNLAB_NATIVE=0"
    finally:
        monkeypatch.undo()
        build._build.cache_clear()


def test_a_lock_left_by_a_killed_build_is_removed(tmp_path, monkeypatch):
    """torch's builder waits for a build directory's lock file to go, with no time limit."""
    import os
    import time

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    for age, kept in ((build.STALE_LOCK_S + 60, False), (5, True)):
        lock = tmp_path / "ops" / "lock"
        lock.parent.mkdir(exist_ok=True)
        lock.touch()
        os.utime(lock, (time.time() - age, time.time() - age))
        assert build._build_directory("ops") == tmp_path / "ops"
        assert lock.exists() == kept
