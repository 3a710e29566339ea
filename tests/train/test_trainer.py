"""The trainer on the toy task: it learns, stops early, logs, and its options run."""

from __future__ import annotations

import json
import math

import pytest
import torch

from attnlab.lab.train import RunConfig, Trainer
from attnlab.lab.train.metrics_log import read_metrics_csv

from .helpers import final_weights, run
from .toy_task import ToyTask, toy_config


def test_loss_decreases_and_outputs_are_written(tmp_path):
    result = run(tmp_path, "--train.epochs=4")
    losses = [row["train_loss"] for row in result.history]
    assert len(losses) == 4 and losses[-1] < losses[0]
    assert result.best_score > 0.8 and result.best_dev["accuracy"] == result.best_score
    assert set(result.test) == {"accuracy", "loss"}
    assert (result.steps, result.epochs, result.stopped_early) == (24, 4, False)
    model = Trainer(ToyTask(), toy_config(tmp_path / "p"), progress=False).model
    assert result.parameters == sum(p.numel() for p in model.parameters())
    assert result.units_per_s > 0 and result.unit == "seq"

    rows = read_metrics_csv(tmp_path / "metrics.csv")
    assert [row["step"] for row in rows] == [6, 12, 18, 24]
    assert list(rows[0]) == [
        "step", "epoch", "train_loss", "dev_accuracy", "dev_loss", "lr", "units_per_s",
        "elapsed_s",
    ]  # fmt: skip
    assert [row["epoch"] for row in rows] == [1, 2, 3, 4]
    summary = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("best_score", "best_dev", "test", "units_per_s", "parameters", "wall_time_s"):
        assert key in summary
    assert summary["test"] == pytest.approx(result.test)
    saved = RunConfig.from_dict(json.loads((tmp_path / "config.json").read_text()))
    assert saved == toy_config(tmp_path, "--train.epochs=4")
    assert {p.name for p in tmp_path.iterdir()} >= {"last.pt", "best.pt"}


def test_early_stopping(tmp_path):
    # lr = 0: the model never changes, so no evaluation after the first one improves.
    result = run(tmp_path, "--train.lr=0", "--train.patience=2", "--train.epochs=10")
    assert result.stopped_early
    assert (len(result.history), result.steps, result.epochs, result.best_step) == (3, 18, 3, 6)


def test_best_checkpoint_is_tested(tmp_path):
    result = run(tmp_path, "--train.epochs=3", "--train.eval_every=2")
    assert [row["step"] for row in result.history] == list(range(2, 19, 2))
    best = max(result.history, key=lambda row: row["dev_accuracy"])  # first of the maxima
    assert result.best_step == best["step"]


def test_max_steps_mid_epoch_ends_with_an_evaluation(tmp_path):
    result = run(tmp_path, "--train.max_steps=8")
    assert result.steps == 8 and [row["step"] for row in result.history] == [6, 8]
    assert result.history[-1]["epoch"] == pytest.approx(1 + 2 / 6, abs=1e-3)


def test_bf16_autocast_runs(tmp_path):
    result = run(tmp_path, "--train.precision=bf16", "--train.epochs=2")
    assert all(math.isfinite(row["train_loss"]) for row in result.history)
    assert result.best_score > 0.5


def test_tagging_counts_tokens(tmp_path):
    result = run(tmp_path, "--train.epochs=2", mode="tag")
    assert result.unit == "tok" and result.best_score > 0.9


@pytest.mark.parametrize("accum", [2, 3])
def test_grad_accumulation_equals_the_big_batch(tmp_path, accum):
    # Loss sums divided by the step's total units: accumulation is exact (float64 model).
    common = ["--model.dtype=float64", "--model.encoder.dropout=0", "--train.epochs=2"]
    run(tmp_path / "one", *common, mode="tag")
    run(tmp_path / "acc", *common, f"--train.grad_accum={accum}", mode="tag")
    a, b = final_weights(tmp_path / "one"), final_weights(tmp_path / "acc")
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-12)


def test_token_batching(tmp_path):
    cfg = toy_config(tmp_path, "--train.batch_tokens=40", "--train.epochs=1")
    trainer = Trainer(ToyTask(), cfg, progress=False)
    train = trainer.splits["train"]
    batches = trainer.feed.epoch_batches(0)
    assert sorted(i for b in batches for i in b) == list(range(len(train)))
    lengths = [len(train[i]["tokens"]) for b in batches for i in b]
    assert all(sum(len(train[i]["tokens"]) for i in b) <= 40 for b in batches)
    assert trainer.steps_per_epoch == len(batches) > len(train) * max(lengths) // 40 // 2
    assert trainer.fit().steps == len(batches)


def test_without_dev_split_the_last_model_is_the_best(tmp_path):
    result = run(tmp_path, "--task_options.n_dev=0", "--train.epochs=2")
    assert result.best_score is None and result.best_step == 12 and result.test


def test_task_by_name_and_mismatch(tmp_path):
    cfg = toy_config(tmp_path, "--train.epochs=1")
    assert Trainer("toy", cfg, progress=False).fit().steps == 6
    other = type("Other", (ToyTask,), {"name": "other"})()
    with pytest.raises(ValueError, match="cfg.task is 'toy'"):
        Trainer(other, cfg, progress=False)


def test_progress_bar_goes_to_stderr(tmp_path, capsys):
    run_cfg = toy_config(tmp_path, "--train.epochs=1", "--train.log_every=2")
    Trainer(ToyTask(), run_cfg, progress=True).fit()
    captured = capsys.readouterr()
    assert captured.out == "" and "6/6" in captured.err and "seq/s" in captured.err
