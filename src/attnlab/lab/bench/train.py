"""``attnlab bench train TASK``: how fast a task trains, and where a step's time goes.

The variants (``eager``, ``bf16``, ``compile``, ``compile+bf16``) each get a
:class:`~attnlab.lab.train.Trainer` of the task with the options given, in one process. After
their warm-up steps they take turns, a few steps each per round, so that a busy machine slows
all of them alike and the ratios stay meaningful. Each draws real batches in the trainer's own
seeded order, variant ``k`` from epoch ``k`` on: not the batches another variant has just run.
oneDNN (convolutions, bfloat16 matmuls) compiles a kernel for every new shape and caches it for
the whole process, so on a task whose batch shapes change every step a variant that followed
another through the same batches reused its kernels: on ``pos`` an identical second variant
measured 1.16x the first. Per variant:

* **speed**: examples/s and units/s (the task's unit: tokens, frames, nodes, ...), from the median
  step time (the optimizer step included) and the median time to collate the step's batch;
* **FLOP/s**: the floating-point operations of a training step (forward and backward), counted by
  :class:`torch.utils.flop_counter.FlopCounterMode` on the first measured batches (matrix
  products, convolutions and attention; elementwise work is not counted), per unit, times the
  units/s; and its share of this run's own matmul peak for the variant's dtype (a 2048^3
  product, measured in the same process);
* **memory**: the process's peak resident set while the variant ran (``VmHWM``, reset before
  each of its turns where the kernel allows);
* **compile time**: the warm-up steps' time beyond that many steady steps;
* **profile**: a step's time by category (compiled code, optimizer, attention, matmul,
  convolution, dropout/RNG, normalisation, pooling, copy/index, elementwise, other ops, and what no
  operator accounts for: Python and framework overhead), from :mod:`torch.profiler` over a few
  more steps: each operator's self time, by its name; everything inside the batch's collation
  counts as data/collate.
"""

from __future__ import annotations

import contextlib
import math
import platform
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import resource
except ImportError:  # Windows
    resource = None

import torch
from torch.utils.flop_counter import FlopCounterMode

from attnlab.lab.bench.measure import _quiet_stderr, matmul_peak
from attnlab.lab.train import Trainer
from attnlab.lab.train.config import RunConfig, resolve_config
from attnlab.lab.train.host_memory import allocator
from attnlab.lab.train.precision import cpu_flags, cpu_model

__all__ = ["VARIANTS", "CATEGORIES", "bench_train", "categorize"]

#: variant name -> the train options it sets
VARIANTS: dict[str, dict[str, Any]] = {
    "eager": {"precision": "fp32", "compile": False},
    "bf16": {"precision": "bf16", "compile": False},
    "compile": {"precision": "fp32", "compile": True},
    "compile+bf16": {"precision": "bf16", "compile": True},
}

#: profile categories, in the order they are reported; each is a pattern on the operator's name
#: (the first that matches wins; ``python`` and ``data`` are not operators)
CATEGORIES: list[tuple[str, re.Pattern]] = [
    ("compiled code", re.compile(r"Compiled|Torch-Compiled|cpp_fused|triton_|inductor")),
    ("optimizer", re.compile(r"adam|_foreach_|Optimizer\.|clip_grad|zero_grad|linalg_vector_norm")),
    (
        "attention",
        re.compile(r"scaled_dot_product|flash_attention|_softmax|softmax|flex_attention"),
    ),
    (
        "matmul",
        re.compile(
            r"aten::(mm|addmm|bmm|baddbmm|addbmm|matmul|linear|addmv|mv|dot)$|mkldnn_.*(mm|linear)"
        ),
    ),
    ("convolution", re.compile(r"conv|mkldnn_convolution")),
    ("dropout/RNG", re.compile(r"bernoulli|dropout|aten::rand|uniform_|normal_|randperm|random_")),
    ("normalisation", re.compile(r"layer_norm|batch_norm|group_norm|rms_norm")),
    ("pooling", re.compile(r"pool")),  # attnlab::batch_norm_relu and max_pool2x2 match these two
    (
        "copy/index",
        re.compile(
            r"copy_|fill_|zero_|select|index|gather|scatter|slice|cat$|stack|"
            r"pad|to_copy|clone|contiguous|embedding|masked_fill|where|_to_copy"
        ),
    ),
    (
        "elementwise",
        re.compile(
            r"aten::(add|sub|mul|div|neg|exp|log|tanh|sigmoid|relu|gelu|"
            r"threshold|pow|sqrt|rsqrt|clamp|abs|max|min|sum|mean|eq|ne|lt|gt|"
            r"le|ge|logical|bitwise|sign|erf|silu|hardtanh|leaky_relu|lerp|"
            r"addcmul|addcdiv|_log_softmax|nll_loss|cross_entropy|mse_loss|"
            r"amax|amin|argmax|cumsum|sort|topk)"
        ),
    ),
]
OTHER, PYTHON, DATA = "other ops", "python/framework", "data/collate"


