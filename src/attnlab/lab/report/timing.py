"""The measures that compare speeds (claim 8: a training step on dev utterances; 11 and 14: a
training step's time against the sequence length), taken after the training, side by side.

A timed claim's runs train like any other job: beside each other under ``--jobs N``, on Ray
wherever a CPU is free, over shards and days. What the claim compares is timed afterwards: once
every variant's run of seed 0 has finished, :func:`time_claims` measures each of them in turn
(:meth:`Claim.time_run <.claim.Claim.time_run>`) in the report's own process, with all of its
threads and no job running, and adds the figures to the job's result with the pass that took
them (``metrics["timed"]``: when, on which CPU, with how many threads, and ``others``, the
share of the machine's CPU time that went elsewhere meanwhile: other processes, or other
virtual machines' steal). A pass measures every
run of the claim that is here, so that its figures are of one machine at one time; another
pass runs when a run here lacks its figures or they come from different passes. A result taken
from another report (``--from-results``) has no run here: it keeps the figures it came with,
and the claim's page names the passes its figures come from (:func:`.passes.timing_note`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .jobs import Job, add_to_result, has_run, job_dir, read_result
from .passes import source

if TYPE_CHECKING:
    from .budgets import Budget
    from .claim import Claim

__all__ = ["time_claims", "timed_jobs"]


def timed_jobs(claim: Claim, budget: Budget) -> list[Job]:
    """The runs ``claim`` times at ``budget``: each variant's of seed 0 (none if it times
    nothing)."""
    if claim.timed is None:
        return []
    return [job for runs in claim.jobs(budget).values() for job in runs if job.seed == 0]


def time_claims(
    out: Path, claims: Sequence[Claim], budget: Budget, *, say: Callable[[str], Any] = print
) -> int:
    """Time the runs of each timed claim of ``claims`` in ``out`` (module docstring) once they
    have all finished, unless their figures are there, stamped by one pass; return how many
    runs were timed. Every run of a claim is timed before any result is written: a pass that
    fails (an error, said in one line) or is interrupted leaves the claim's results as they
    were."""
    import torch

    from attnlab.lab.bench.train import machine
    from attnlab.lab.train.host_memory import allocator, keep_freed_memory

    keep_freed_memory()  # as the runs trained: a pass's figures do not depend on who ran before

    timed = 0
    for claim in claims:
        group = timed_jobs(claim, budget)
        results = [read_result(out, job) for job in group]
        if not group or any(r is None for r in results):
            continue  # the pass waits for every run: its figures are side by side
        here = [(job, r) for job, r in zip(group, results) if has_run(out, job)]
        due = [job for job, r in here if claim.timed not in r.metrics or not r.metrics.get("timed")]
        if not here or (not due and len({source(r, claim.timed) for _, r in here}) == 1):
            continue
        stamp = {"at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                 "cpu": machine()["cpu"], "threads": torch.get_num_threads(),
                 "allocator": allocator()}  # fmt: skip
        say(f"claim {claim.number}: timing its {len(here)} runs of seed 0 one after another, "
            f"with {stamp['threads']} threads")  # fmt: skip
        measured, load = {}, _Load()
        try:
            for job, _ in here:
                start = time.perf_counter()
                measured[job.key] = claim.time_run(job_dir(out, job))
                say(f"  {job.label or job.key}: {time.perf_counter() - start:.1f} s")
            if (others := load.others()) is not None:
                stamp["others"] = round(others, 3)
                say(f"  other load meanwhile: {others:.0%} of the CPUs")
        except Exception as error:  # noqa: BLE001 - said; the report still renders
            first = (str(error).splitlines() or [type(error).__name__])[0]
            say(f"claim {claim.number}: timing failed at {job.label or job.key}, nothing "
                f"written ({type(error).__name__}: {first})")  # fmt: skip
            continue
        for job, r in here:
            before = (r.metrics.get("timed") or {}).get("keys", [])  # an earlier pass's figures
            figures = measured[job.key]
            add_to_result(out, job, {**figures, "timed": {**stamp, "keys": sorted(figures)}},
                          drop=before)  # fmt: skip
            timed += 1
    return timed


class _Load:
    """How much of the machine's CPU time goes elsewhere from now until :meth:`others`: other
    processes, and steal (Linux: ``/proc/stat`` less this process's own CPU time)."""

    def __init__(self) -> None:
        self.start = self._now()

    @staticmethod
    def _now() -> tuple[float, float, float] | None:
        """(busy, all) seconds of every CPU since boot, and this process's CPU seconds."""
        try:
            fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        except OSError:
            return None
        if fields[:1] != ["cpu"]:
            return None
        ticks = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
        tick = os.sysconf("SC_CLK_TCK")
        own = os.times()
        idle = ticks[3] + ticks[4]
        return (sum(ticks) - idle) / tick, sum(ticks) / tick, own.user + own.system

    def others(self) -> float | None:
        """The share, 0 to 1, of all CPUs' time that went elsewhere (None off Linux)."""
        end = self._now()
        if self.start is None or end is None or end[1] <= self.start[1]:
            return None
        busy, total, own = (b - a for a, b in zip(self.start, end))
        return min(max((busy - own) / total, 0.0), 1.0)
