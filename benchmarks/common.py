"""Shared helpers for the benchmarks: the matmul rate, machine info.

Timing is the library's one timer, :func:`attnlab.lab.bench.time_call`
(:class:`torch.utils.benchmark.Timer`).
"""

from __future__ import annotations

import os
import platform

import torch

from attnlab.lab.bench import time_call


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
    t = time_call(lambda: a @ b, repeats=5)
    return 2 * n**3 / t / 1e9
