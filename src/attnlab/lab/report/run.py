"""``attnlab report``: run the claims' jobs that have not finished, then write the report.

Jobs run in this process one after another (``--jobs 1``), in ``N`` local processes with the
machine's threads divided among them (``--jobs N``: never oversubscribed; the jobs of claims that
compare speeds still run alone, with every thread, after the others), or only those of one
shard (``--shard I/N``: any scheduler can spread a report over machines sharing ``--out``);
``--collect`` renders what has finished. A job's output goes to ``OUT/jobs/KEY.log``.
``--executor ray`` places every job where the cluster has a CPU free: the speeds it records are
what those machines and their neighbours gave.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import torch

from attnlab.lab.train.atomic import atomic_write_text

from .budgets import BUDGETS
from .check import check_jobs
from .claim import Claim, claims_plan, timed_keys
from .claims import select
from .jobs import (
    Job,
    JobResult,
    forget,
    import_results,
    job_dir,
    lost_inits,
    read_result,
    shard,
    with_inits,
    write_result,
)

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["report_command", "run_jobs", "run_one"]

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
) -> int:
    """Run what is missing of the report in ``out`` and render it (module docstring); return
    the exit status. Errors of the user's making raise ``ValueError`` with one line. ``check``:
    set up each job that has not finished instead (:func:`~.check.check_jobs`), writing nothing in
    ``out``. ``from_results``: a ``results.jsonl`` whose jobs count as finished
    (:func:`~.jobs.import_results`), to continue a report whose runs are elsewhere or gone."""
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
        print(f"{'would take' if check else 'took'} the results of {_count(len(taken), 'job')} "
              f"from {from_results}" + (f" ({_count(others, 'other result')} there: not in "
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
        _run_ray(todo, out)
    else:
        _run_local(todo, out, jobs, alone=timed_keys(chosen, BUDGETS[budget]))
    print(render(out, BUDGETS[budget], chosen))
    return 0


def run_jobs(jobs: Sequence[Job], out: str | Path, *, processes: int = 1) -> list[JobResult]:
    """Run those of ``jobs`` (and of the ``init`` jobs they start from) that have not finished
    in ``out``, as the report runs its own (a progress bar; ``processes`` as ``--jobs``), and
    return every job's result, in order: the one code path of the scripts under benchmarks/
    that measure a claim with more variants or settings than the report's.

    Raises:
        RunError: a run failed; the message names the job and its log.
    """
    out = Path(out)
    todo = [j for j in with_inits(jobs) if read_result(out, j) is None]
    todo = _with_lost_inits(out, todo, lost_inits(out, todo))  # e.g. continued --from-results
    _run_local(todo, out, processes)
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


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _waves(todo: Sequence[Job]) -> list[list[Job]]:
    """``todo`` in waves that can run at once: a job after the wave of its ``init`` job (which
    may have finished before: then it is not in ``todo``)."""
    depth = {j.key: len(j.chain()) for j in todo}
    return [[j for j in todo if depth[j.key] == d] for d in sorted(set(depth.values()))]


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


def _threads(processes: int) -> int:
    return max(1, (os.cpu_count() or 1) // processes)


def _progress(total: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="report", unit="job", dynamic_ncols=True)


def _run_local(
    todo: Sequence[Job], out: Path, processes: int, alone: frozenset[str] = frozenset()
) -> None:
    """Run ``todo``: one after another in this process, or in ``processes`` worker processes
    a wave at a time (:func:`_waves`), except the jobs keyed in ``alone``, which run here,
    one at a time with all of this process's threads, after the rest of their wave: their
    speeds are measured without a neighbour."""
    if not todo:
        return
    with _progress(len(todo)) as bar:

        def here(jobs: Sequence[Job]) -> None:
            for job in jobs:
                bar.set_postfix_str(job.label)
                run_one(job, out)
                bar.update()

        if processes == 1:
            return here(todo)
        context = get_context("spawn")
        pool = ProcessPoolExecutor(processes, mp_context=context, initializer=_init_worker,
                                   initargs=(_threads(processes),))  # fmt: skip
        with _sigterm_as_ctrl_c(), pool:
            for wave in _waves(todo):
                bar.set_postfix_str(f"{processes} at a time")
                _in_workers(pool, [job for job in wave if job.key not in alone], out, processes,
                            bar)  # fmt: skip
                here([job for job in wave if job.key in alone])


def _in_workers(pool: ProcessPoolExecutor, jobs: Sequence[Job], out: Path, processes: int,
                bar: tqdm) -> None:  # fmt: skip
    """Run ``jobs`` in ``pool``, ``processes`` at a time, none queued ahead in the pool (where
    it would start even after an error). If a job fails or this process is interrupted (Ctrl-C,
    a SIGINT sent to it alone, or a SIGTERM), no other job starts: every worker gets a SIGINT,
    which its training run takes as a request to save ``last.pt`` and stop (a repeat within a
    second, as when Ctrl-C has reached it too, is the same request; one that arrives while the
    run sets up is kept for it, and a job not yet begun does not begin: :func:`_in_worker`);
    the error is raised once the running jobs have stopped."""
    queue: list[Job] = list(jobs)[::-1]
    running: set[Future] = set()
    try:
        while queue or running:
            while queue and len(running) < processes:
                running.add(pool.submit(_in_worker, queue.pop(), out))
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                future.result()
                bar.update()
    except BaseException:
        for worker in list(getattr(pool, "_processes", None) or {}):  # pids (a private dict)
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGINT)
        wait(running)  # their errors (the stopped runs) are not the one to report
        raise


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[None]:
    """While the workers run, a SIGTERM (what a scheduler or ``kill`` sends) stops the report
    as Ctrl-C does (:func:`_in_workers`), instead of ending this process and leaving its
    workers training."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    if threading.current_thread() is not threading.main_thread():  # signals reach that one
        yield
        return
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _init_worker(threads: int) -> None:
    from attnlab.lab.train.interrupt import catch_signals_between_runs

    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch.set_num_threads(threads)
    # A SIGINT outside a training run would kill the worker and break the pool: it is kept
    # for the run instead (:func:`_in_worker`).
    catch_signals_between_runs()


