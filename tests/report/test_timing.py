"""The timing pass of ``attnlab report`` (:mod:`attnlab.lab.report.timing`): a timed claim's
runs of seed 0 are timed together, after all have finished, in one pass, and again only when
the figures are missing or of different passes (no data needed: nothing trains)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from attnlab.lab.report.budgets import Budget
from attnlab.lab.report.claim import Claim
from attnlab.lab.report.jobs import JobResult, job_dir, read_result
from attnlab.lab.report.timing import time_claims, timed_jobs, timing_note

BUDGET = Budget("test", (0, 1), {"recall": ("--train.max_steps=3",)}, "for the tests")


class Timed(Claim):
    """Two variants; timing a run gives ``{"speed": N}``, N counting the calls."""

    number, task, name, timed = 99, "recall", "timed for the tests", "speed"

    def __init__(self) -> None:
        self.timed_runs: list[str] = []

    def variants(self):
        return [("a", ()), ("b", ("--model.encoder.kind=rnn",))]

    def time_run(self, run: Path) -> dict:
        self.timed_runs.append(run.name)
        return {"speed": len(self.timed_runs)}


def _finish(out: Path, job, *, run: bool = True, **metrics) -> None:
    """``job`` finished in ``out`` (with its run's checkpoint unless ``run`` is False: a result
    taken from another report)."""
    path = job_dir(out, job)
    path.mkdir(parents=True, exist_ok=True)
    result = JobResult(job.key, job.task, list(job.options), job.seed, job.label,
                       {"best_score": 0.5, **metrics}, 1.0, {})  # fmt: skip
    (path / "result.json").write_text(json.dumps(asdict(result)))
    if run:
        (path / "metrics.json").write_text("{}")
        (path / "best.pt").write_text("")


@pytest.fixture
def claim() -> Timed:
    return Timed()


def test_the_runs_of_seed_0_are_timed_once_all_have_finished_in_one_pass(tmp_path, claim):
    jobs = claim.jobs(BUDGET)
    assert timed_jobs(claim, BUDGET) == [jobs["a"][0], jobs["b"][0]]
    _finish(tmp_path, jobs["a"][0])
    _finish(tmp_path, jobs["a"][1])
    assert time_claims(tmp_path, [claim], BUDGET, say=lambda _: None) == 0  # b not finished
    _finish(tmp_path, jobs["b"][0])
    assert time_claims(tmp_path, [claim], BUDGET, say=lambda _: None) == 2
    a, b = (read_result(tmp_path, jobs[v][0]) for v in "ab")
    assert (a.metrics["speed"], b.metrics["speed"]) == (1, 2)
    assert a.metrics["timed"] == b.metrics["timed"]  # one pass
    assert a.metrics["timed"]["threads"] == torch.get_num_threads()
    assert "speed" not in read_result(tmp_path, jobs["a"][1]).metrics  # seed 1: never timed
    assert time_claims(tmp_path, [claim], BUDGET, say=lambda _: None) == 0  # done: kept
    note = timing_note([a, b])
    assert note.startswith("the speeds were timed side by side after the training, in one pass")


def test_a_run_without_figures_has_every_run_here_timed_again(tmp_path, claim):
    jobs = claim.jobs(BUDGET)
    _finish(tmp_path, jobs["a"][0], speed=7, timed={"at": "then", "cpu": "x", "threads": 1})
    _finish(tmp_path, jobs["b"][0])  # e.g. trained again since
    assert time_claims(tmp_path, [claim], BUDGET, say=lambda _: None) == 2
    a, b = (read_result(tmp_path, jobs[v][0]) for v in "ab")
    assert a.metrics["timed"] == b.metrics["timed"] != {"at": "then", "cpu": "x", "threads": 1}


def test_figures_of_different_passes_are_taken_again_and_a_run_not_here_keeps_its_own(
    tmp_path, claim
):
    jobs = claim.jobs(BUDGET)
    elsewhere = {"at": "2026-01-01 00:00:00 UTC", "cpu": "another CPU", "threads": 8}
    _finish(tmp_path, jobs["a"][0], run=False, speed=7, timed=elsewhere)  # --from-results
    _finish(tmp_path, jobs["b"][0])
    assert time_claims(tmp_path, [claim], BUDGET, say=lambda _: None) == 1
    assert claim.timed_runs == [jobs["b"][0].key]
    a, b = (read_result(tmp_path, jobs[v][0]) for v in "ab")
    assert a.metrics["speed"] == 7 and a.metrics["timed"] == elsewhere
    note = timing_note([a, b])
    assert note.startswith("the speeds were timed in 2 passes") and "another CPU" in note
    assert "not side by side" in note
    assert time_claims(tmp_path, [claim], BUDGET, say=lambda _: None) == 0  # b's pass is one


def test_a_claim_that_times_nothing_has_no_timed_runs(claim):
    claim.timed = None
    assert timed_jobs(claim, BUDGET) == []
    assert timing_note([]) is None
