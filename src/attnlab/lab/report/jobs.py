"""A report's runs as jobs: each a training run keyed by a hash of its full configuration, so
that a finished job is never run again and an interrupted one resumes.

The key hashes the *resolved* configuration (the task's defaults with the job's options on top,
as ``attnlab train`` would run it), not the options as written: when a task's default changes,
its jobs get new keys and run again instead of serving results of the old recipe.

A job's directory ``OUT/jobs/KEY/`` is the run (``attnlab train --out_dir``; ``--resume`` when
it exists without a result) and ``OUT/jobs/KEY/result.json`` its result, written atomically
once the run has finished; beside it, ``KEY.log`` holds what the run printed and, while it is
stopped part-way, ``KEY.wall`` the seconds it has run so far. Results live with their jobs, so shards of one report running on
several machines into a shared ``OUT`` never write the same file; ``results.jsonl`` is
rewritten from them whenever the report is rendered.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from attnlab.lab.train.atomic import atomic_write_text
from attnlab.lab.train.checkpoint import BOOKKEEPING
from attnlab.lab.train.config import resolve_config

__all__ = [
    "Job",
    "JobResult",
    "add_to_result",
    "forget",
    "has_run",
    "import_results",
    "lost_inits",
    "read_result",
    "read_results",
    "write_results",
    "shard",
    "with_inits",
]

#: bump when what a key covers changes (a key names the same run forever)
JOB_FORMAT = 2


@dataclass(frozen=True)
class Job:
    """One training run: ``attnlab train TASK OPTIONS --train.seed=SEED``.

    ``label`` names it in the report ("fc, k=3"); it is not part of the key, so claims that
    need the same run share it. ``init``: a job whose run this one starts from
    (``--model.init``, e.g. a pre-training); it runs first, and its key is part of this one's.
    """

    task: str
    options: tuple[str, ...]
    seed: int
    label: str = field(default="", compare=False)
    init: Job | None = None

    @cached_property
    def key(self) -> str:
        spec = {"format": JOB_FORMAT, "config": self.config()}
        if self.init is not None:  # absent otherwise: the keys of jobs without one stay put
            spec["init"] = self.init.key
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def root(self) -> Job:
        """The first job of this one's chain of ``init`` jobs (itself, without one)."""
        return self.chain()[0]

    def config(self) -> dict[str, Any]:
        """The run's resolved configuration as the key covers it: without the settings that
        do not change the trained weights (``BOOKKEEPING``, as a resume compares configs). A
        bad option raises here, naming it, before anything runs."""
        cfg = resolve_config(task=self.task, overrides=[*self.options, f"--train.seed={self.seed}"])
        return _without(cfg.to_dict(), BOOKKEEPING)

    def argv(self, out: Path) -> list[str]:
        """The ``attnlab`` command line of this job, its run written to ``out`` (its ``init``
        job's run beside it, in ``out``'s parent)."""
        resume = ["--resume"] if out.exists() and (out / "config.json").exists() else []
        init = [] if self.init is None else [f"--model.init={out.parent / self.init.key}"]
        return ["train", self.task, *self.options, *init, f"--train.seed={self.seed}",
                f"--out_dir={out}", *resume]  # fmt: skip

    def command(self) -> str:
        """The command that reproduces this job alone (after its ``init`` job's, which writes
        ``runs/KEY``: a job with one reads it)."""
        words = ["attnlab", "train", self.task, *self.options]
        if self.init is not None:
            words.append(f"--model.init=runs/{self.init.key}")
        return " ".join([*words, f"--train.seed={self.seed}"])

    def commands(self) -> list[str]:
        """The commands that reproduce this job: its ``init`` job's (writing ``runs/KEY``, where
        this one reads it), then its own."""
        if self.init is None:
            return [self.command()]
        *before, last = self.init.commands()
        return [*before, f"{last} --out_dir=runs/{self.init.key}", self.command()]

    def chain(self) -> list[Job]:
        """This job's ``init`` jobs, first to last, then itself."""
        return [*([] if self.init is None else self.init.chain()), self]


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

    @property
    def seconds(self) -> float:
        """The time spent on the job: the report's clock over its segments, or the trainer's
        own where that is longer (a segment killed outright, without Python's ``finally``, is
        missing from the report's; the trainer's, its whole run's where it recorded one, else
        its steps', is kept in each checkpoint)."""
        trainer = (self.metrics.get(name) or 0.0 for name in ("wall_time_s", "train_time_s"))
        return max(self.wall_s, *map(float, trainer))


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


