"""Where the report's jobs run: here, one after another; in local worker processes, the
machine's threads divided among them; or on a Ray cluster (:func:`run_local`, :func:`run_ray`).
Each job is trained, or resumed, and its result recorded by :func:`run_one`, wherever it runs.
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
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import torch

from attnlab.lab.train.atomic import atomic_write_text
from attnlab.lab.train.host_memory import jemalloc_env, release_freed_memory
from attnlab.lab.train.memory_guard import HARD_FACTOR, MemoryGuard, total_memory_bytes

from .jobs import Job, job_dir, read_result, write_result

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["MEMORY_SHARE", "memory_share", "run_local", "run_one", "run_ray", "waves"]

#: the part of the machine's memory that the report's running jobs may hold between them
MEMORY_SHARE = 0.75


def waves(todo: Sequence[Job]) -> list[list[Job]]:
    """``todo`` in waves that can run at once: a job after the wave of its ``init`` job (which
    may have finished before: then it is not in ``todo``)."""
    depth = {j.key: len(j.chain()) for j in todo}
    return [[j for j in todo if depth[j.key] == d] for d in sorted(set(depth.values()))]


def _threads(processes: int) -> int:
    return max(1, (os.cpu_count() or 1) // processes)


def memory_share(processes: int) -> int | None:
    """Each of ``processes`` jobs' default memory limit, in bytes: :data:`MEMORY_SHARE` of the
    machine's memory, divided among them (None where the system does not say)."""
    total = total_memory_bytes()
    return int(total * MEMORY_SHARE / processes) if total else None


def _progress(total: int):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="report", unit="job", dynamic_ncols=True)


def run_local(todo: Sequence[Job], out: Path, processes: int,
              max_memory: int | None = None) -> None:  # fmt: skip
    """Run ``todo``: one after another in this process, or in ``processes`` worker processes
    a wave at a time (:func:`waves`), each job's process held to ``max_memory`` bytes
    (:func:`run_one`). (What a claim times is timed afterwards, alone: :mod:`.timing`.)"""
    if not todo:
        return
    with _progress(len(todo)) as bar:
        if processes == 1:
            for job in todo:
                bar.set_postfix_str(job.label)
                try:
                    run_one(job, out, max_memory)
                finally:
                    release_freed_memory()  # the next job starts from what it needs
                bar.update()
            return
        context = get_context("spawn")
        pool = ProcessPoolExecutor(processes, mp_context=context, initializer=_init_worker,
                                   initargs=(_threads(processes),))  # fmt: skip
        try:
            with _sigterm_as_ctrl_c(), environment(jemalloc_env()), pool:
                for wave in waves(todo):
                    bar.set_postfix_str(f"{processes} at a time")
                    _in_workers(pool, wave, out, processes, bar, max_memory)
        except BrokenProcessPool:
            from attnlab.lab.train import RunError

            raise RunError(f"a worker process died (killed: by the system, or past "
                           f"{HARD_FACTOR:g} x --max-memory, which its job's log in "
                           f"{out / 'jobs'} says); running the report again resumes its jobs "
                           "from their last checkpoints") from None  # fmt: skip


def _in_workers(pool: ProcessPoolExecutor, jobs: Sequence[Job], out: Path, processes: int,
                bar: tqdm, max_memory: int | None) -> None:  # fmt: skip
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
                running.add(pool.submit(_in_worker, queue.pop(), out, max_memory))
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
def environment(variables: dict[str, str]) -> Iterator[None]:
    """``os.environ`` plus ``variables`` while the block runs (the processes it starts inherit
    them), as it was afterwards. The workers get jemalloc this way where the system has it
    (:func:`~attnlab.lab.train.host_memory.jemalloc_env`): it must be loaded as a process
    starts."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


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


def _in_worker(job: Job, out: Path, max_memory: int | None) -> None:
    """:func:`run_one` in a worker, unless the report has asked it to stop."""
    from attnlab.lab.train import RunError
    from attnlab.lab.train.interrupt import pending_signal

    if pending_signal() is not None:
        raise RunError(f"job {job.label or job.key} not started: {pending_signal()}")
    try:
        run_one(job, out, max_memory)
    finally:
        release_freed_memory()  # a worker runs job after job: the next starts from what it needs


def run_ray(todo: Sequence[Job], out: Path, max_memory: int | None = None) -> None:
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
    # a job killed past its memory limit is not retried (Ray retries a dead worker's task)
    remote = ray.remote(num_cpus=1, max_retries=0 if max_memory else 3)(run_one)
    with _progress(len(todo)) as bar:
        for wave in waves(todo):
            pending = [remote.remote(job, out, max_memory) for job in wave]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                ray.get(ready)
                bar.update()


def run_one(job: Job, out: Path, max_memory: int | None = None) -> None:
    """Train ``job`` into its directory (resuming an interrupted run) and record its result.

    While it trains, its process may hold at most ``max_memory`` bytes (None: no limit): over
    that, the run saves ``last.pt`` and stops, and this raises an error that says so
    (:class:`~attnlab.lab.train.memory_guard.MemoryGuard`).

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
    from .claims_lra import listops_rules
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
        start, began = time.perf_counter(), time.time()
        guard = MemoryGuard(max_memory) if max_memory else None
        try:
            with open(log, "a") as stream, _output_to(stream), guard or contextlib.nullcontext():
                code = main(argv)
        finally:  # a stopped job's time counts when it resumes
            wall += time.perf_counter() - start
            atomic_write_text(segments, f"{wall:.3f}\n")
        if guard is not None and guard.tripped is not None:
            last = run / "last.pt"
            saved = last.exists() and last.stat().st_mtime >= began
            raise RunError(f"job {job.label or job.key} stopped: {guard.message()} "
                           f"(--max-memory); {'it saved last.pt, so ' if saved else ''}running "
                           f"the report again {'resumes' if saved else 'starts'} it (with more "
                           f"--max-memory GIB if it needs it); see {log}")  # fmt: skip
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
    if job.task == "listops":  # claim 14's lookup baseline (its step costs: .timing)
        extra["rules"] = listops_rules(run)
    if job.task in ("digits", "fashion") and "--model.encoder.kind=cnn" not in job.options:
        extra["receptive_fields"] = receptive_fields(run)  # claim 9: what attention learnt
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