def _in_worker(job: Job, out: Path) -> None:
    """:func:`run_one` in a worker, unless the report has asked it to stop."""
    from attnlab.lab.train import RunError
    from attnlab.lab.train.interrupt import pending_signal

    if pending_signal() is not None:
        raise RunError(f"job {job.label or job.key} not started: {pending_signal()}")
    run_one(job, out)


def _run_ray(todo: Sequence[Job], out: Path) -> None:
    try:
        import ray
    except ImportError:
        raise ValueError(
            "--executor ray: Ray is not installed (pip install 'attnlab[ray]')"
        ) from None
    if not todo:
        return
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), ignore_reinit_error=True)
    remote = ray.remote(num_cpus=1)(run_one)
    with _progress(len(todo)) as bar:
        for wave in _waves(todo):
            pending = [remote.remote(job, out) for job in wave]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                ray.get(ready)
                bar.update()


def run_one(job: Job, out: Path) -> None:
    """Train ``job`` into its directory (resuming an interrupted run) and record its result.

    Its wall time is the time spent on it, the sum of its segments: a stopped job's time is
    kept in ``KEY.wall`` beside its directory and counted when it resumes from its ``last.pt``
    (a segment killed outright, without Python's ``finally``, is lost); a run that starts
    afresh counts from zero.

    Raises:
        RunError: the run failed; the message names the job and its log.
    """
    from attnlab.lab.cli import main
    from attnlab.lab.train import RunError

    from .claims_conv import receptive_fields
    from .claims_lra import listops_measures
    from .claims_recall import recall_measures
    from .minimal_pairs import pair_scores
    from .probes import head_divergence
    from .rescore import BEAM, beam_scores, scores_at_lengths

    if job.init is not None and read_result(out, job.init) is None:
        first = job.init.label or job.init.key
        raise RunError(f"job {job.label or job.key} starts from job {first}, which has not "
                       "finished: run that first")  # fmt: skip
    run = job_dir(out, job)
    run.parent.mkdir(parents=True, exist_ok=True)
    argv = job.argv(run)
    if run.exists() and not (run / "last.pt").exists() and "--resume" in argv:
        argv = [a for a in argv if a != "--resume"] + ["--overwrite"]  # died before a checkpoint
    log = run.parent / f"{job.key}.log"
    segments = run.parent / f"{job.key}.wall"  # seconds of its earlier, interrupted segments
    wall = float(segments.read_text()) if segments.exists() else 0.0
    if not (run / "metrics.json").exists():  # else it finished but its result was not written
        if "--resume" not in argv:  # a fresh run: what earlier segments did is gone
            wall = 0.0
        start = time.perf_counter()
        try:
            with open(log, "a") as stream, _output_to(stream):
                code = main(argv)
        finally:  # a stopped job's time counts when it resumes
            wall += time.perf_counter() - start
            atomic_write_text(segments, f"{wall:.3f}\n")
        if code != 0:
            raise RunError(
                f"job {job.label or job.key} failed (exit {code}): {job.command()}; see {log}"
            )
    elif not wall:  # it finished before its time was kept: the trainer's clock, all segments
        wall = float(json.loads((run / "metrics.json").read_text()).get("wall_time_s", 0.0))
    extra = {}
    if job.task == "pos" and "--model.encoder.kind=fc" not in job.options:  # claim 6's measure
        extra["head_js"] = head_divergence(run)
    if job.task == "pos":  # claim 3's test: the long-range minimal pairs
        extra["minimal_pairs"] = pair_scores(run)
    if job.task == "listops":  # claim 14's lookup baseline; speed at 3 lengths, memory: seed 0
        extra.update(listops_measures(run, costs=job.seed == 0))
    if job.task in ("digits", "fashion") and "--model.encoder.kind=cnn" not in job.options:
        extra["receptive_fields"] = receptive_fields(run)  # claim 9: what attention learnt
    if job.task == "recall" and job.seed == 0:  # claim 11: a step's time against the length
        extra.update(recall_measures(run))
    if job.task == "positions":  # claim 7: the same model tested at 2L and 4L
        extra["test_at"] = scores_at_lengths(run)
    if job.task == "g2p":  # claim 15: the same model decoded with a beam
        beam = beam_scores(run, BEAM)
        extra["dev_at"], extra["test_at"] = ({f"beam {BEAM}": beam[s]} for s in ("dev", "test"))
    write_result(out, job, wall, _provenance(job), extra)
    segments.unlink(missing_ok=True)


@contextlib.contextmanager
def _output_to(stream):
    """Everything a job prints (stdout, stderr, log records) goes to ``stream``."""
    root = logging.getLogger()
    handlers = root.handlers[:]
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root.handlers = [handler]
    try:
        with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
            yield
    finally:
        root.handlers = handlers


def _provenance(job: Job) -> dict[str, Any]:
    from attnlab.lab.bench.train import machine
    from attnlab.provenance import code_identity

    return {
        **code_identity(),
        **machine(),  # cpu, isa, threads, torch, python
        "seed": job.seed,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
