"""``attnlab report``: run the claims' jobs that have not finished, then write the report.

Jobs run in this process one after another (``--jobs 1``), in ``N`` local processes with the
machine's threads divided among them (``--jobs N``: never oversubscribed), or only those of one
shard (``--shard I/N``: any scheduler can spread a report over machines sharing ``--out``);
``--collect`` renders what has finished. A job's output goes to ``OUT/jobs/KEY.log``.
``--executor ray`` places every job where the cluster has a CPU free: the throughput a run
records is what its machine and neighbours gave. The running itself is :mod:`.execute`'s. The
speeds a claim compares are timed afterwards, side by side in this process (:mod:`.timing`;
with ``--shard``, by a run without it once every shard has finished).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnlab.lab.train.atomic import atomic_write_text
from attnlab.lab.train.memory_guard import GIB

from .budgets import BUDGETS
from .check import check_jobs
from .claim import Claim, claims_plan, count
from .claims import select
from .execute import memory_share, run_local, run_ray
from .jobs import (
    Job,
    JobResult,
    forget,
    import_results,
    lost_inits,
    read_result,
    shard,
    with_inits,
)
from .timing import time_claims, timed_jobs

__all__ = ["report_command", "run_jobs"]

EXECUTORS = ("local", "ray")


def report_command(
    *,
    budget: str = "quick",
    claims: Sequence[str] | None = None,
    out: str | Path = "report",
    jobs: int = 1,
    shard_spec: str | None = None,
    executor: str = "local",
    collect: str | Path | None = None,
    check: bool = False,
    from_results: str | Path | None = None,
    max_memory: float | None = None,
) -> int:
    """Run what is missing of the report in ``out`` and render it (module docstring); return
    the exit status. Errors of the user's making raise ``ValueError`` with one line. ``check``:
    set up each job that has not finished instead (:func:`~.check.check_jobs`), writing nothing in
    ``out``. ``from_results``: a ``results.jsonl`` whose jobs count as finished
    (:func:`~.jobs.import_results`), to continue a report whose runs are elsewhere or gone.
    ``max_memory``: the GiB each running job's process may hold (0: no limit; None: a share
    of this machine's, :func:`~.execute.memory_share`; on Ray, no limit unless given)."""
    from .render import render

    if collect is not None and from_results is not None:
        raise ValueError("--from-results: not with --collect, which runs nothing")
    if collect is not None:
        out = Path(collect)
        manifest = _read_manifest(out)
        chosen = select(manifest["claims"])
        print(render(out, BUDGETS[manifest["budget"]], chosen))
        return 0
    if budget not in BUDGETS:
        raise ValueError(f"--budget: expected one of {', '.join(BUDGETS)}, got {budget!r}")
    if executor not in EXECUTORS:
        raise ValueError(f"--executor: expected one of {', '.join(EXECUTORS)}, got {executor!r}")
    cores = os.cpu_count() or 1
    if not 1 <= jobs <= cores:  # more processes than cores would oversubscribe them
        raise ValueError(f"--jobs: expected 1 to {cores} processes (this machine's cores, "
                         f"divided among them), got {jobs}")  # fmt: skip
    if max_memory is not None and not 0 <= max_memory < math.inf:
        raise ValueError(f"--max-memory: expected GiB >= 0 (0: no limit), got {max_memory:g}")
    if max_memory is None:  # a share of this machine's, which a Ray cluster's nodes are not
        limit = memory_share(jobs) if executor == "local" else None
    else:
        limit = int(max_memory * GIB) or None  # 0: no limit
    chosen = select(claims)
    out = Path(out)
    plan = claims_plan(chosen, BUDGETS[budget])
    mine = shard(plan, shard_spec)
    if not check:
        _writable(out)
        _write_manifest(out, budget, chosen)  # before anything is written: a budget's --out
    taken: set[str] = set()
    if from_results is not None:
        taken, given = import_results(out, mine, Path(from_results), record=not check)
        others = len(given - {j.key for j in plan})
        print(f"{'would take' if check else 'took'} the results of {count(len(taken), 'job')} "
              f"from {from_results}" + (f" ({count(others, 'other result')} there: not in "
                                        "this report's plan)" if others else ""))  # fmt: skip
    todo = [j for j in mine if j.key not in taken and read_result(out, j) is None]
    lost = lost_inits(out, todo, taken)  # finished, but without the checkpoint a job reads
    if check:
        return check_jobs([*lost, *todo])
    todo = _with_lost_inits(out, todo, lost, say=print)
    print(f"report ({budget}): {len(plan)} jobs for {len(chosen)} claims; "
          f"{len(mine) - len(todo)} of this {'shard' if shard_spec else 'report'}'s {len(mine)} "
          f"already done, {len(todo)} to run")  # fmt: skip
    if executor == "ray":
        run_ray(todo, out, limit)
    else:
        run_local(todo, out, jobs, limit)
    if shard_spec is None:  # the speeds a claim compares, side by side, here (.timing)
        time_claims(out, chosen, BUDGETS[budget])
    elif any(timed_jobs(claim, BUDGETS[budget]) for claim in chosen):
        timed = " ".join(str(c.number) for c in chosen if timed_jobs(c, BUDGETS[budget]))
        print("the speeds that claims compare are timed side by side on one machine, after "
              f"the training: once every shard has finished, run attnlab report --budget "
              f"{budget} --out {out} --claims {timed} (without --shard)")  # fmt: skip
    print(render(out, BUDGETS[budget], chosen))
    return 0


