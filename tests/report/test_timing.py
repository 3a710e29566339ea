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
from attnlab.lab.report.passes import timing_note
from attnlab.lab.report.timing import time_claims, timed_jobs

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


QUIET = {"say": lambda _: None}


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
    assert time_claims(tmp_path, [claim], BUDGET, **QUIET) == 0  # b not finished
    _finish(tmp_path, jobs["b"][0])
    assert time_claims(tmp_path, [claim], BUDGET, **QUIET) == 2
    a, b = (read_result(tmp_path, jobs[v][0]) for v in "ab")
    assert (a.metrics["speed"], b.metrics["speed"]) == (1, 2)
    assert a.metrics["timed"] == b.metrics["timed"]  # one pass
    assert a.metrics["timed"]["threads"] == torch.get_num_threads()
    # the other load during the pass, a share of the CPUs: where /proc/stat says it and the
    # pass lasted a clock tick (these runs time in microseconds)
    assert 0.0 <= a.metrics["timed"].get("others", 0.0) <= 1.0
    assert "speed" not in read_result(tmp_path, jobs["a"][1]).metrics  # seed 1: never timed
    assert time_claims(tmp_path, [claim], BUDGET, **QUIET) == 0  # done: kept
    note = timing_note([a, b], "speed")
    assert note.startswith("the speeds were timed side by side after the training, in one pass")


def test_a_run_without_figures_has_every_run_here_timed_again(tmp_path, claim):
    jobs = claim.jobs(BUDGET)
    _finish(tmp_path, jobs["a"][0], speed=7, timed={"at": "then", "cpu": "x", "threads": 1})
    _finish(tmp_path, jobs["b"][0])  # e.g. trained again since
    assert time_claims(tmp_path, [claim], BUDGET, **QUIET) == 2
    a, b = (read_result(tmp_path, jobs[v][0]) for v in "ab")
    assert a.metrics["timed"] == b.metrics["timed"] != {"at": "then", "cpu": "x", "threads": 1}


def test_figures_of_different_passes_are_taken_again_and_a_run_not_here_keeps_its_own(
    tmp_path, claim
):
    jobs = claim.jobs(BUDGET)
    elsewhere = {"at": "2026-01-01 00:00:00 UTC", "cpu": "another CPU", "threads": 8}
    _finish(tmp_path, jobs["a"][0], run=False, speed=7, timed=elsewhere)  # --from-results
    _finish(tmp_path, jobs["b"][0])
    assert time_claims(tmp_path, [claim], BUDGET, **QUIET) == 1
    assert claim.timed_runs == [jobs["b"][0].key]
    a, b = (read_result(tmp_path, jobs[v][0]) for v in "ab")
    assert a.metrics["speed"] == 7 and a.metrics["timed"] == elsewhere
    note = timing_note([a, b], "speed")
    assert note.startswith("the speeds were timed in 2 passes") and "another CPU" in note
    assert "not side by side" in note
    assert time_claims(tmp_path, [claim], BUDGET, **QUIET) == 0  # b's pass is one


def test_figures_timed_during_the_runs_are_timed_again_here_and_stamped(tmp_path, claim):
    """Figures without a stamp (timed after each run, before there were passes) are of no pass:
    runs here get one; from elsewhere, they are said to be as they are."""
    jobs = claim.jobs(BUDGET)
    for v in "ab":
        _finish(tmp_path, jobs[v][0], speed=7)
    old = [read_result(tmp_path, jobs[v][0]) for v in "ab"]
    assert timing_note(old, "speed").startswith("the speeds were timed after each run, each "
                                                "run alone")  # fmt: skip
    assert time_claims(tmp_path, [claim], BUDGET, **QUIET) == 2
    new = [read_result(tmp_path, jobs[v][0]) for v in "ab"]
    assert [r.metrics["speed"] for r in new] == [1, 2] and new[0].metrics["timed"]
    mixed = timing_note([old[0], new[1]], "speed")
    assert mixed.startswith("the speeds were timed in 2 passes") and "during their runs" in mixed


def test_a_pass_that_fails_writes_nothing_and_says_why(tmp_path, claim):
    jobs = claim.jobs(BUDGET)
    for v in "ab":
        _finish(tmp_path, jobs[v][0])
    calls = []

    def fails_second(run: Path) -> dict:
        calls.append(run.name)
        if len(calls) == 2:
            raise RuntimeError("out of memory\nat the bound")
        return {"speed": 1}

    claim.time_run = fails_second
    said: list[str] = []
    assert time_claims(tmp_path, [claim], BUDGET, say=said.append) == 0
    assert said[-1] == ("claim 99: timing failed at b, nothing written (RuntimeError: out of "
                        "memory)")  # fmt: skip
    assert all("speed" not in read_result(tmp_path, jobs[v][0]).metrics for v in "ab")


def test_timing_again_drops_the_figures_the_earlier_pass_wrote(tmp_path, claim):
    jobs = claim.jobs(BUDGET)
    stamp = {"at": "then", "cpu": "x", "threads": 1, "keys": ["speed", "speed_errors"]}
    _finish(tmp_path, jobs["a"][0], speed=7, speed_errors={"4000": "too long"}, timed=stamp)
    _finish(tmp_path, jobs["b"][0])
    assert time_claims(tmp_path, [claim], BUDGET, **QUIET) == 2
    a = read_result(tmp_path, jobs["a"][0]).metrics
    assert "speed_errors" not in a and a["timed"]["keys"] == ["speed"]
    assert a["best_score"] == 0.5  # the run's own metrics stay


def test_a_shard_leaves_the_timing_to_a_run_without_shard(tmp_path, monkeypatch, capsys):
    from attnlab.lab.report import execute
    from attnlab.lab.report import run as report_run

    monkeypatch.setattr(execute, "run_one", lambda job, out, limit: None)
    monkeypatch.setattr("attnlab.lab.report.render.render", lambda *a: "rendered")
    monkeypatch.setattr(report_run, "time_claims", lambda *a, **k: pytest.fail("timed"))
    assert report_run.report_command(budget="smoke", claims=["14", "4"], out=tmp_path,
                                     shard_spec="1/2") == 0  # fmt: skip
    out = capsys.readouterr().out
    assert f"run attnlab report --budget smoke --out {tmp_path} --claims 14 (without " in out


def test_a_claim_that_times_nothing_has_no_timed_runs(claim):
    claim.timed = None
    assert timed_jobs(claim, BUDGET) == []
    assert timing_note([], "speed") is None


def test_a_pass_that_was_not_quiet_says_so():
    def timed(others):
        stamp = {"at": "2026-12-06 05:00:00 UTC", "cpu": "a CPU", "threads": 2, "others": others}
        return [JobResult("k", "t", [], 0, "a", {"speed": 1.0, "timed": stamp}, 1.0, {})]

    quiet, busy = timing_note(timed(0.02), "speed"), timing_note(timed(0.4), "speed")
    assert quiet.endswith("2 threads, other load 2% of the CPUs") and "not quiet" not in quiet
    assert busy.endswith("other load 40% of the CPUs (not quiet: its speeds may be off)")


def test_the_other_load_is_what_this_process_did_not_use(monkeypatch):
    """/proc/stat's busy time less this process's own CPU time, over all CPUs' time."""
    from attnlab.lab.report import timing

    readings = iter([(100.0, 400.0, 10.0), (130.0, 440.0, 30.0)])  # busy, all, own seconds
    monkeypatch.setattr(timing._Load, "_now", staticmethod(lambda: next(readings)))
    assert timing._Load().others() == pytest.approx((30 - 20) / 40)