def categorize(name: str) -> str:
    """The profile category of operator ``name`` (:data:`CATEGORIES`; else ``"other ops"``)."""
    for category, pattern in CATEGORIES:
        if pattern.search(name):
            return category
    return OTHER


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter of this process (Linux: ``clear_refs`` 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_rss_bytes() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@dataclass
class _Variant:
    """One variant's trainer, its endless stream of steps, and what was measured."""

    name: str
    trainer: Trainer
    steps: Iterator[tuple[list, int]] = field(init=False)
    epoch: int = 0
    step_s: list[float] = field(default_factory=list)
    data_s: list[float] = field(default_factory=list)
    examples: list[int] = field(default_factory=list)
    units: list[float] = field(default_factory=list)
    warmup_s: list[float] = field(default_factory=list)
    faults: list[int] = field(default_factory=list)  # the process's minor page faults a step
    peak_rss: int = 0

    def __post_init__(self) -> None:
        self.steps = self._stream()

    def _stream(self) -> Iterator[tuple[list, int]]:
        feed = self.trainer.feed
        while True:  # (this step's micro-batches, its examples)
            batches = feed.epoch_batches(self.epoch)
            yield from zip(feed.steps(batches, 0), map(len, batches))
            self.epoch += 1

    def run(self, count: int, *, record: bool, profiler: Any = None) -> None:
        """``count`` training steps (the trainer's own step: backward, clipping, AdamW)."""
        trainer = self.trainer
        for _ in range(count):
            t0 = time.perf_counter()
            with torch.profiler.record_function(DATA) if profiler else contextlib.nullcontext():
                micros, examples = next(self.steps)
            t1, f1 = time.perf_counter(), _minor_faults()
            step = trainer.train_step(micros)
            t2, f2 = time.perf_counter(), _minor_faults()
            if profiler is not None:
                profiler.step()
            (self.step_s if record else self.warmup_s).append(t2 - t1)
            if record:
                self.data_s.append(t1 - t0)
                self.examples.append(examples)
                self.units.append(step.units)
                if f1 is not None and f2 is not None:
                    self.faults.append(f2 - f1)


def _minor_faults() -> int | None:
    """This process's minor page faults so far (None where ``resource`` is missing)."""
    return None if resource is None else resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _count_flops(trainer: Trainer, micros: list) -> tuple[float, float]:
    """``(FLOPs, units)`` of one training step's forward and backward on ``micros``."""
    task, model, feed = trainer.task, trainer.model, trainer.feed
    model.train()
    units = 0.0
    counter = FlopCounterMode(display=False)
    with counter:
        for batch, dummy in micros:
            if dummy:
                continue
            loss, n = task.loss(model, feed.to_device(batch))
            loss.float().backward()
            units += float(n)
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops()), units


