"""Benchmarks of the efficient kernels against exact attention: speed, memory and accuracy.

* :func:`bench_attention`: forward and forward+backward time and peak extra memory of each
  kernel over sequence lengths, next to exact SDPA (``"sdpa"``) and the materialising
  reference path (``"reference"``); writes a CSV, a log-log plot with the crossover lengths
  and the resolved configuration.
* :func:`approximation_errors`: each kernel's error against exact attention on the same inputs.
* :func:`bench_recurrent_linear`: one decoding step of recurrent linear attention against
  re-running the causal parallel form over the prefix.

All measurements are on the attention maths alone: random, already projected ``q, k, v`` of
shape ``(b, h, n, d)``, ``d = dim // heads``. Memory is the peak of live tensor bytes a call
adds (:func:`attnlab.lab.bench.measure.peak_tensor_bytes`); time is
:func:`attnlab.lab.bench.measure.time_call`.

Legend: ``b`` batch, ``h`` heads, ``n`` tokens, ``d`` head dim.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab import masks
from attnlab.efficient import KERNELS, kernel_options, make_kernel
from attnlab.functional import attend
from attnlab.lab.bench.measure import available_bytes, estimate_bytes, peak_tensor_bytes, time_call
from attnlab.lab.bench.report import crossovers, plot_bench, write_csv

__all__ = [
    "bench_attention",
    "approximation_errors",
    "bench_recurrent_linear",
    "scaled_options",
    "BASELINES",
]

#: exact attention measured next to the kernels
BASELINES = ("sdpa", "reference")
FIELDS = [
    "kernel", "mode", "n", "status", "time_s", "peak_bytes", "estimate_bytes", "reason",
    "batch", "heads", "dim", "threads", "repeats", "options",
]  # fmt: skip


def scaled_options(name: str, n: int, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Options for kernel ``name`` at length ``n``: ``max_len = n`` where the kernel has one,
    Reformer's buckets scaled to ~64 tokens each (the paper's bucket size); ``options`` win."""
    out: dict[str, Any] = {}
    if name in KERNELS:
        valid = kernel_options(name)
        if "max_len" in valid:
            out["max_len"] = n
        if name == "reformer":
            out["buckets"] = max(2, (n // 64) // 2 * 2)
    out.update(options or {})
    return out


def _runner(name: str, n: int, opts: dict, *, batch: int, heads: int, dim: int, mode: str):
    """A zero-argument call that runs one measurement (inputs and module built here)."""
    d = dim // heads
    gen = torch.Generator().manual_seed(n)
    q, k, v = (torch.randn(batch, heads, n, d, generator=gen) for _ in range(3))
    if name == "sdpa":
        fn: Callable[..., Tensor] = F.scaled_dot_product_attention
    elif name == "reference":
        fn = lambda q, k, v: attend(q, k, v).out  # noqa: E731
    else:
        kernel = make_kernel(name, dim=dim, heads=heads, **opts).eval()
        fn = lambda q, k, v: kernel(q, k, v)  # noqa: E731
    if mode == "fwd":

        def run() -> None:
            with torch.no_grad():
                fn(q, k, v)

        return run
    leaves = [t.requires_grad_() for t in (q, k, v)]
    grad = torch.randn(batch, heads, n, d, generator=gen)

    def run_bwd() -> None:
        fn(*leaves).backward(grad)
        for t in leaves:
            t.grad = None

    return run_bwd


def _predict_time(history: list[tuple[int, float]], n: int, quadratic: bool) -> float | None:
    """Extrapolate the time at ``n`` from earlier lengths (log-log slope, clipped to [1, 2])."""
    if not history:
        return None
    (n1, t1) = history[-1]
    slope = 2.0 if quadratic else 1.0
    if len(history) >= 2:
        (n0, t0) = history[-2]
        if t0 > 0 and t1 > 0 and n1 > n0:
            slope = min(2.0, max(1.0, math.log(t1 / t0) / math.log(n1 / n0)))
    return t1 * (n / n1) ** slope


def bench_attention(
    kernels: Sequence[str],
    lengths: Sequence[int],
    *,
    dim: int = 256,
    heads: int = 4,
    batch: int = 1,
    modes: Sequence[str] = ("fwd", "fwdbwd"),
    out_dir: Path,
    progress: bool = True,
    repeats: int = 5,
    options: dict[str, dict[str, Any]] | None = None,
    baselines: Sequence[str] = BASELINES,
    memory_budget: int | None = None,
    time_budget: float = 120.0,
    threads: int | None = None,
) -> list[dict[str, Any]]:
    """Time and peak memory of each kernel and exact baseline at each length and mode.

    Each measurement is :func:`~attnlab.lab.bench.measure.time_call` with a fixed count (warm-up
    calls, then the mean of ``repeats`` timed calls), then one call under the memory
    probe. A measurement is skipped (status ``"skipped"`` with the reason)
    when its estimated memory exceeds ``memory_budget`` or its time, extrapolated from shorter
    lengths, exceeds ``time_budget`` seconds for all its calls; a failure is recorded as
    ``"error"``. Writes ``attention_bench.csv``, ``attention_bench.png`` (time and memory vs
    ``n``, log-log, with each kernel's crossover against SDPA), ``crossovers.csv`` and
    ``bench_config.json`` into ``out_dir``.

    Args:
        kernels: registered kernel names.
        lengths: sequence lengths ``n``.
        dim, heads, batch: problem size; head dim ``dim // heads``.
        modes: ``"fwd"`` (inference, no autograd) and/or ``"fwdbwd"`` (forward + backward).
        out_dir: where results are written (created).
        progress: show a tqdm progress bar.
        repeats: timed calls per measurement.
        options: per-kernel options (on top of :func:`scaled_options`).
        baselines: exact references to measure too (``"sdpa"``, ``"reference"``).
        memory_budget: bytes one measurement may take (default: half of available memory).
        time_budget: seconds one measurement may take, all calls together.
        threads: torch intra-op threads during the run (default: leave as is); on a shared
            machine 1 thread gives far steadier numbers than an oversubscribed pool.

    Returns:
        One dict per (kernel, mode, n) with the fields of the CSV.
    """
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return _bench(
            kernels, lengths, dim=dim, heads=heads, batch=batch, modes=modes, out_dir=out_dir,
            progress=progress, repeats=repeats, options=options, baselines=baselines,
            memory_budget=memory_budget, time_budget=time_budget,
        )  # fmt: skip
    finally:
        torch.set_num_threads(previous)


def _bench(
    kernels, lengths, *, dim, heads, batch, modes, out_dir, progress, repeats, options,
    baselines, memory_budget, time_budget,
) -> list[dict[str, Any]]:  # fmt: skip
    from tqdm.auto import tqdm

    for name in kernels:
        KERNELS.get(name)  # unknown names list the valid ones
    bad = [m for m in modes if m not in ("fwd", "fwdbwd")]
    if bad:
        raise ValueError(f"modes must be 'fwd' and/or 'fwdbwd', got {bad}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    budget = memory_budget or available_bytes() // 2
    names = list(baselines) + [k for k in kernels if k not in baselines]
    lengths = sorted(lengths)
    rows: list[dict[str, Any]] = []
    bar = tqdm(total=len(names) * len(lengths) * len(modes), disable=not progress, unit="run")
    for name in names:
        for mode in modes:
            history: list[tuple[int, float]] = []
            for n in lengths:
                bar.set_description(f"{name} {mode} n={n}")
                opts = scaled_options(name, n, (options or {}).get(name))
                est = estimate_bytes(
                    name, n, opts, batch=batch, heads=heads, d=dim // heads, mode=mode
                )
                row = dict(
                    kernel=name, mode=mode, n=n, status="ok", time_s=None, peak_bytes=None,
                    estimate_bytes=est, reason="", batch=batch, heads=heads, dim=dim,
                    threads=torch.get_num_threads(), repeats=repeats, options=json.dumps(opts),
                )  # fmt: skip
                predicted = _predict_time(history, n, name in ("reference", "synthesizer"))
                if est > budget:
                    row.update(status="skipped", reason=f"estimated {est / 2**30:.1f} GiB > budget")
                elif predicted is not None and predicted * (repeats + 3) > time_budget:
                    row.update(status="skipped", reason=f"predicted {predicted:.1f} s per call")
                else:
                    try:
                        run = _runner(name, n, opts, batch=batch, heads=heads, dim=dim, mode=mode)
                        row["time_s"] = time_call(run, repeats=repeats)
                        row["peak_bytes"], _ = peak_tensor_bytes(run)
                        history.append((n, row["time_s"]))
                    except (RuntimeError, ValueError, MemoryError) as err:
                        row.update(status="error", reason=f"{type(err).__name__}: {err}"[:300])
                rows.append(row)
                bar.update(1)
    bar.close()
    write_csv(out_dir / "attention_bench.csv", rows, FIELDS)
    cross = crossovers(rows)
    write_csv(
        out_dir / "crossovers.csv",
        [dict(kernel=k, mode=m, beats_sdpa_from=n) for (k, m), n in cross.items()],
        ["kernel", "mode", "beats_sdpa_from"],
    )
    config = dict(
        kernels=list(kernels), lengths=lengths, dim=dim, heads=heads, batch=batch,
        modes=list(modes), repeats=repeats, options=options or {}, baselines=list(baselines),
        memory_budget=budget, time_budget=time_budget, threads=torch.get_num_threads(),
        torch=torch.__version__,
    )  # fmt: skip
    (out_dir / "bench_config.json").write_text(json.dumps(config, indent=2))
    plot_bench(rows, out_dir / "attention_bench.png", cross)
    return rows


# ---- accuracy ----------------------------------------------------------------------------------
def approximation_errors(
    kernels: Sequence[str],
    *,
    n: int = 1024,
    dim: int = 256,
    heads: int = 4,
    batch: int = 1,
    qk_scale: float = 1.0,
    seed: int = 0,
    options: dict[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Each kernel's error against exact softmax attention on the same random inputs.

    ``q, k, v ~ N(0, 1)`` with ``q, k`` scaled by ``qk_scale`` (1: logits of unit variance, a
    flat attention that is hard for low-rank and bucketed kernels; smaller: flatter still).
    Exact attention runs in float64. Reports the relative Frobenius error, the maximum absolute
    error, and for context the error of the trivial approximation "every query averages all
    values" (``uniform_rel_error``). Reformer is also compared with its own exact target, full
    shared-QK attention (``rel_error_own_exact``); the synthesizer computes no q.k at all, so
    its error says only how far an untrained synthesizer is from dot-product attention.
    """
    from attnlab.efficient.reformer import shared_qk_attention

    d = dim // heads
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, n, d, generator=gen) for _ in range(3))
    q, k = q * qk_scale, k * qk_scale
    exact = attend(q.double(), k.double(), v.double()).out
    norm = exact.norm()
    uniform = float((v.double().mean(2, keepdim=True) - exact).norm() / norm)
    rows = []
    for name in kernels:
        opts = scaled_options(name, n, (options or {}).get(name))
        torch.manual_seed(seed)
        kernel = make_kernel(name, dim=dim, heads=heads, **opts).eval()
        with torch.no_grad():
            out = kernel(q, k, v).double()
        row = dict(
            kernel=name, n=n, d=d, qk_scale=qk_scale, rel_error=float((out - exact).norm() / norm),
            max_abs_error=float((out - exact).abs().max()), uniform_rel_error=uniform,
            rel_error_own_exact=None, options=json.dumps(opts),
        )  # fmt: skip
        if name == "reformer":
            own = shared_qk_attention(q.double(), v.double())
            row["rel_error_own_exact"] = float((out - own).norm() / own.norm())
        rows.append(row)
    return rows


def bench_recurrent_linear(
    lengths: Sequence[int], *, dim: int = 256, heads: int = 4, batch: int = 1, repeats: int = 5
) -> list[dict[str, Any]]:
    """Cost of the output at position ``n`` when decoding: one :meth:`LinearKernel.step` from
    the running state (constant time and memory) against re-running the causal parallel form
    over the ``n``-token prefix (what a decoder without the RNN form, or a KV cache, pays).

    Returns rows ``{n, method, time_s, peak_bytes, state_bytes}``.
    """
    from attnlab.efficient.linear import LinearKernel

    d = dim // heads
    kernel = LinearKernel(dim=dim, heads=heads)
    rows = []
    for n in lengths:
        gen = torch.Generator().manual_seed(n)
        q, k, v = (torch.randn(batch, heads, n, d, generator=gen) for _ in range(3))
        state = kernel.initial_state(batch, heads, d, d)
        with torch.no_grad():  # the state after n - 1 tokens, from the parallel sums
            phi_k = kernel.feature_map(k[:, :, :-1])
            state = state._replace(
                s=torch.einsum("bhjd,bhje->bhde", phi_k, v[:, :, :-1]), z=phi_k.sum(2)
            )
        state_bytes = sum(t.numel() * t.element_size() for t in state)

        def step(state=state, q=q, k=k, v=v) -> Tensor:
            with torch.no_grad():
                return kernel.rnn_step(q[:, :, -1], k[:, :, -1], v[:, :, -1], state)[0]

        def rerun(q=q, k=k, v=v) -> Tensor:
            with torch.no_grad():
                return kernel(q, k, v, mask=masks.causal())[:, :, -1]

        torch.testing.assert_close(step(), rerun(), atol=1e-5, rtol=1e-4)  # same output
        for method, fn in (("step", step), ("parallel_rerun", rerun)):
            rows.append(
                dict(
                    n=n,
                    method=method,
                    time_s=time_call(fn, repeats=repeats),
                    peak_bytes=peak_tensor_bytes(fn)[0],
                    state_bytes=state_bytes,
                )  # fmt: skip
            )
    return rows
