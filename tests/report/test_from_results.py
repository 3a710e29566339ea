"""``attnlab report --from-results``: which results of another report are taken, and which
``init`` jobs run again because the checkpoint their followers read is not here (no data mirror
needed: nothing trains)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from attnlab.lab.cli import main
from attnlab.lab.report import execute
from attnlab.lab.report.claim import claims_plan
from attnlab.lab.report.claims import BUDGETS, select
from attnlab.lab.report.jobs import (
    Job,
    JobResult,
    forget,
    import_results,
    job_dir,
    lost_inits,
    read_result,
    write_results,
)

MLM = Job("mlm", ("--train.max_steps=3",), 0, "pre-training")
TUNED = Job("pos", ("--train.max_steps=3",), 0, "tuned", init=MLM)
OTHER = Job("pos", ("--train.max_steps=4",), 0, "other")


def _result(job: Job, score: float = 0.5) -> JobResult:
    return JobResult(job.key, job.task, list(job.options), job.seed, job.label,
                     {"best_score": score}, 1.0, {})  # fmt: skip


def _finish(out: Path, job: Job, *files: str) -> None:
    """``job`` finished in ``out``: its result, and ``files`` of its run."""
    run = job_dir(out, job)
    run.mkdir(parents=True, exist_ok=True)
    (run / "result.json").write_text(json.dumps(asdict(_result(job))))
    for name in files:
        (run / name).write_text("")


@pytest.mark.parametrize("files, lost", [
    ((), True),  # a result without its run: taken from another report
    (("metrics.json",), True),  # its checkpoints deleted
    (("config.json", "last.pt"), True),  # a checkpoint, but of a run that did not finish
    (("metrics.json", "best.pt"), False),
    (("metrics.json", "last.pt"), False),
])  # fmt: skip
def test_an_init_runs_again_only_without_its_finished_runs_checkpoint(tmp_path, files, lost):
    _finish(tmp_path, MLM, *files)
    assert lost_inits(tmp_path, [TUNED, OTHER]) == ([MLM] if lost else [])
    assert lost_inits(tmp_path, [OTHER]) == []  # no job to run starts from it


def test_an_init_taken_but_not_yet_recorded_is_lost_too(tmp_path):
    assert lost_inits(tmp_path, [TUNED]) == []  # not finished: it runs anyway, as a todo job
    assert lost_inits(tmp_path, [TUNED], taken={MLM.key}) == [MLM]


def test_results_are_taken_by_key_for_jobs_neither_finished_nor_begun_here(tmp_path):
    given = tmp_path / "given.jsonl"
    stranger = Job("pos", ("--train.max_steps=5",), 0)  # in the file, not in the plan
    write_results(given, [_result(j, 0.9) for j in (MLM, TUNED, OTHER, stranger)])
    out = tmp_path / "out"
    _finish(out, OTHER)  # finished here: its own result stays
    job_dir(out, TUNED).mkdir(parents=True)  # begun here (a run stopped part-way): it resumes
    (job_dir(out, TUNED) / "last.pt").write_text("")
    assert import_results(out, [MLM, TUNED, OTHER], given, record=False) == (
        {MLM.key},
        {j.key for j in (MLM, TUNED, OTHER, stranger)},
    )
    assert read_result(out, MLM) is None  # record=False writes nothing
    taken, _ = import_results(out, [MLM, TUNED, OTHER], given)
    assert taken == {MLM.key}
    assert read_result(out, MLM).dev == 0.9 and read_result(out, OTHER).dev == 0.5
    assert read_result(out, TUNED) is None
    assert import_results(out, [MLM, TUNED, OTHER], given)[0] == set()  # once


def test_forget_removes_a_jobs_result_run_and_time_but_not_its_log(tmp_path):
    _finish(tmp_path, MLM, "metrics.json", "best.pt")
    jobs = tmp_path / "jobs"
    (jobs / f"{MLM.key}.wall").write_text("3.0\n")
    (jobs / f"{MLM.key}.log").write_text("trained\n")
    forget(tmp_path, MLM)
    assert sorted(p.name for p in jobs.iterdir()) == [f"{MLM.key}.log"]


def test_under_a_shard_the_results_of_other_shards_are_no_strangers(tmp_path, monkeypatch,
                                                                     capsys):  # fmt: skip
    plan = claims_plan(select(["scores"]), BUDGETS["smoke"])
    given = tmp_path / "given.jsonl"
    write_results(given, [_result(j) for j in plan])
    ran = []
    monkeypatch.setattr(execute, "run_one", lambda job, out, limit: ran.append(job.key))
    monkeypatch.setattr("attnlab.lab.report.render.render", lambda *a: "rendered")
    out = tmp_path / "out"
    args = ["report", "--budget", "smoke", "--claims", "scores", "--out", str(out)]
    assert main([*args, "--shard", "1/2", "--from-results", str(given)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"took the results of 1 job from {given}\n"), printed
    assert "1 of this shard's 1 already done, 0 to run" in printed and ran == []


def test_a_results_file_for_another_budgets_directory_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"budget": "quick", "claims": ["4"]}))
    plan = claims_plan(select(["scores"]), BUDGETS["smoke"])
    given = tmp_path / "given.jsonl"
    write_results(given, [_result(j) for j in plan])
    args = ["report", "--budget", "smoke", "--claims", "scores", "--out", str(out)]
    assert main([*args, "--from-results", str(given)]) == 2
    assert "holds a 'quick' report" in capsys.readouterr().err
    assert not (out / "jobs").exists()
