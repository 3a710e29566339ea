"""The progress of a run: everything besides weights/optimizer that a resume must restore."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TrainState"]


@dataclass
class TrainState:
    """Counters, running sums, the best dev score so far and the evaluation history.

    Attributes:
        step: optimizer steps taken.
        epoch: epochs completed.
        batch_in_epoch: global batches of epoch ``epoch`` already consumed (a mid-epoch resume
            rebuilds the epoch's order and skips them).
        interval_loss: summed train loss since the last evaluation.
        interval_units: units that ``interval_loss`` sums over.
        interval_time_s: training time (excluding evaluation) since the last evaluation.
        units_seen: train units processed by the whole run.
        train_time_s: time spent in optimizer steps (throughput = ``units_seen / train_time_s``).
        elapsed_s: wall time of the run, over all its resumed segments.
        best_score: best dev score (``None``: not evaluated, or no dev split).
        best_step: step of ``best_score`` (-1: none yet).
        best_epoch: epoch progress (fractional) of ``best_score``.
        best_metrics: all dev metrics at ``best_step``.
        bad_evals: consecutive evaluations without improvement (early stopping).
        stopped_early: patience ran out.
        last_eval_step: step of the latest evaluation (-1: none).
        bad_steps: steps skipped for a non-finite loss or gradient (``train.max_bad_steps``).
        history: one row per evaluation (what ``metrics.csv`` holds).
    """

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    interval_loss: float = 0.0
    interval_units: float = 0.0
    interval_time_s: float = 0.0
    units_seen: float = 0.0
    train_time_s: float = 0.0
    elapsed_s: float = 0.0
    best_score: float | None = None
    best_step: int = -1
    best_epoch: float = 0.0
    best_metrics: dict[str, float] = field(default_factory=dict)
    bad_evals: int = 0
    stopped_early: bool = False
    last_eval_step: int = -1
    bad_steps: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)

    def record_evaluation(
        self,
        row: dict[str, Any],
        metrics: dict[str, float],
        score: float | None,
        *,
        improved: bool,
        patience: int,
        progress: bool | None = None,
    ) -> None:
        """Append ``row`` to the history, reset the interval sums, and update the best score
        and the early-stopping counter (``patience`` 0: never stop; ``progress``, default
        ``improved``: the evaluation resets the counter without being the best)."""
        self.history.append(row)
        self.interval_loss = self.interval_units = self.interval_time_s = 0.0
        self.last_eval_step = self.step
        if improved:
            self.best_score, self.best_step, self.best_epoch = score, self.step, row["epoch"]
            self.best_metrics, self.bad_evals = dict(metrics), 0
        elif progress:
            self.bad_evals = 0
        else:
            self.bad_evals += 1
            self.stopped_early = bool(patience) and self.bad_evals >= patience

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainState:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
