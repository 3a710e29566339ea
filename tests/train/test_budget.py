"""``train.max_time``: a wall-clock budget that stops a run cleanly, is saved with it, and is
accounted over ``--resume``; and ``--resume`` of a complete run."""

from __future__ import annotations

import json
import logging
import time

import pytest

from attnlab.lab.train import RunConfig
from attnlab.lab.train.budget import format_duration, parse_duration
from attnlab.lab.train.errors import RunComplete
from attnlab.lab.train.resume import check_not_complete

from .helpers import run
from .toy_task import ToyTask, toy_config


class SleepyToy(ToyTask):
    """The toy task, each training step at least 20 ms long."""

    def loss(self, model, batch):
        if model.training:
            time.sleep(0.02)
        return super().loss(model, batch)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("45", 45), ("0", 0),
     (12.5, 12.5), ("1.5h", 5400)],
)  # fmt: skip
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("name", ["max_time", "checkpoint_interval"])
@pytest.mark.parametrize("bad", ["abc", "30x", "m", "", "-5", "5 minutes"])
def test_a_bad_duration_names_the_option_and_the_forms(bad, name):
    with pytest.raises(ValueError, match=rf"train\.{name}: expected a duration \(90s, 30m, 2h"):
        toy_config("unused", f"--train.{name}={bad}")


def test_format_duration():
    assert [format_duration(s) for s in (42, 738, 5400)] == ["42 s", "12.3 min", "1.5 h"]


def test_the_budget_stops_the_run_with_a_checkpoint_and_resume_accounts_for_it(tmp_path, caplog):
    # 10 epochs of 6 steps of >= 20 ms: 1.2 s at least; the budget 0.25 s ends it early.
    result = run(tmp_path, "--train.epochs=10", "--train.max_time=0.25", task=SleepyToy())
    assert result.time_up and 1 <= result.steps < 60 and not result.stopped_early
    assert result.history[-1]["step"] == result.steps  # evaluated where it stopped
    for name in ("last.pt", "best.pt", "metrics.json"):
        assert (tmp_path / name).is_file()
    assert json.loads((tmp_path / "config.json").read_text())["train"]["max_time"] == 0.25
    assert json.loads((tmp_path / "metrics.json").read_text())["time_up"] is True
    first = result.steps

    # the same budget: nothing left; the run says so and is left as it is
    cfg = toy_config(tmp_path, "--train.epochs=10", "--train.max_time=0.25")
    with pytest.raises(RunComplete, match=r"already complete .*train\.max_time=0\.25 spent"):
        check_not_complete(cfg)

    # a larger budget: continues from the time already spent, and logs what is left
    with caplog.at_level(logging.INFO, logger="attnlab"):
        more = run(tmp_path, "--train.epochs=10", "--train.max_time=0.6", task=SleepyToy(),
                   resume=True)  # fmt: skip
    assert "time budget train.max_time=0.6 (was 0.25)" in caplog.text and "left" in caplog.text
    assert first < more.steps < 60 and more.time_up
    assert more.wall_time_s >= 0.6  # the first segment's time counts


def test_resume_of_a_complete_run_says_so_and_a_longer_schedule_is_logged(tmp_path, caplog):
    run(tmp_path, "--train.epochs=2")
    with pytest.raises(RunComplete, match=r"already complete \(train\.epochs=2 reached; raise"):
        check_not_complete(toy_config(tmp_path, "--train.epochs=2"))
    with caplog.at_level(logging.INFO, logger="attnlab"):
        result = run(tmp_path, "--train.epochs=3", resume=True)
    assert result.steps == 18 and result.epochs == 3
    assert "resuming at step 12 with a schedule of another length: 18 steps" in caplog.text
    assert "was 12" in caplog.text


def test_the_summary_line_is_rounded(tmp_path):
    result = run(tmp_path, "--train.epochs=1")
    line = result.summary_line()
    assert line.startswith("done: toy  dev accuracy 0.") and line.endswith(str(tmp_path))
    assert f"test accuracy {result.test['accuracy']:.4f}" in line and "{" not in line
    assert RunConfig.for_task("toy").out_dir == "runs/toy"