def _profile(variant: _Variant, steps: int) -> dict[str, float]:
    """Share of the profiled steps' wall time per category (they sum to 1)."""
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    with _quiet_stderr():  # the profiler's C++ start / stop lines
        prof.start()
    try:
        t0 = time.perf_counter()
        variant.run(steps, record=False, profiler=prof)
        wall = time.perf_counter() - t0
    finally:
        with _quiet_stderr():
            prof.stop()
    shares: dict[str, float] = {name: 0.0 for name, _ in CATEGORIES}
    shares.update({OTHER: 0.0, DATA: 0.0})
    for event in prof.events():
        if event.name.startswith("ProfilerStep"):
            continue  # its self time is the step's unprofiled Python: left to PYTHON below
        seconds = event.self_cpu_time_total / 1e6
        shares[DATA if _under(event, DATA) else categorize(event.name)] += seconds
    shares[PYTHON] = max(wall - sum(shares.values()), 0.0)
    total = sum(shares.values()) or 1.0
    return {k: v / total for k, v in shares.items()}


def _under(event: Any, name: str) -> bool:
    """Whether profiler ``event`` is ``name`` or runs inside it."""
    while event is not None:
        if event.name == name:
            return True
        event = event.cpu_parent
    return False


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    flags = cpu_flags()
    return {
        "cpu": cpu_model(),
        "isa": [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags],
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "allocator": allocator(),  # jemalloc where `attnlab bench` started itself on it
    }


