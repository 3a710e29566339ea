"""What a finished run returns: :class:`TrainResult`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

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
    history: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Every field but ``history``: the content of ``metrics.json``."""
        out = dataclasses.asdict(self)
        del out["history"]
        return out
