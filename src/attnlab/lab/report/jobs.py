"""A report's runs as jobs: each a training run keyed by a hash of its full configuration, so
that a finished job is never run again and an interrupted one resumes.

The key hashes the *resolved* configuration (the task's defaults with the job's options on top,
as ``attnlab train`` would run it), not the options as written: when a task's default changes,
its jobs get new keys and run again instead of serving results of the old recipe.

A job's directory ``OUT/jobs/KEY/`` is the run (``attnlab train --out_dir``; ``--resume`` when
it exists without a result) and ``OUT/jobs/KEY/result.json`` its result, written atomically
once the run has finished. Results live with their jobs, so shards of one report running on
several machines into a shared ``OUT`` never write the same file; ``results.jsonl`` is
rewritten from them whenever the report is rendered.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from attnlab.lab.train.atomic import atomic_write_text
from attnlab.lab.train.checkpoint import BOOKKEEPING
from attnlab.lab.train.config import resolve_config

__all__ = ["Job", "JobResult", "read_result", "read_results", "write_results", "shard"]

#: bump when what a key covers changes (a key names the same run forever)
JOB_FORMAT = 2


@dataclass(frozen=True)
class Job:
    """One training run: ``attnlab train TASK OPTIONS --train.seed=SEED``.

    ``label`` names it in the report ("fc, k=3"); it is not part of the key, so claims that
    need the same run share it.
    """

    task: str
    options: tuple[str, ...]
    seed: int
    label: str = field(default="", compare=False)

    @cached_property
    def key(self) -> str:
        spec = {"format": JOB_FORMAT, "config": self.config()}
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    def config(self) -> dict[str, Any]:
        """The run's resolved configuration as the key covers it: without the settings that
        do not change the trained weights (``BOOKKEEPING``, as a resume compares configs). A
        bad option raises here, naming it, before anything runs."""
        cfg = resolve_config(task=self.task, overrides=[*self.options, f"--train.seed={self.seed}"])
        return _without(cfg.to_dict(), BOOKKEEPING)

    def argv(self, out: Path) -> list[str]:
        """The ``attnlab`` command line of this job, its run written to ``out``."""
        resume = ["--resume"] if out.exists() and (out / "config.json").exists() else []
        return ["train", self.task, *self.options, f"--train.seed={self.seed}",
                f"--out_dir={out}", *resume]  # fmt: skip

    def command(self) -> str:
        """The command that reproduces this job alone."""
        return " ".join(["attnlab", "train", self.task, *self.options, f"--train.seed={self.seed}"])


@dataclass
class JobResult:
    """What a finished job gives the claims: its metrics and how it was made."""

    key: str
    task: str
    options: list[str]
    seed: int
    label: str
    metrics: dict[str, Any]
    wall_s: float
    provenance: dict[str, Any]

    @property
    def dev(self) -> float:
        """The run's best dev score (the task's metric)."""
        return float(self.metrics["best_score"])


def _without(tree: dict[str, Any], names: frozenset[str], prefix: str = "") -> dict[str, Any]:
    """``tree`` without the entries whose dotted names are in ``names``."""
    return {k: _without(v, names, f"{prefix}{k}.") if isinstance(v, dict) else v
            for k, v in tree.items() if f"{prefix}{k}" not in names}  # fmt: skip


def job_dir(out: Path, job: Job) -> Path:
    return out / "jobs" / job.key


def read_result(out: Path, job: Job) -> JobResult | None:
    """The job's result, or None when it has not finished."""
    path = job_dir(out, job) / "result.json"
    if not path.exists():
        return None
    return _parse(path.read_text(), f"{path}")


def write_result(
    out: Path, job: Job, wall_s: float, provenance: dict[str, Any], extra: dict[str, Any]
) -> JobResult:
    """Record a finished job (its run's ``metrics.json``, and ``extra`` measurements of the run)
    atomically."""
    run = job_dir(out, job)
    metrics = {**_small(json.loads((run / "metrics.json").read_text())), **extra}
    result = JobResult(job.key, job.task, list(job.options), job.seed, job.label,
                       metrics, round(wall_s, 2), provenance)  # fmt: skip
    atomic_write_text(run / "result.json", json.dumps(asdict(result), sort_keys=True))
    return result


def read_results(path: Path) -> list[JobResult]:
    """The results of a ``results.jsonl``.

    Raises:
        ValueError: a line that is not a result, naming the file and the line.
    """
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            out.append(_parse(line, f"{path}, line {n}"))
    return out


def write_results(path: Path, results: Iterable[JobResult]) -> None:
    """``results.jsonl``: one result a line, by key; written atomically."""
    atomic_write_text(path, "".join(json.dumps(asdict(r), sort_keys=True) + "\n"
                                    for r in sorted(results, key=lambda r: r.key)))  # fmt: skip


def shard(jobs: Sequence[Job], spec: str | None) -> list[Job]:
    """The jobs of shard ``I/N`` (1-based: every job whose position, by key, is ``I - 1``
    modulo ``N``); all of them without a spec.

    Raises:
        ValueError: a spec that is not ``I/N`` with ``1 <= I <= N``.
    """
    ordered = sorted(set(jobs), key=lambda j: j.key)
    if spec is None:
        return ordered
    try:
        i, n = (int(v) for v in spec.split("/"))
        if not 1 <= i <= n:
            raise ValueError
    except ValueError:
        raise ValueError(
            f"--shard: expected I/N with 1 <= I <= N (e.g. 1/4), got {spec!r}"
        ) from None
    return ordered[i - 1 :: n]


def _parse(text: str, where: str) -> JobResult:
    try:
        data = json.loads(text)
        result = JobResult(**data)
        float(result.metrics["best_score"])
    except (ValueError, TypeError, KeyError) as error:
        raise ValueError(f"{where}: not a job result ({type(error).__name__}: {error})") from None
    return result


def _small(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics worth keeping in a result (no paths)."""
    keep = ("task", "metric_name", "higher_is_better", "best_score", "best_step", "best_dev",
            "test", "steps", "epochs", "parameters", "unit", "units_per_s", "train_time_s")  # fmt: skip
    return {k: metrics[k] for k in keep if k in metrics}
