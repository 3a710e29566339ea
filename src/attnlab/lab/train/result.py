"""What a finished run returns: :class:`TrainResult`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from attnlab.lab.train.budget import format_duration

if TYPE_CHECKING:
    from attnlab.lab.tasks import Task
    from attnlab.lab.train.state import TrainState

__all__ = ["TrainResult"]


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns (and ``metrics.json`` holds, less ``history``).

    Attributes:
        out_dir: the run directory.
        task: the task's registry name.
        metric_name: the model-selection metric; ``higher_is_better`` its direction.
        best_score: best dev ``metric_name`` (None without a dev split).
        best_step: optimizer step of the best dev score.
        best_dev: all dev metrics at ``best_step``.
        test: test metrics of the best model (empty without a test split).
        steps: optimizer steps taken; ``epochs``: epochs completed.
        stopped_early: whether patience ran out.
        time_up: whether the run stopped at its time budget (``train.max_time``).
        parameters: number of model parameters.
        unit: what the task's loss counts; ``units_per_s``: training throughput.
        train_time_s: time spent in optimizer steps; ``wall_time_s``: whole run (all segments).
        world_size: number of processes that trained it.
        history: one row per evaluation (``metrics.csv``).
    """

    out_dir: str
    task: str
    metric_name: str
    higher_is_better: bool
    best_score: float | None
    best_step: int
    best_dev: dict[str, float]
    test: dict[str, float]
    steps: int
    epochs: int
    stopped_early: bool
    parameters: int
    unit: str
    units_per_s: float
    train_time_s: float
    wall_time_s: float
    world_size: int = 1
    time_up: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of_run(
        cls,
        state: TrainState,
        task: Task,
        *,
        test: dict[str, float],
        out_dir: str,
        parameters: int,
        wall_time_s: float,
        world_size: int,
        time_up: bool = False,
    ) -> TrainResult:
        """The result of a run that ended with ``state``, ``test`` its best model's metrics."""
        s = state
        return cls(
            out_dir=out_dir, task=task.name, metric_name=task.metric_name,
            higher_is_better=task.higher_is_better, best_score=s.best_score,
            best_step=s.best_step, best_dev=dict(s.best_metrics), test=test, steps=s.step,
            epochs=s.epoch, stopped_early=s.stopped_early, parameters=parameters,
            unit=task.unit, units_per_s=s.units_seen / s.train_time_s if s.train_time_s else 0.0,
            train_time_s=s.train_time_s, wall_time_s=wall_time_s, world_size=world_size,
            history=list(s.history), time_up=time_up,
        )  # fmt: skip

    def summary_line(self) -> str:
        """The run in one rounded line: ``done: pos  dev accuracy 0.9412  test accuracy 0.9398
        12.3 min  runs/pos`` (and why it stopped before its epochs, if it did)."""
        parts = [f"done: {self.task}"]
        if self.best_score is not None:
            parts.append(f"dev {self.metric_name} {self.best_score:.4f}")
        if self.metric_name in self.test:
            parts.append(f"test {self.metric_name} {self.test[self.metric_name]:.4f}")
        parts.append(format_duration(self.wall_time_s))
        if self.stopped_early:
            parts.append(f"early stop at step {self.steps}")
        if self.time_up:
            parts.append(f"time budget spent at step {self.steps}")
        return "  ".join([*parts, self.out_dir])

    def summary(self) -> dict[str, Any]:
        """Every field but ``history``: the content of ``metrics.json``."""
        out = dataclasses.asdict(self)
        del out["history"]
        return out
