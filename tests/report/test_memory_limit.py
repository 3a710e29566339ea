"""``--max-memory``: a job whose process holds more stops saved, with a one-line error, and the
report run again resumes it; the limit's default is a share of the machine; bad values are
one-line errors. (The guard itself: tests/train/test_memory_guard.py.)"""

from __future__ import annotations

import functools
import re

import pytest

from attnlab.lab.cli import main
from attnlab.lab.report import execute
from attnlab.lab.report import run as report_run
from attnlab.lab.report.jobs import Job, job_dir
from attnlab.lab.train import RunError
from attnlab.lab.train.memory_guard import GIB, MemoryGuard, total_memory_bytes

#: a tiny tagger of the Brown corpus in the data mirror
JOB = Job("pos", ("--train.max_steps=6", "--task_options.max_train_sentences=200",
                  "--model.input.dim=32", "--train.log_every=0"), 0, "tagger")  # fmt: skip


@pytest.mark.usefixtures("data_mirror")
def test_a_job_over_its_memory_limit_stops_saved_and_resumes_when_run_again(tmp_path,
                                                                           monkeypatch):  # fmt: skip
    """The guard reads 1.1 times the limit once the run has begun training (its config.json
    written, inside the trainer's Ctrl-C handling), and asks the real trainer to stop."""
    run = job_dir(tmp_path, JOB)
    limit = 4 * GIB

    def held() -> int:
        return int(1.1 * limit) if (run / "config.json").exists() else GIB

    monkeypatch.setattr(execute, "MemoryGuard",
                        functools.partial(MemoryGuard, interval_s=0.01, held=held))  # fmt: skip
    with pytest.raises(RunError) as stopped:
        execute.run_one(JOB, tmp_path, limit)
    assert str(stopped.value).startswith(
        "job tagger stopped: its process held 4.4 GiB, over the limit of 4.0 GiB (--max-memory); "
        "it saved last.pt, so running the report again resumes it"
    )
    assert (run / "last.pt").exists() and report_run.read_result(tmp_path, JOB) is None
    execute.run_one(JOB, tmp_path, None)  # no limit now
    assert report_run.read_result(tmp_path, JOB) is not None
    second = (tmp_path / "jobs" / f"{JOB.key}.log").read_text().split("resume with:")[1]
    assert re.search(r"\| [1-5]/6 \[", second) and "| 6/6 [" in second  # went on, to the end


def test_the_default_limit_is_three_quarters_of_the_machine_divided_among_the_jobs(
        tmp_path, monkeypatch):  # fmt: skip
    given = []
    monkeypatch.setattr(report_run, "run_local", lambda todo, out, jobs, limit: given.append(limit))
    monkeypatch.setattr(report_run, "time_claims", lambda *args: None)
    report = ["report", "--budget", "smoke", "--claims", "1", "--out", str(tmp_path / "r")]
    assert main([*report, "--jobs", "2"]) == 0
    assert main([*report, "--max-memory", "1.5"]) == 0
    assert main([*report, "--max-memory", "0"]) == 0
    total = total_memory_bytes()
    assert total is not None
    assert given == [int(total * 0.75 / 2), int(1.5 * GIB), None]


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_negative_memory_limit_is_a_one_line_error(tmp_path, capsys, value):
    out = tmp_path / "r"
    assert main(["report", "--budget", "smoke", "--out", str(out), "--max-memory", value]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnlab report: error: --max-memory: expected GiB >= 0 (0: no limit), got {value}"
    )
    assert not out.exists()
