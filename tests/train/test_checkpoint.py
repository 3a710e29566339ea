"""Atomic checkpoints, exact resume, and loading for inference."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.train import (
    RunError,
    average_checkpoints,
    load_checkpoint,
    load_for_inference,
    save_checkpoint,
)
from attnlab.lab.train.checkpoint import config_changes, find_checkpoint
from attnlab.lab.train.precision import choose_precision

from .helpers import Crash, CrashingToy, assert_same_tensors, run, strip_timing


def test_crash_during_write_leaves_the_old_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "last.pt"
    save_checkpoint(path, {"model": {"w": torch.ones(3)}})

    def broken_save(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, {"model": {"w": torch.zeros(3)}})
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.ones(3))
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]  # no temporary file left


def test_checkpoint_round_trip_and_version(tmp_path):
    save_checkpoint(tmp_path / "a.pt", {"x": [1, 2.5, "s", None], "t": torch.arange(3)})
    ckpt = load_checkpoint(tmp_path / "a.pt")
    assert ckpt["x"] == [1, 2.5, "s", None] and torch.equal(ckpt["t"], torch.arange(3))
    torch.save({"x": 1}, tmp_path / "b.pt")
    with pytest.raises(ValueError, match="not an attnlab checkpoint"):
        load_checkpoint(tmp_path / "b.pt")
    with pytest.raises(FileNotFoundError):
        find_checkpoint(tmp_path / "missing")


# Toy run: 96 examples, batch 16 -> 6 steps per epoch, 3 epochs = 18 steps. ``last.pt`` is
# written every 4 steps and at epoch ends (6, 12, 18); with evaluations every 5 steps also at
# 5, 10, 15 (``checkpoint_interval=0``: at each, however recent the last one). The crash
# discards the step it happens in and everything after the last save.
RESUME_CASES = {
    # crash in step 7 -> resume from the epoch-end checkpoint of step 6
    "epoch_boundary": (["--train.checkpoint_every=4"], 7, (6, 1, 0)),
    # crash in step 11 -> resume from step 8, batch 2 of epoch 2 (mid-epoch)
    "mid_epoch": (["--train.checkpoint_every=4"], 11, (8, 1, 2)),
    # the same with length bucketing (the batches of an epoch are shuffled after sorting)
    "mid_epoch_bucketed": (["--train.checkpoint_every=4", "--train.bucket=2"], 11, (8, 1, 2)),
    # mid-epoch evaluations, patience, token batching, 2 accumulation micro-batches per step
    "eval_every_accum_tokens": (
        ["--train.eval_every=5", "--train.patience=3", "--train.grad_accum=2",
         "--train.batch_tokens=100", "--train.checkpoint_every=0"],
        2 * 13,  # 2 loss calls per step: crash in step 13 -> resume from step 10
        (10, None, None),
    ),
    # an interval between evaluation / epoch-end checkpoints, here an hour: written at the
    # first epoch end (step 6), and at the second (12) only if its evaluation found a new best
    # (best.pt is never ahead of last.pt). With lr 0 (the dev score stays put) it does not -> a
    # crash in step 13 resumes from step 6 (weights trivially equal; the optimizer's moments,
    # RNG and counters not); trained, it does -> from step 12. Replaying learnt steps from an
    # older last.pt is what the other cases test.
    "interval": (["--train.checkpoint_interval=1h", "--train.lr=0"], 13, (6, 1, 0)),
    "interval_new_best": (["--train.checkpoint_interval=1h"], 13, (12, 2, 0)),
    # every 4 steps, and at the evaluation of step 5 (its first: a new best) though 5 is not a
    # multiple of 4 -> a crash in step 7 resumes from step 5
    "every_and_new_best": (["--train.checkpoint_every=4", "--train.eval_every=5",
                            "--train.checkpoint_interval=1h"], 7, (5, 0, 5)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(RESUME_CASES))
def test_resume_equals_uninterrupted_bitwise(tmp_path, case):
    overrides, crash_at, (resume_step, resume_epoch, resume_batch) = RESUME_CASES[case]
    if not any(o.startswith("--train.checkpoint_interval") for o in overrides):
        overrides = [*overrides, "--train.checkpoint_interval=0"]
    overrides = [*overrides, "--model.encoder.dropout=0.3"]  # dropout: RNG must be restored

    full = run(tmp_path / "full", *overrides)

    with pytest.raises(Crash):
        run(tmp_path / "cut", *overrides, task=CrashingToy(crash_at))
    state = load_checkpoint(tmp_path / "cut" / "last.pt")["state"]
    assert state["step"] == resume_step
    if resume_epoch is not None:
        assert (state["epoch"], state["batch_in_epoch"]) == (resume_epoch, resume_batch)
    resumed = run(tmp_path / "cut", *overrides, resume=True)

    # Final weights, optimizer, scheduler, RNG states and counters: bitwise equal.
    a = load_checkpoint(tmp_path / "full" / "last.pt")
    b = load_checkpoint(tmp_path / "cut" / "last.pt")
    for key in ("model", "optimizer", "scheduler", "rng", "task"):
        assert_same_tensors(a[key], b[key], key)
    assert_same_tensors(
        load_checkpoint(tmp_path / "full" / "best.pt")["model"],
        load_checkpoint(tmp_path / "cut" / "best.pt")["model"],
        "best.model",
    )
    # Same evaluations, same best, same test metrics.
    assert strip_timing(resumed.history) == strip_timing(full.history)
    assert (resumed.best_score, resumed.best_step, resumed.steps, resumed.epochs) == (
        full.best_score, full.best_step, full.steps, full.epochs,
    )  # fmt: skip
    assert resumed.test == full.test and resumed.best_dev == full.best_dev
    # metrics.csv was regenerated from the checkpointed history: no duplicated rows.
    rows = (tmp_path / "cut" / "metrics.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + len(full.history)


def test_resume_of_a_finished_run_changes_nothing(tmp_path):
    first = run(tmp_path, "--train.epochs=2")
    before = load_checkpoint(tmp_path / "last.pt")
    again = run(tmp_path, "--train.epochs=2", resume=True)
    assert again.steps == first.steps and again.test == first.test
    assert_same_tensors(before["model"], load_checkpoint(tmp_path / "last.pt")["model"])


def test_resume_without_checkpoint_is_an_error(tmp_path):
    # It used to start from scratch (steps == 6): a typo in out_dir restarted a long run under
    # a new name. Now both a missing directory and one without last.pt are errors naming it.
    with pytest.raises(RunError, match=f"resume: {tmp_path / 'typo'} does not exist"):
        run(tmp_path / "typo", "--train.epochs=1", resume=True)
    assert not (tmp_path / "typo").exists()  # nothing created under the mistyped name
    with pytest.raises(RunError, match=f"no {tmp_path / 'last.pt'} to continue"):
        run(tmp_path, "--train.epochs=1", resume=True)
    assert list(tmp_path.iterdir()) == []
    assert run(tmp_path, "--train.epochs=1").steps == 6  # without --resume: a new run


def run_precision(cfg):
    """The autocast the run evaluated under (bf16 where ``precision=auto`` chose it)."""
    bf16 = choose_precision(cfg.train.precision, torch.device("cpu")).bf16
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)


def test_load_for_inference(tmp_path):
    result = run(tmp_path, "--train.epochs=2", mode="tag")
    task, model, cfg = load_for_inference(tmp_path, setup=True)
    assert not model.training and cfg.task == "toy" and cfg.task_options.mode == "tag"
    assert task.tokens is not None and task.unit == "tok"
    test = task.splits()["test"]
    with torch.no_grad(), run_precision(cfg):
        metrics = task.evaluate(model, [task.collate(test[i : i + 16]) for i in range(0, 32, 16)])
    assert metrics == pytest.approx(result.test)
    # Without setup: vocabularies from the checkpoint suffice to predict.
    task2, model2, _ = load_for_inference(tmp_path / "best.pt")
    batch = task2.collate([{"tokens": list("abz"), "target": ["V", "C", "C"]}])  # z: unknown
    assert model2(batch["ids"], batch["lengths"]).shape == (1, 3, 2)


def test_average_of_checkpoints_is_the_mean_of_their_weights(tmp_path):
    run(tmp_path / "e1", "--train.epochs=1")
    run(tmp_path / "e2", "--train.epochs=2")
    a = load_checkpoint(tmp_path / "e1" / "last.pt")["model"]
    b = load_checkpoint(tmp_path / "e2" / "last.pt")["model"]
    # a snapshot averaged with itself is itself, to the bit
    same = average_checkpoints([tmp_path / "e1", tmp_path / "e1" / "best.pt"])
    assert_same_tensors(same["model"], a)
    # a listed twice weighs twice: (2a + b) / 3, in each tensor's own dtype
    mean = average_checkpoints([tmp_path / "e1" / "last.pt", tmp_path / "e2" / "last.pt",
                                tmp_path / "e1" / "last.pt"])["model"]  # fmt: skip
    for key in a:
        expected = (2 * a[key].double() + b[key].double()) / 3
        assert mean[key].dtype == a[key].dtype
        torch.testing.assert_close(mean[key].double(), expected, rtol=1e-7, atol=0)
    assert not torch.equal(a["hidden.weight"], b["hidden.weight"])  # the test averages something


def test_an_averaged_checkpoint_loads_for_inference_and_records_its_members(tmp_path):
    result = run(tmp_path / "run", "--train.epochs=2", mode="tag")
    save_checkpoint(tmp_path / "avg.pt", average_checkpoints([tmp_path / "run"] * 2))
    ckpt = load_checkpoint(tmp_path / "avg.pt")
    assert [m["step"] for m in ckpt["averaged"]] == [result.best_step] * 2
    assert "optimizer" not in ckpt  # for evaluation, not for resuming
    task, model, cfg = load_for_inference(tmp_path / "avg.pt", setup=True)
    test = task.splits()["test"]
    with torch.no_grad(), run_precision(cfg):
        metrics = task.evaluate(model, [task.collate(test[i : i + 16]) for i in range(0, 32, 16)])
    assert metrics == pytest.approx(result.test)


def test_averaging_refuses_checkpoints_of_different_models(tmp_path):
    run(tmp_path / "a", "--train.epochs=1")
    run(tmp_path / "wide", "--train.epochs=1", "--model.dim=24")
    with pytest.raises(ValueError, match="at least two, got 1"):
        average_checkpoints([tmp_path / "a"])
    with pytest.raises(ValueError, match=r"differ in model config \(model.dim\)"):
        average_checkpoints([tmp_path / "a", tmp_path / "wide"])
    ckpt = load_checkpoint(tmp_path / "a" / "best.pt")
    ckpt["config"]["task"] = "pos"
    save_checkpoint(tmp_path / "other_task.pt", ckpt)
    with pytest.raises(ValueError, match=r"other_task.pt and .* differ in task \('toy' vs 'pos'\)"):
        average_checkpoints([tmp_path / "a", tmp_path / "other_task.pt"])
    ckpt = load_checkpoint(tmp_path / "a" / "best.pt")
    ckpt["model"]["counter"] = torch.tensor(3)
    save_checkpoint(tmp_path / "count3.pt", ckpt)
    ckpt["model"]["counter"] = torch.tensor(4)
    save_checkpoint(tmp_path / "count4.pt", ckpt)
    with pytest.raises(ValueError, match="integer tensor 'counter'"):
        average_checkpoints([tmp_path / "count3.pt", tmp_path / "count4.pt"])


def test_keep_epochs_keeps_the_last_epochs_weights_to_average(tmp_path):
    run(tmp_path, "--train.epochs=3", "--train.keep_epochs=2")
    assert sorted(p.name for p in tmp_path.glob("epoch-*.pt")) == ["epoch-002.pt", "epoch-003.pt"]
    last, third = load_checkpoint(tmp_path / "last.pt"), load_checkpoint(tmp_path / "epoch-003.pt")
    assert_same_tensors(third["model"], last["model"])
    assert third["state"]["step"] == 18 and "optimizer" not in third
    mean = average_checkpoints(sorted(tmp_path.glob("epoch-*.pt")))
    assert [m["step"] for m in mean["averaged"]] == [12, 18]
    run(tmp_path / "none", "--train.epochs=2")  # the default keeps none
    assert not list((tmp_path / "none").glob("epoch-*.pt"))


def test_config_changes_name_what_alters_training_and_skip_what_does_not():
    old = {"out_dir": "a", "model": {"dim": 8},
           "train": {"lr": 1e-3, "log_every": 10, "checkpoint_every": 0, "keep_epochs": 0}}  # fmt: skip
    bookkeeping = {"out_dir": "b", "model": {"dim": 8},
                   "train": {"lr": 1e-3, "log_every": 0, "checkpoint_every": 50, "keep_epochs": 5}}  # fmt: skip
    assert config_changes(old, bookkeeping) == []
    changed = {**bookkeeping, "model": {"dim": 16}, "train": {**bookkeeping["train"], "lr": 2e-3}}
    assert config_changes(old, changed) == ["model.dim", "train.lr"]
