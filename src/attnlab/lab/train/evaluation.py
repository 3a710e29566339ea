"""Evaluation for the trainer: the eval loop, the dev history row and the best-model rule.

:class:`~attnlab.lab.train.trainer.Trainer` evaluates on dev every ``eval_every`` steps (or each
epoch) and on test once, with the best checkpoint. This module holds what those evaluations
compute; the trainer decides when they run, broadcasts the metrics and saves ``best.pt``.

The best-model rule: without a dev split the latest model counts as the best one; a
non-finite dev score never does, whatever the task's ``is_better`` says.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import torch

from attnlab.lab.tasks import Task
from attnlab.lab.train.batching import eval_order, make_batches
from attnlab.lab.train.feed import Feed
from attnlab.lab.train.state import TrainState

__all__ = ["evaluate_split", "dev_row", "judge_score", "log_evaluation", "eval_log_interval"]

logger = logging.getLogger(__name__.rpartition(".")[0] + ".trainer")  # the trainer's log, as before


def evaluate_split(
    task: Task, model: torch.nn.Module, feed: Feed, examples: list, *, batch_size: int
) -> dict[str, float]:
    """``task.evaluate`` of ``model`` on ``examples`` (no grad, the run's autocast), in batches
    of ``batch_size`` examples of similar lengths (:func:`~attnlab.lab.train.batching.
    eval_order`: less padding; ``attnlab eval`` batches alike, so that it gives the run's
    numbers).

    The model is put in eval mode and back in train mode afterwards, even on error.
    Returns ``{}`` for no examples; metric values as Python floats.
    """
    if not examples:
        return {}
    chunks = make_batches(eval_order(task, examples), batch_size=batch_size)
    loader = feed.loader(examples, batch_sampler=chunks)
    model.eval()
    try:
        with torch.no_grad(), feed.autocast():
            metrics = task.evaluate(model, (feed.to_device(b) for b in loader))
    finally:
        model.train()
    return {k: float(v) for k, v in metrics.items()}


def dev_row(
    state: TrainState, metrics: dict[str, float], *, epoch: float, lr: float, elapsed_s: float
) -> dict[str, Any]:
    """The ``metrics.csv`` row of a dev evaluation: train loss and speed since the last one."""
    s = state
    return {
        "step": s.step,
        "epoch": round(epoch, 4),
        "train_loss": s.interval_loss / s.interval_units if s.interval_units else math.nan,
        **{f"dev_{k}": v for k, v in metrics.items()},
        "lr": lr,
        "units_per_s": s.interval_units / s.interval_time_s if s.interval_time_s else 0.0,
        "elapsed_s": elapsed_s,
    }


def judge_score(
    task: Task, metrics: dict[str, float], state: TrainState, *, log: bool
) -> tuple[float | None, bool, bool]:
    """``(score, improved, progress)`` of a dev evaluation under the best-model rule (module
    docstring) or the task's own :meth:`~attnlab.lab.tasks.Task.select` given the earlier
    evaluations (``state.history``); ``progress`` resets the patience counter.

    ``score`` is ``None`` without dev metrics; ``log`` warns about a non-finite score.
    """
    score = task.score(metrics) if metrics else None
    if score is not None and not math.isfinite(score):
        if log:
            logger.warning("dev %s is %s: not a candidate for best.pt", task.metric_name, score)
        return score, False, False
    verdict = task.select(metrics, state.history) if metrics else None
    if verdict is not None:
        return score, bool(verdict[0]), bool(verdict[0] or verdict[1])
    improved = score is None or task.is_better(score, state.best_score)
    return score, improved, improved


#: evaluations a run logs at INFO, about (the others at DEBUG, shown with -v), besides each
#: new best and the one that stops the run early
LOGGED_EVALUATIONS = 20


def eval_log_interval(total_steps: int, eval_every: int, steps_per_epoch: int) -> int:
    """Log every this many dev evaluations, so that a run logs about
    :data:`LOGGED_EVALUATIONS` of them whatever its length (1: every one)."""
    evaluations = total_steps / max(1, eval_every or steps_per_epoch)
    return max(1, math.ceil(evaluations / LOGGED_EVALUATIONS))


def log_evaluation(
    task: Task,
    state: TrainState,
    row: dict[str, Any],
    metrics: dict[str, float],
    *,
    improved: bool,
    patience: int,
    every: int = 1,
) -> None:
    """Log a recorded dev evaluation (and early stopping, if it triggered): at INFO when it is
    a new best, stops the run, or is one of every ``every`` evaluations; at DEBUG otherwise.

    The note says ``(best)``, or ``(no improvement k/patience)`` while early stopping counts
    (``patience`` > 0 and ``k`` > 0), or nothing."""
    s = state
    if improved:
        note = " (best)"
    elif patience and s.bad_evals:
        note = f" (no improvement {s.bad_evals}/{patience})"
    else:
        note = ""
    loud = improved or s.stopped_early or len(s.history) % max(1, every) == 0
    logger.log(
        logging.INFO if loud else logging.DEBUG,
        "eval step %d epoch %.2f: train_loss %.4f %s%s",
        s.step, row["epoch"], row["train_loss"],
        " ".join(f"dev_{k} {v:.4f}" for k, v in metrics.items()), note,
    )  # fmt: skip
    if s.stopped_early:
        logger.info("early stopping: best %s at step %d", task.metric_name, s.best_step)