def add_to_result(
    out: Path, job: Job, extra: dict[str, Any], *, drop: Iterable[str] = ()
) -> JobResult:
    """Merge ``extra`` into the metrics of ``job``'s recorded result, without the metrics
    named in ``drop`` (those of an earlier measure), atomically (measures taken after the job
    finished, :mod:`.timing`).

    Raises:
        ValueError: the job has no result in ``out``.
    """
    result = read_result(out, job)
    if result is None:
        raise ValueError(f"job {job.label or job.key} has no result in {out} to add to")
    for name in drop:
        result.metrics.pop(name, None)
    result.metrics.update(extra)
    atomic_write_text(job_dir(out, job) / "result.json", json.dumps(asdict(result), sort_keys=True))
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


def import_results(
    out: Path, jobs: Sequence[Job], path: Path, *, record: bool = True
) -> tuple[set[str], set[str]]:
    """Record in ``out`` the results in ``path`` (another report's ``results.jsonl``, such as
    the pages committed under docs/report/) of those of ``jobs`` that have not finished or
    begun there, as if they had run there (``record=False``: only say which; a job begun here
    resumes instead). A result is a job's by its key, so one of another recipe or budget is not
    taken. Their runs (the checkpoints) are not in the file: a job that starts from one of them
    runs it again first (:func:`lost_inits`). Returns the keys taken and every key in ``path``.

    Raises:
        ValueError: ``path`` cannot be read or holds a line that is not a result; the message
            names ``--from-results``.
    """
    try:
        results = read_results(path)
    except OSError as error:
        raise ValueError(f"--from-results: cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:  # a line that is not a result (the message names it), or not text
        where = "" if str(path) in str(error) else f"{path}: "
        raise ValueError(f"--from-results: {where}{error}".splitlines()[0]) from None
    keyed = {job.key: job for job in jobs}
    taken = set()
    for result in results:
        job = keyed.get(result.key)
        if job is None or job_dir(out, job).exists():  # finished, or begun: it resumes
            continue
        taken.add(job.key)
        if record:
            job_dir(out, job).mkdir(parents=True)
            atomic_write_text(job_dir(out, job) / "result.json",
                              json.dumps(asdict(result), sort_keys=True))  # fmt: skip
    return taken, {r.key for r in results}


def lost_inits(out: Path, todo: Sequence[Job], taken: Iterable[str] = ()) -> list[Job]:
    """The ``init`` jobs that jobs of ``todo`` start from whose results are in ``out``, or
    ``taken`` (:func:`import_results`), without the finished run whose checkpoint those jobs
    read (its ``metrics.json`` and ``best.pt`` or ``last.pt``): each must run again, before
    them (:func:`forget`). Results taken from another report are such; so is a run whose
    checkpoints were deleted."""
    taken, lost = set(taken), {}
    for job in todo:
        for step in job.chain()[:-1]:
            if not has_run(out, step) and (step.key in taken or read_result(out, step) is not None):
                lost.setdefault(step.key, step)
    return list(lost.values())


def has_run(out: Path, job: Job) -> bool:
    """Whether ``job``'s finished run is in ``out``: its ``metrics.json`` and a checkpoint
    (``best.pt`` or ``last.pt``), which a result taken from another report lacks."""
    run = job_dir(out, job)
    return (run / "metrics.json").exists() and any(
        (run / name).exists() for name in ("best.pt", "last.pt")
    )


def forget(out: Path, job: Job) -> None:
    """Remove ``job``'s result and run from ``out`` (its log stays), so that it runs afresh."""
    shutil.rmtree(job_dir(out, job), ignore_errors=True)
    (job_dir(out, job).parent / f"{job.key}.wall").unlink(missing_ok=True)


def with_inits(jobs: Iterable[Job]) -> list[Job]:
    """``jobs`` and the ``init`` jobs they start from, each once (by key), an init job before
    the first job that starts from it."""
    seen: dict[str, Job] = {}
    for job in jobs:
        for step in job.chain():
            seen.setdefault(step.key, step)
    return list(seen.values())


def shard(jobs: Sequence[Job], spec: str | None) -> list[Job]:
    """The jobs of shard ``I/N`` (1-based: every job whose root's position, by key, is ``I - 1``
    modulo ``N``: a job and the ``init`` jobs it starts from share a shard), each after its
    ``init`` job and otherwise in the order of ``jobs`` (a report's plan: claim by claim, so
    that each claim's verdict comes as soon as its own jobs are done); all of them without a
    spec.

    Raises:
        ValueError: a spec that is not ``I/N`` with ``1 <= I <= N``.
    """
    unique = {job.key: job for job in jobs}.values()  # each once, where it first came
    ordered = sorted(unique, key=lambda j: len(j.chain()))  # init jobs first (a stable sort)
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
    roots = sorted({j.root.key for j in ordered})[i - 1 :: n]
    return [j for j in ordered if j.root.key in roots]


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
