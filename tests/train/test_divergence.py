"""Divergence: a non-finite loss or gradient never updates the weights, never becomes best.pt."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.lab.train import DivergenceError, RunError, Trainer, load_checkpoint

from .helpers import assert_same_tensors, final_weights, run
from .toy_task import ToyTask, toy_config

# 96 examples in batches of 16: 6 steps per epoch; evaluations and last.pt at steps 6, 12, 18.
CONSTANT = ["--train.schedule=constant"]  # the LR of a step does not depend on max_steps


class PoisonedToy(ToyTask):
    """The toy task with a NaN training loss (``kind="loss"``), or a finite loss whose gradient
    is NaN (``kind="grad"``), at the given (1-based) training steps."""

    def __init__(self, bad_steps, kind: str = "loss") -> None:
        super().__init__()
        self.bad_steps, self.kind, self.calls = set(bad_steps), kind, 0

    def loss(self, model, batch):
        loss, units = super().loss(model, batch)
        if model.training:
            self.calls += 1
            if self.calls in self.bad_steps:
                if self.kind == "loss":
                    loss = loss * math.nan
                else:  # sqrt'(0) = inf times 0: NaN gradient, the loss is unchanged
                    w = model.out.weight
                    loss = loss + (w - w.detach()).abs().sqrt().sum() * 0.0
        return loss, units


def _all_finite(state_dict) -> bool:
    return all(torch.isfinite(t).all() for t in state_dict.values() if t.is_floating_point())


@pytest.mark.parametrize(("kind", "what"), [("loss", "loss nan"), ("grad", "gradient norm nan")])
def test_non_finite_step_stops_the_run_before_the_update(tmp_path, kind, what):
    cfg = toy_config(tmp_path / "bad", *CONSTANT)
    trainer = Trainer(PoisonedToy({8}, kind), cfg, progress=False)
    with pytest.raises(DivergenceError, match=f"non-finite {what} at step 8 .*stopped") as err:
        trainer.fit()
    assert isinstance(err.value, RunError)  # the CLI prints it as one line
    for name in ("best.pt", "last.pt"):
        assert f"{tmp_path / 'bad' / name} holds step 6" in str(err.value)
    assert "train.lr" in str(err.value) and "train.max_bad_steps" in str(err.value)
    # The weights are those after step 7: the bad step changed nothing.
    run(tmp_path / "seven", *CONSTANT, "--train.max_steps=7")
    assert_same_tensors(trainer.model.state_dict(), final_weights(tmp_path / "seven"))
    for name in ("best.pt", "last.pt"):
        assert _all_finite(load_checkpoint(tmp_path / "bad" / name)["model"]), name


def test_bad_steps_are_skipped_up_to_max_bad_steps(tmp_path):
    result = run(tmp_path / "ok", "--train.max_bad_steps=2", task=PoisonedToy({3, 5}))
    assert result.steps == 18 and all(math.isfinite(r["train_loss"]) for r in result.history)
    last = load_checkpoint(tmp_path / "ok" / "last.pt")
    assert last["state"]["bad_steps"] == 2 and _all_finite(last["model"])
    with pytest.raises(DivergenceError, match="loss nan at step 5 .*after skipping 1"):
        run(tmp_path / "stop", "--train.max_bad_steps=1", task=PoisonedToy({3, 5}))


def test_a_huge_learning_rate_stops_with_finite_checkpoints(tmp_path):
    with pytest.raises(DivergenceError, match="non-finite .* Lower train.lr \\(now 1000\\)"):
        run(tmp_path, "--train.lr=1e3", "--train.grad_clip=0")
    for path in tmp_path.glob("*.pt"):
        assert _all_finite(load_checkpoint(path)["model"]), path.name


class NaNDevToy(ToyTask):
    """A sloppy task: its last dev score is NaN, and its is_better accepts anything."""

    def __init__(self) -> None:
        super().__init__()
        self.evaluations = 0

    def evaluate(self, model, batches):
        metrics = super().evaluate(model, batches)
        self.evaluations += 1
        return {**metrics, "accuracy": math.nan} if self.evaluations == 3 else metrics

    def is_better(self, score, best):
        return True


def test_a_nan_dev_score_never_becomes_best(tmp_path):
    result = run(tmp_path, task=NaNDevToy())
    assert [row["step"] for row in result.history] == [6, 12, 18]
    assert result.best_step == 12 and math.isfinite(result.best_score)
    assert load_checkpoint(tmp_path / "best.pt")["state"]["best_step"] == 12
