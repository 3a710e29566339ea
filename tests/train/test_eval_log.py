"""The trainer's log: a long run logs about 20 dev evaluations (each new best, and every Nth),
"(no improvement k/patience)" only while early stopping counts, and one summary line."""

from __future__ import annotations

import logging

from attnlab.lab.train.evaluation import eval_log_interval

from .helpers import run


def test_eval_log_interval():
    assert eval_log_interval(100, 0, 10) == 1  # 10 evaluations: every one
    assert eval_log_interval(1000, 0, 10) == 5  # 100 evaluations: every 5th
    assert eval_log_interval(2000, 0, 1) == 100  # a full-batch graph task's 2,000 epochs


def _eval_lines(messages: list[str]) -> list[str]:
    return [line for line in messages if line.startswith("eval step")]


def test_a_long_run_logs_improvements_and_every_nth_evaluation(tmp_path, caplog):
    # 60 evaluations (one per step): every 3rd is logged, and each new best
    with caplog.at_level(logging.INFO, logger="attnlab"):
        result = run(tmp_path, "--train.epochs=10", "--train.eval_every=1")
    lines = _eval_lines(caplog.messages)
    bests = sum(line.endswith("(best)") for line in lines)
    assert 20 <= len(lines) < 60 and bests >= 1
    assert not any("no improvement" in line for line in lines)  # patience 0: nothing counts
    assert sum(1 for row in result.history) == 60
    assert caplog.messages[-1].startswith("done: toy  dev accuracy")


def test_no_improvement_is_counted_only_with_patience(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="attnlab"):
        run(tmp_path, "--train.lr=0", "--train.patience=2", "--train.epochs=10")
    lines = _eval_lines(caplog.messages)
    assert lines[0].endswith("(best)")
    assert [line.rsplit("(", 1)[1] for line in lines[1:]] == ["no improvement 1/2)",
                                                              "no improvement 2/2)"]  # fmt: skip
