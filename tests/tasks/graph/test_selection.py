"""Model selection on dev (``task_options.select``): GAT's rule and the others on a hand-made
history, and the trainer following the task's rule end to end (karate)."""

from __future__ import annotations

import csv
import json

import pytest

from attnlab.lab.cli import main
from attnlab.lab.tasks.graph import GraphOptions
from attnlab.lab.tasks.graph.selection import judge, select_epoch

# (dev accuracy, dev loss) per epoch
HISTORY = [
    (0.50, 1.00),  # 0 first: best under every rule
    (0.60, 0.90),  # 1 both better: best under every rule
    (0.70, 0.95),  # 2 accuracy up, loss up: acc+loss progress, not best
    (0.70, 0.85),  # 3 accuracy ties its top, loss its lowest: acc+loss best
    (0.65, 0.80),  # 4 loss only: acc+loss progress; the loss rule's best
    (0.72, 0.84),  # 5 accuracy only: acc+loss progress; the accuracy rule's best
    (0.60, 1.00),  # 6 neither
    (0.60, 1.10),  # 7 neither: patience 2 runs out under acc+loss
    (0.90, 0.10),  # 8 never seen with patience 2
]


@pytest.mark.parametrize(
    ("rule", "best", "stopped"),
    [("acc+loss", 3, 7), ("acc", 5, 7), ("loss", 4, 6)],
)
def test_rules_pick_the_right_epoch(rule, best, stopped):
    assert select_epoch(rule, HISTORY, patience=2) == (best, stopped)


def test_acc_and_loss_without_patience_reaches_the_end():
    assert select_epoch("acc+loss", HISTORY) == (8, 8)


def test_gat_rule_verdicts():
    earlier = HISTORY[:2]
    assert judge("acc+loss", 0.70, 0.95, earlier) == (False, True)
    assert judge("acc+loss", 0.60, 0.90, earlier) == (True, True)  # ties count
    assert judge("acc+loss", 0.55, 0.95, earlier) == (False, False)
    assert judge("acc+loss", 0.9, float("nan"), earlier) == (False, False)
    assert judge("acc", 0.60, 0.89, earlier) == (True, True)  # tie on accuracy, lower loss
    assert judge("acc+loss", 0.1, 9.0, []) == (True, True)


def test_unknown_rule_is_a_clear_error():
    with pytest.raises(ValueError, match="task_options.select: unknown rule 'best'; valid choices: auto, acc, loss, acc\\+loss"):  # fmt: skip
        GraphOptions(select="best")
    with pytest.raises(ValueError, match="valid choices"):
        judge("best", 0.5, 1.0, [])


def test_trainer_follows_the_task_rule(tmp_path):
    """``attnlab train karate --task_options.select=acc+loss``: best.pt is the evaluation that
    replaying metrics.csv under GAT's rule selects, and training stops where patience runs out
    under that rule."""
    out = tmp_path / "run"
    args = ["train", "karate", "--train.epochs=60", "--train.patience=10", "--train.device=cpu",
            "--train.log_every=0", "--train.lr=0.05", "--model.hidden=4", "--model.heads=2",
            "--model.dropout=0.2", "--model.variant=pyg",  # the trajectory this test was built on
            "--task_options.select=acc+loss", f"--out_dir={out}"]  # fmt: skip
    assert main(args) == 0
    with (out / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    history = [(float(r["dev_accuracy"]), float(r["dev_loss"])) for r in rows]
    best, stopped = select_epoch("acc+loss", history, patience=10)
    assert stopped == len(history) - 1
    summary = json.loads((out / "metrics.json").read_text())
    assert int(rows[best]["step"]) == summary["best_step"]
    assert float(rows[best]["dev_loss"]) == pytest.approx(summary["best_dev"]["loss"], rel=1e-5)
    # the run exercised the rule: evaluations reset patience without being the best, and it
    # went on past where the accuracy rule's patience would have stopped it
    verdicts = [judge("acc+loss", a, l, history[:i]) for i, (a, l) in enumerate(history)]
    assert any(v.progress and not v.best for v in verdicts)
    assert select_epoch("acc", history, patience=10).stopped < stopped
