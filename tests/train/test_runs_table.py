"""``attnlab runs DIR``: one row per run (task, state, scores, time, options that differ from
the task's defaults); ``attnlab plot RUN ... --out FILE.png``: their learning curves."""

from __future__ import annotations

import json
import shutil

import pytest

from attnlab.lab.cli import main
from attnlab.lab.runs import changed_options, summarize_run

from . import toy_task  # noqa: F401  (registers the toy task)

TOY = ["--train.epochs=2", "--train.batch_size=16", "--train.device=cpu", "--train.log_every=0",
       "--train.precision=fp32"]  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    assert main(["train", "toy", *TOY, f"--out_dir={root / 'base'}"]) == 0
    assert main(["train", "toy", *TOY, "--train.lr=0.01", f"--out_dir={root / 'fast'}"]) == 0
    shutil.copytree(root / "base", root / "cut")
    (root / "cut" / "metrics.json").unlink()  # stopped before its final test
    (root / "lost").mkdir()
    shutil.copy(root / "base" / "config.json", root / "lost")  # died before a checkpoint
    return root


def test_runs_lists_each_run_with_its_state_scores_and_changed_options(runs, capsys):
    assert main(["runs", str(runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["RUN", "TASK", "STATE", "METRIC", "DEV", "TEST", "TIME", "OPTIONS"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert sorted(rows) == ["base", "cut", "fast", "lost"]
    assert rows["base"].split()[1:4] == ["toy", "complete", "accuracy"]
    assert rows["cut"].split()[2] == "partial" and rows["lost"].split()[2] == "failed"
    assert "--train.lr=0.01" in rows["fast"] and "--train.lr" not in rows["base"]
    assert "--train.epochs=2" in rows["base"] and "--out_dir" not in rows["base"]
    base = summarize_run(runs / "base")
    metrics = json.loads((runs / "base" / "metrics.json").read_text())
    assert base.dev == metrics["best_score"] and base.test == metrics["test"]["accuracy"]
    assert f"{base.dev:.4f}" in rows["base"] and " s " in rows["base"]
    assert summarize_run(runs / "cut").dev == base.dev  # from metrics.csv
    assert summarize_run(runs / "lost").dev is None


def test_changed_options_of_a_default_run_are_none():
    from attnlab.lab.train import RunConfig

    assert changed_options(RunConfig.for_task("pos").to_dict()) == []


def test_runs_of_a_missing_directory_is_one_error_line(tmp_path, capsys):
    assert main(["runs", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"attnlab runs: error: runs: {tmp_path / 'nope'} is not a directory (give the folder "
        "of your runs)"
    )


def test_plot_draws_several_runs_on_one_figure(runs, tmp_path, capsys):
    out = tmp_path / "curves.png"
    assert main(["plot", str(runs / "base"), str(runs / "fast"), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["plot", str(runs / "lost"), "--out", str(out)]) == 2
    assert "has no metrics.csv" in capsys.readouterr().err
