"""``attnlab report``'s errors of the user's making: one line naming the argument or the file,
exit status 2, before anything trains (no data mirror needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnlab.lab.cli import main
from attnlab.lab.report.claim import claims_plan
from attnlab.lab.report.claims import BUDGETS, select
from attnlab.lab.report.jobs import job_dir, read_results


def _report(out: Path, *args: str) -> int:
    return main(["report", "--budget", "smoke", "--out", str(out), *args])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_bad_arguments_are_one_line(tmp_path, capsys):
    assert _report(tmp_path / "a", "--claims", "teleportation") == 2
    assert "unknown claim 'teleportation'" in _one_line(capsys)
    assert _report(Path("/proc/attnlab-report")) == 2
    assert "--out: cannot write the report to /proc/attnlab-report" in _one_line(capsys)
    assert main(["report", "--collect", str(tmp_path / "nothing")]) == 2
    assert "no report here" in _one_line(capsys)
    assert _report(tmp_path / "b", "--shard", "3/2") == 2
    assert "--shard: expected I/N" in _one_line(capsys)
    for jobs in ("0", "1000"):  # more processes than cores would oversubscribe them
        assert _report(tmp_path / "c", "--claims", "scores", "--jobs", jobs) == 2
        assert "--jobs: expected 1 to " in _one_line(capsys)
    missing = tmp_path / "none.jsonl"
    assert _report(tmp_path / "d", "--claims", "scores", "--from-results", str(missing)) == 2
    assert f"--from-results: cannot read {missing}: No such file" in _one_line(capsys)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert _report(tmp_path / "d", "--claims", "scores", "--from-results", str(bad)) == 2
    assert f"--from-results: {bad}, line 1: not a job result" in _one_line(capsys)
    bad.write_bytes(b"\xff\xfe")  # not text
    assert _report(tmp_path / "d", "--claims", "scores", "--from-results", str(bad)) == 2
    assert f"--from-results: {bad}: 'utf-8' codec can't decode" in _one_line(capsys)
    assert main(["report", "--collect", str(tmp_path), "--from-results", str(bad)]) == 2
    assert "--from-results: not with --collect" in _one_line(capsys)


def test_a_corrupt_result_is_one_line_naming_its_file(tmp_path, capsys):
    bad = tmp_path / "results.jsonl"
    bad.write_text(json.dumps({"key": "x"}) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"results.jsonl, line 1: not a job result"):
        read_results(bad)
    out = tmp_path / "report"  # a report whose first job's result.json is cut short
    out.mkdir()
    (out / "report.json").write_text(json.dumps({"budget": "smoke", "claims": ["4"]}))
    job = claims_plan(select(["4"]), BUDGETS["smoke"])[0]
    job_dir(out, job).mkdir(parents=True)
    (job_dir(out, job) / "result.json").write_text('{"key": "')
    assert main(["report", "--collect", str(out)]) == 2
    assert f"{job_dir(out, job) / 'result.json'}: not a job result" in _one_line(capsys)


def test_check_sets_up_each_job_without_training_or_writing(tmp_path, capsys, monkeypatch):
    """``--check`` (claim 10 in the smoke budget: 8x8 digits, which scikit-learn ships) sets up
    each unfinished variant once and writes nothing; a size that no class-balanced subset
    reaches is a FAIL line naming the job and the error, and exit status 1."""
    from attnlab.lab.report.claims_data import DataEfficiency

    out = tmp_path / "r"
    assert _report(out, "--claims", "10", "--check") == 0
    lines = capsys.readouterr().out.splitlines()
    assert sorted(line.rsplit(" (", 1)[0] for line in lines[:-1]) == sorted(
        f"ok   digits: {model}, {n} images"
        for n in DataEfficiency.SIZES["smoke"] for model in ("CNN", "self-attention (patches)")
    )  # fmt: skip
    assert lines[-1] == "check: 6 of 6 set up"
    assert "(train 64, dev 180, test 359)" in "".join(lines)
    assert not out.exists()
    monkeypatch.setitem(DataEfficiency.SIZES, "smoke", (64, 50_000))
    assert _report(out, "--claims", "10", "--check") == 1
    printed = capsys.readouterr().out
    assert "FAIL digits: CNN, 50,000 images: ValueError: task_options.train_size=50000" in printed
    assert printed.splitlines()[-1] == "check: 2 of 4 set up; 2 failed"
