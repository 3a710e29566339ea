"""Benchmark tooling: how fast, how big and how accurate the attention kernels are.

Not kernel code: this package imports the kernels (:mod:`attnlab.efficient`) and the exact
path, never the other way round.

* :mod:`~attnlab.lab.bench.measure`: :func:`time_call` (the one timer, on
  :class:`torch.utils.benchmark.Timer`), :func:`time_interleaved` (several calls timed in
  turns, for side-by-side ratios), :func:`peak_tensor_bytes` (peak live CPU tensor
  bytes of a call), :func:`matmul_peak` (FLOP/s of a square matmul in a dtype),
  :func:`estimate_bytes` (a generous estimate used to skip what won't fit).
* :mod:`~attnlab.lab.bench.attention`: :func:`bench_attention` (time and memory over sequence
  lengths, with crossovers against SDPA), :func:`approximation_errors`,
  :func:`bench_recurrent_linear`.
* :mod:`~attnlab.lab.bench.report`: :func:`crossovers`, the plot and the CSV.
* :mod:`~attnlab.lab.bench.cli`: ``attnlab bench attention``.
"""

from __future__ import annotations

from attnlab.lab.bench.attention import (
    BASELINES,
    approximation_errors,
    bench_attention,
    bench_recurrent_linear,
    scaled_options,
)
from attnlab.lab.bench.measure import (
    available_bytes,
    estimate_bytes,
    matmul_peak,
    peak_tensor_bytes,
    time_call,
    time_interleaved,
    training_step_cost,
)
from attnlab.lab.bench.report import crossovers, plot_bench, write_csv

__all__ = [
    "BASELINES",
    "approximation_errors",
    "available_bytes",
    "bench_attention",
    "bench_recurrent_linear",
    "crossovers",
    "estimate_bytes",
    "matmul_peak",
    "peak_tensor_bytes",
    "plot_bench",
    "scaled_options",
    "time_call",
    "time_interleaved",
    "training_step_cost",
    "write_csv",
]
