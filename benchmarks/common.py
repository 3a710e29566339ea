"""Shared helpers for the benchmarks: timing, the matmul rate, machine info."""

from __future__ import annotations

import os
import platform
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