def run_jobs(jobs: Sequence[Job], out: str | Path, *, processes: int = 1) -> list[JobResult]:
    """Run those of ``jobs`` (and of the ``init`` jobs they start from) that have not finished
    in ``out``, as the report runs its own (a progress bar; ``processes`` as ``--jobs``), and
    return every job's result, in order: the one code path of the scripts under benchmarks/
    that measure a claim with more variants or settings than the report's. It times nothing
    (the report's timing pass, :mod:`.timing`, is not run: those scripts time their own).

    Raises:
        RunError: a run failed; the message names the job and its log.
    """
    out = Path(out)
    todo = [j for j in with_inits(jobs) if read_result(out, j) is None]
    todo = _with_lost_inits(out, todo, lost_inits(out, todo))  # e.g. continued --from-results
    run_local(todo, out, processes, memory_share(processes))
    results = [read_result(out, j) for j in jobs]
    for job, result in zip(jobs, results):
        if result is None:
            from attnlab.lab.train import RunError

            raise RunError(f"job {job.label or job.key} ran but left no result in {out}")
    return results  # type: ignore[return-value]: none is None


def _with_lost_inits(out: Path, todo: list[Job], lost: list[Job], say=None) -> list[Job]:
    """``todo`` after the ``lost`` init jobs (:func:`~.jobs.lost_inits`), each forgotten in
    ``out`` so that it runs afresh (``say``: told of each)."""
    for job in lost:
        forget(out, job)
        if say is not None:
            say(f"job {job.label or job.key} runs again: a job starts from its checkpoint, "
                "which is not here")  # fmt: skip
    return [*lost, *todo]


def _writable(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise ValueError(
            f"--out: cannot write the report to {out}: {error.strerror or error}"
        ) from None


def _write_manifest(out: Path, budget: str, claims: Sequence[Claim]) -> None:
    path = out / "report.json"
    names = sorted(str(c.number) for c in claims)
    if path.exists():
        old = _read_manifest(out)
        if old["budget"] != budget:
            raise ValueError(
                f"--out: {out} holds a {old['budget']!r} report; a {budget!r} report needs "
                "another --out (or --budget " + old["budget"] + " to continue that one)"
            )
        names = sorted(set(names) | set(old["claims"]), key=int)
    atomic_write_text(path, json.dumps({"budget": budget, "claims": names}))


def _read_manifest(out: Path) -> dict[str, Any]:
    path = out / "report.json"
    try:
        manifest = json.loads(path.read_text())
        BUDGETS[manifest["budget"]]
        [int(c) for c in manifest["claims"]]
    except FileNotFoundError:
        raise ValueError(
            f"{out}: no report here (no report.json); run attnlab report --out {out}"
        ) from None
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{path}: not a report manifest ({type(error).__name__}: {error})"
        ) from None
    return manifest
