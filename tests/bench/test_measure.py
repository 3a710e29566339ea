"""The benchmarks' measurements: the memory probe measures what it claims, the timer counts
its calls and keeps the caller's thread count."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.bench import peak_tensor_bytes, time_call

MB = 1_000_000


def test_peak_tensor_bytes_counts_live_tensors_at_their_peak():
    def run():
        a = torch.ones(MB)  # 4 MB
        b = torch.ones(2 * MB)  # 8 MB: 12 MB live
        del a
        c = b * 2  # 8 MB: 16 MB live at the peak
        del b
        return c  # 8 MB still alive at the end

    peak, out = peak_tensor_bytes(run)
    assert abs(peak - 16 * MB) < 1024 and out.numel() == 2 * MB  # (+ a few scalar tensors)
    assert peak_tensor_bytes(lambda: None)[0] == 0
    existing = torch.ones(4 * MB)  # tensors made before the call are not counted
    assert peak_tensor_bytes(lambda: existing.add_(1))[0] < 1024


def test_peak_tensor_bytes_sees_the_backward_pass():
    x = torch.randn(256, 256, requires_grad=True)  # 256 KiB

    def run():
        (x @ x).sum().backward()

    peak, _ = peak_tensor_bytes(run)
    assert peak >= 2 * x.numel() * 4  # the product and x.grad at least
    assert x.grad is not None


class _Counter:
    """A call that counts how often it runs and the thread count it saw."""

    def __init__(self) -> None:
        self.calls, self.threads = 0, set()

    def __call__(self) -> None:
        self.calls += 1
        self.threads.add(torch.get_num_threads())


def test_time_call_with_a_fixed_count_runs_two_warmups_and_the_repeats():
    fn = _Counter()
    seconds = time_call(fn, repeats=7)
    assert fn.calls == 7 + 2 and seconds > 0


def test_time_call_keeps_the_callers_thread_count():
    # torch.utils.benchmark.Timer would run on one thread unless told otherwise.
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        fn = _Counter()
        time_call(fn, repeats=1)
        time_call(fn, min_time=0.01)
        assert fn.threads == {2}
    finally:
        torch.set_num_threads(previous)


def test_time_call_with_min_time_measures_blocks_until_the_time_is_reached():
    fn = _Counter()
    seconds = time_call(fn, min_time=0.01)
    assert seconds > 0 and fn.calls > 10  # a block of many calls: the clock's cost amortised


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"repeats": 0}, "repeats must be at least 1, got 0"), ({"min_time": -1.0}, "min_time")],
)
def test_time_call_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        time_call(lambda: None, **kwargs)


def test_time_interleaved_reverses_the_order_every_round_and_takes_medians(monkeypatch):
    from attnlab.lab.bench import measure

    log: list[str] = []
    seconds = {"a": iter([3.0, 1.0, 2.0]), "b": iter([5.0, 4.0, 9.0])}

    def fake_time_call(fn, *, min_time):
        name = fn()
        log.append(name)
        return next(seconds[name])

    monkeypatch.setattr(measure, "time_call", fake_time_call)
    result = measure.time_interleaved({"a": lambda: "a", "b": lambda: "b"}, rounds=3)
    assert log == ["a", "b", "b", "a", "a", "b"]  # neither always goes first
    assert result == {"a": 2.0, "b": 5.0}
    with pytest.raises(ValueError, match="rounds must be at least 1, got 0"):
        measure.time_interleaved({"a": lambda: "a"}, rounds=0)
