"""How the benchmarks measure: time per call, peak tensor memory, and a memory estimate.

Time: :func:`time_call` is the one timer of the package and of ``benchmarks/``; it wraps
:class:`torch.utils.benchmark.Timer`, which warms up, keeps the caller's thread count and
synchronises CUDA before reading the clock.

Peak memory on CPU: PyTorch keeps no allocator statistics for CPU tensors (there is no
``torch.cpu.max_memory_allocated``), and the process's RSS mixes tensors with the allocator's
cached pages, library code and untouched (``torch.empty``) pages. Instead the profiler's
memory events (``profile_memory=True``) are replayed: each allocation and free of the c10 CPU
allocator arrives with its size and time stamp, so the running sum over the measured call is
its live tensor bytes and its maximum the peak the call adds on top of what existed before.
:func:`peak_tensor_bytes` is checked against known allocations in the tests.

Legend: ``b`` batch, ``h`` heads, ``n`` tokens, ``d`` head dim.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.benchmark import Timer

from attnlab.efficient.local import default_block

__all__ = [
    "time_call",
    "time_interleaved",
    "matmul_peak",
    "peak_tensor_bytes",
    "training_step_cost",
    "estimate_bytes",
    "available_bytes",
]


def time_call(fn: Callable[[], Any], *, repeats: int = 5, min_time: float = 0.0) -> float:
    """Seconds per call of ``fn()``, measured with :class:`torch.utils.benchmark.Timer`.

    * ``min_time == 0``: a fixed count, ``Timer.timeit(repeats)``: ``max(2, repeats // 100)``
      warm-up calls, then ``repeats`` calls back to back; returns their mean. The cost is
      known in advance (``repeats + 2`` calls for ``repeats < 200``), which the kernel
      sweep's time budget relies on.
    * ``min_time > 0``: ``Timer.blocked_autorange(min_run_time=min_time)``: warm-up calls
      that size a block (enough calls that the clock's overhead is negligible), then blocks
      until ``min_time`` seconds are measured; returns the median over blocks of the time
      per call, robust to a busy machine's outliers.

    The timer runs with the caller's ``torch.get_num_threads()`` (``Timer`` would use one
    thread by default) and, like :mod:`timeit`, with Python's garbage collector paused. Set ``fn``'s thread count, autocast and grad mode inside ``fn`` or
    around this call.

    Args:
        fn: the call to time; its result is discarded.
        repeats: timed calls in fixed-count mode (at least 1).
        min_time: seconds of measurement in autorange mode (0: fixed count).

    Returns:
        Seconds per call.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if min_time < 0:
        raise ValueError(f"min_time must be >= 0 seconds, got {min_time}")
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    if min_time > 0:
        return timer.blocked_autorange(min_run_time=min_time).median
    return timer.timeit(repeats).median


def time_interleaved(
    fns: dict[str, Callable[[], Any]], *, rounds: int = 6, min_time: float = 0.5
) -> dict[str, float]:
    """Seconds per call of each ``fns[name]()``, measured in turns: median over ``rounds``.

    Timing ``a`` then ``b`` once each favours one of them: the first pays the process's
    warm-up (allocator, caches, thread pool) and a shared machine's load drifts between the
    two. Here every round times each function with :func:`time_call` (``min_time`` seconds),
    the order reversed every other round, and each name gets the median of its rounds.

    Args:
        fns: name -> the call to time.
        rounds: rounds (at least 1; even, so each function is first as often as last).
        min_time: seconds measured per function per round.

    Returns:
        name -> seconds per call (median over rounds).
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    times: dict[str, list[float]] = {name: [] for name in fns}
    order = list(fns)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            times[name].append(time_call(fns[name], min_time=min_time))
    return {name: statistics.median(t) for name, t in times.items()}


def matmul_peak(dtype: torch.dtype, n: int = 2048, min_time: float = 1.0) -> float:
    """FLOP/s of a square matrix product in ``dtype`` on the CPU, with the caller's threads
    (the peak a training step's FLOP/s are compared with): ``n x n x n``, or the first of 256,
    512, ... that takes a quarter of a second (bfloat16 without bfloat16 instructions is
    emulated, hundreds of times slower than float32), timed by :func:`time_call` for
    ``min_time`` seconds (0: five calls)."""
    size = 256
    while True:
        a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
        t0 = time.perf_counter()
        a @ b
        if size >= n or time.perf_counter() - t0 > 0.25:
            break
        size *= 2
    return 2 * size**3 / time_call(lambda: a @ b, min_time=min_time)


def peak_tensor_bytes(fn: Callable[[], Any]) -> tuple[int, Any]:
    """Peak bytes of CPU tensors that ``fn()`` holds at once beyond what existed before it.

    Replays the profiler's allocator events in time order; returns ``(peak, fn's result)``.
    Tensors ``fn`` returns count until they are freed (a returned tensor still alive at the
    end is part of the peak).
    """
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _quiet_stderr():  # kineto logs every start and stop on the C-level stderr
        prof.start()
    try:
        result = fn()
    finally:
        with _quiet_stderr():
            prof.stop()
    # The kineto results carry every allocator event with a signed size and a time stamp
    # (FunctionEvent lists fold allocations into their op, which hides the peak inside it).
    events = prof.profiler.kineto_results.events()
    deltas = sorted(
        (e.start_ns(), e.nbytes())
        for e in events
        if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
    )
    live = peak = 0
    for _, nbytes in deltas:
        live += nbytes
        peak = max(peak, live)
    return peak, result


def training_step_cost(
    model: torch.nn.Module,
    loss: Callable[[], torch.Tensor],
    *,
    repeats: int = 3,
    memory: bool = True,
) -> tuple[float, int | None]:
    """``(seconds, peak bytes)`` of one training step of ``model``: its gradients cleared,
    ``loss()`` (the forward pass and the loss; set autocast inside it) and its backward, timed
    by :func:`time_call` (``repeats`` calls) and, with ``memory``, measured by
    :func:`peak_tensor_bytes` (else None: one profiled step fewer)."""

    def step() -> None:
        model.zero_grad(set_to_none=True)
        loss().backward()

    seconds = time_call(step, repeats=repeats)
    return seconds, peak_tensor_bytes(step)[0] if memory else None


@contextlib.contextmanager
def _quiet_stderr():
    """Silence file descriptor 2 (C++ logging) for the duration; Python errors still raise."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


#: score-like elements each query materialises, per head (beyond O(d) vectors), by kernel
def _per_query(name: str, n: int, opts: dict[str, Any], d: int) -> float:
    block = opts.get("block")
    if name in ("reference", "synthesizer"):
        return n
    if name == "sdpa":
        return 0
    if name in ("local", "longformer"):
        w = opts.get("window", 128)
        c = block or default_block(w)
        return c + 2 * w + len(opts.get("global_tokens", (0,)))
    if name == "bigbird":
        c = block or 64
        per = 2 * opts.get("window_blocks", 1) + 1 + opts.get("random_blocks", 3)
        return (per + opts.get("global_blocks", 1)) * c
    if name == "linformer":
        return opts.get("k", 256)
    if name == "performer":
        return 2 * opts.get("features", 256)
    if name == "linear":
        return (block or opts.get("chunk") or 64) + d
    if name == "nystrom":
        return 3 * opts.get("landmarks", 64)
    if name == "reformer":
        buckets = opts.get("buckets", 32)
        return opts.get("rounds", 2) * 2 * (block or opts.get("chunk") or -(-n // buckets))
    if name == "sinkhorn":
        return 2 * (block or 64)
    return n  # unknown: assume quadratic


def estimate_bytes(
    name: str, n: int, opts: dict[str, Any], *, batch: int, heads: int, d: int, mode: str
) -> int:
    """A deliberately generous estimate of the peak bytes of one measurement, used only to skip
    what would not fit: ``(b h n)`` queries times the elements each materialises, a few copies
    each (more when the backward keeps them), plus ``O(b h n d)`` vectors and the ``h L^2``
    random synthesizer's parameters."""
    copies = 4 if mode == "fwd" else 10
    rows = batch * heads * n
    total = rows * _per_query(name, n, opts, d) * copies + rows * d * 16
    if name == "synthesizer" and opts.get("mode") == "random":
        total += heads * opts.get("max_len", n) ** 2 * (1 if mode == "fwd" else 3)
    return int(total * 4)


def available_bytes() -> int:
    """Memory the system can still give (``MemAvailable``), or 8 GiB if it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30
