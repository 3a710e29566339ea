"""Shared helpers for the benchmarks: the matmul rate, machine info, report jobs that may fail.

Timing is the library's one timer, :func:`attnlab.lab.bench.time_call`
(:class:`torch.utils.benchmark.Timer`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from attnlab.lab.bench import matmul_peak
from attnlab.lab.train.precision import cpu_model

if TYPE_CHECKING:
    from attnlab.lab.report.jobs import Job, JobResult


def machine() -> str:
    return (
        f"{cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, ISA {torch.backends.cpu.get_cpu_capability()}"
    )


def matmul_gflops(n: int = 2048, dtype=torch.float32) -> float:
    """The matmul rate of this machine, measured now (GFLOP/s of an n x n x n product)."""
    return matmul_peak(dtype, n, min_time=0.0) / 1e9


def parse_with_options(ap: argparse.ArgumentParser) -> argparse.Namespace:
    """``ap.parse_args()`` for a parser with ``--options`` (``nargs="*"``) taking a run's
    ``--a.b=v`` options: argparse reads a value that starts with ``--`` as an option of its
    own, so every ``--a.b=v`` it does not know joins ``args.options``."""
    args, rest = ap.parse_known_args()
    unknown = [r for r in rest if not (r.startswith("--") and "." in r.split("=")[0])]
    if unknown:
        ap.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.options += rest
    return args


def train_jobs(jobs: Sequence[Job], out: str | Path) -> list[JobResult | str]:
    """Each job's result, run by :func:`attnlab.lab.report.run.run_jobs` into ``out/jobs/KEY``
    where it has not finished there (read back where it has), or the first line of the error
    that stopped its run: one failed run (a kernel that cannot train) does not stop the others.

    Raises:
        SystemExit: a job with a bad option (the message names the job and the option), before
            anything trains.
    """
    from attnlab.lab.report.run import run_jobs
    from attnlab.lab.train import RunError

    for job in jobs:
        try:
            job.config()  # resolves the options
        except ValueError as error:
            raise SystemExit(f"{job.label or job.task}: {error}") from None
    results: list[JobResult | str] = []
    for job in jobs:
        try:
            results.append(run_jobs([job], out)[0])
        except (RunError, RuntimeError) as error:
            results.append((str(error).splitlines() or [type(error).__name__])[0])
    return results
