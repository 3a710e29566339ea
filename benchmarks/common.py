"""Shared helpers for the benchmarks: the matmul rate, machine info.

Timing is the library's one timer, :func:`attnlab.lab.bench.time_call`
(:class:`torch.utils.benchmark.Timer`).
"""

from __future__ import annotations

import os

import torch

from attnlab.lab.bench import matmul_peak
from attnlab.lab.train.precision import cpu_model


def machine() -> str:
    return (
        f"{cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, ISA {torch.backends.cpu.get_cpu_capability()}"
    )


def matmul_gflops(n: int = 2048, dtype=torch.float32) -> float:
    """The matmul rate of this machine, measured now (GFLOP/s of an n x n x n product)."""
    return matmul_peak(dtype, n, min_time=0.0) / 1e9