def bench_train(
    task: str,
    overrides: Sequence[str] = (),
    *,
    variants: Sequence[str] = ("eager", "bf16", "compile", "compile+bf16"),
    steps: int = 20,
    warmup: int = 3,
    rounds: int = 4,
    profile_steps: int = 5,
    flop_steps: int = 2,
    peak_seconds: float = 1.0,
    config_file: str | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure ``task``'s training step under each of ``variants`` (module docstring).

    Args:
        task: a registered task.
        overrides: ``--a.b=value`` options, as for ``attnlab train``.
        variants: names from :data:`VARIANTS`, or ``NAME=--a.b=v;--c.d=w`` (the eager variant
            with those options: a recipe change measured side by side).
        steps: measured steps per variant (split over ``rounds`` turns).
        warmup: steps per variant before measuring (compilation happens here).
        profile_steps: profiled steps per variant (0: no profile).
        flop_steps: measured batches whose FLOPs are counted.
        peak_seconds: how long each dtype's matmul peak is measured.

    Returns:
        A JSON-ready dict: ``machine``, ``task``, ``options``, ``matmul_peak_flops`` per dtype
        and ``variants`` (name -> figures; ``speedup`` is relative to the first variant).

    Raises:
        ValueError: an unknown variant, or ``steps`` / ``rounds`` below 1.
    """
    specs = [_parse_variant(v) for v in variants]
    names = [name for name, _, _ in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"--variants: each name once, got {names}")
    if steps < 1 or rounds < 1 or warmup < 0:
        raise ValueError(
            f"steps and rounds must be >= 1 and warmup >= 0, got {steps}, {rounds}, {warmup}"
        )
    rounds = min(rounds, steps)
    base = resolve_config(task=task, config_file=config_file, overrides=list(overrides))
    tmp = tempfile.TemporaryDirectory(prefix="attnlab-bench-train-")
    runs: list[_Variant] = []
    try:
        for k, (name, train_options, extra) in enumerate(specs):
            cfg = base
            if extra:
                cfg = resolve_config(
                    task=task, config_file=config_file, overrides=[*overrides, *extra]
                )
            cfg = _variant_config(cfg, train_options, Path(tmp.name) / f"v{k}")
            log(f"bench train {task}: building {name}")
            trainer = Trainer(cfg.task, cfg, progress=False)
            runs.append(_Variant(name, trainer, epoch=k))  # its own batches (docstring)
        peaks = {}
        for dtype in sorted({v.trainer.precision.name for v in runs}):
            peaks[dtype] = matmul_peak(
                torch.bfloat16 if dtype == "bf16" else torch.float32, min_time=peak_seconds
            )
            log(f"bench train {task}: {dtype} matmul peak {peaks[dtype] / 1e9:.0f} GFLOP/s")
        for v in runs:  # warm-up: compilation, first-touch allocation, caches
            v.run(warmup, record=False)
        per_round = [steps // rounds + (r < steps % rounds) for r in range(rounds)]
        reset = _reset_peak_rss()
        for r, count in enumerate(per_round):
            for v in runs:
                if reset:
                    _reset_peak_rss()
                v.run(count, record=True)
                v.peak_rss = max(v.peak_rss, _peak_rss_bytes() or 0)
            log(f"bench train {task}: round {r + 1}/{rounds}")
        result = {
            "machine": machine(),
            "task": base.task,
            "options": list(overrides),
            "unit": runs[0].trainer.task.unit,
            "steps": steps,
            "warmup": warmup,
            "rounds": rounds,
            "matmul_peak_flops": peaks,
            "variants": {},
        }
        for v in runs:
            result["variants"][v.name] = _figures(v, _flops_per_unit(v, flop_steps), peaks, reset)
            if profile_steps:
                result["variants"][v.name]["profile"] = _profile(v, profile_steps)
        first = result["variants"][runs[0].name]["examples_per_s"]
        for fig in result["variants"].values():
            fig["speedup"] = fig["examples_per_s"] / first if first else math.nan
        return result
    finally:
        for v in runs:
            v.trainer.close()
        tmp.cleanup()


def _parse_variant(text: str) -> tuple[str, dict[str, Any], list[str]]:
    """``(name, train options, overrides)`` of a variant: a name of :data:`VARIANTS`, or
    ``NAME=--a.b=v;--c.d=w``: the eager variant with those options (unless they set
    ``train.precision`` or ``train.compile`` themselves)."""
    if text in VARIANTS:
        return text, dict(VARIANTS[text]), []
    name, sep, options = text.partition("=")
    extra = [o.strip() for o in options.split(";") if o.strip()]
    if not sep or not name or not extra or not all(o.startswith("--") for o in extra):
        raise ValueError(
            f"--variants: unknown {text!r}; choose from {', '.join(VARIANTS)}, or give "
            "NAME=--a.b=value;--c.d=value (the eager variant with those options)"
        )
    given = {o[2:].split("=", 1)[0] for o in extra}
    train = {k: v for k, v in VARIANTS["eager"].items() if f"train.{k}" not in given}
    return name, train, extra


def _variant_config(base: RunConfig, train_options: dict[str, Any], out_dir: Path) -> RunConfig:
    import dataclasses

    train = dataclasses.replace(base.train, **train_options, eval_every=0, checkpoint_every=0)
    return dataclasses.replace(base, train=train, out_dir=str(out_dir))


def _flops_per_unit(variant: _Variant, steps: int) -> float:
    flops = units = 0.0
    for _ in range(max(steps, 1)):
        f, u = _count_flops(variant.trainer, next(variant.steps)[0])
        flops, units = flops + f, units + u
    return flops / units if units else math.nan


def _figures(
    v: _Variant, flops_per_unit: float, peaks: dict[str, float], rss: bool
) -> dict[str, Any]:
    step = statistics.median(v.step_s)
    data = statistics.median(v.data_s)
    per_step = step + data
    examples = sum(v.examples) / len(v.examples)
    units = sum(v.units) / len(v.units)
    dtype = v.trainer.precision.name
    flops = flops_per_unit * units / per_step
    return {
        "step_ms": step * 1e3,
        "data_ms": data * 1e3,
        "examples_per_s": examples / per_step,
        "units_per_s": units / per_step,
        "flops_per_unit": flops_per_unit,
        "flops_per_s": flops,
        "share_of_peak": flops / peaks[dtype] if peaks.get(dtype) else math.nan,
        "peak_rss_mib": v.peak_rss / 2**20 if rss and v.peak_rss else None,
        "compile_s": max(sum(v.warmup_s) - step * len(v.warmup_s), 0.0)
        if v.trainer.cfg.train.compile
        else None,
        "step_ms_spread": [min(v.step_s) * 1e3, max(v.step_s) * 1e3],
        # memory a step touches for the first time (glibc returning freed blocks, new shapes):
        # each fault costs microseconds (BENCHMARKS.md, "ListOps on the Xeon")
        "page_faults_per_step": statistics.median(v.faults) if v.faults else None,
    }
