"""Shared helpers for the benchmarks: timing, peak memory in a fresh process, machine info."""

from __future__ import annotations

import multiprocessing as mp
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable

import torch


def timeit(fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1, min_time: float = 0.0):
    """Median wall time of ``fn`` over ``repeats`` calls, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    t_start = time.perf_counter()
    while len(times) < repeats or time.perf_counter() - t_start < min_time:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if len(times) >= 50:
            break
    return statistics.median(times)


def _peak_child(setup, run, args, queue) -> None:
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", torch.get_num_threads())))
    state = setup(*args)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = run(state)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put(((after - before) * 1024, out))


def peak_extra_memory(setup, run, *args):
    """Peak resident memory (bytes) that ``run(setup(*args))`` adds, measured in a fresh process.

    ``ru_maxrss`` is the process's high-water mark; measuring its growth across ``run`` counts
    every tensor the computation allocates at its peak (inputs are made in ``setup`` and
    excluded). Returns ``(bytes, run's return value)``.
    """
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_peak_child, args=(setup, run, args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, ISA {torch.backends.cpu.get_cpu_capability()}"
    )


def matmul_gflops(n: int = 2048, dtype=torch.float32) -> float:
    """The matmul rate of this machine, measured now (GFLOP/s of an n x n x n product)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    t = timeit(lambda: a @ b, repeats=5)
    return 2 * n**3 / t / 1e9
