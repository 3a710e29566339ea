"""Divergence: what a step with a non-finite loss or gradient does.

The weights never take such a step. The trainer measures the global gradient norm of every
step (clipping it when ``train.grad_clip > 0``); if the loss or that norm is NaN or infinite,
the update is skipped: weights and optimizer moments stay as they were, the learning-rate
schedule still advances with the step count. At most ``train.max_bad_steps`` steps of a run
are skipped (default 0); the next one stops the run with a
:class:`~attnlab.lab.train.errors.DivergenceError` that names the step, the value, what the run
directory still holds and what to change. Under DDP the loss and the gradients are
all-reduced before the check, so every rank takes the same decision.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from pathlib import Path

import torch
from torch import Tensor

from attnlab.lab.train.errors import DivergenceError
from attnlab.lab.train.state import TrainState

__all__ = ["gradient_norm", "check_step", "kept_checkpoints"]

logger = logging.getLogger(__name__)


def gradient_norm(parameters: Iterable[Tensor], max_norm: float) -> Tensor:
    """The global L2 norm of the parameters' gradients, clipping them to ``max_norm`` when it
    is > 0 (``torch.nn.utils.clip_grad_norm_``; the norm returned is the one before clipping)."""
    parameters = [p for p in parameters if p.grad is not None]
    if max_norm > 0:
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    return torch.nn.utils.get_total_norm([p.grad for p in parameters])


def check_step(
    loss: float,
    grad_norm: Tensor | float,
    *,
    state: TrainState,
    max_bad_steps: int,
    where: str,
    advice: str,
    kept: dict[str, int],
    log: bool = True,
) -> bool:
    """Whether the step may update the weights; a bad step is counted in ``state.bad_steps``.

    Args:
        loss: the step's global summed loss.
        grad_norm: its global gradient norm (:func:`gradient_norm`).
        state: the run's progress (``bad_steps`` is read and incremented).
        max_bad_steps: bad steps a run may skip before it stops.
        where: the step, for messages (e.g. ``"step 8 (epoch 1.33)"``).
        advice: what to change, for the error (e.g. ``"Lower train.lr (now 0.01)"``).
        kept: checkpoints that remain, ``{path: step}``, for the error.
        log: log a skipped step (rank 0 only).

    Raises:
        DivergenceError: a bad step beyond ``max_bad_steps``.
    """
    grad_norm = float(grad_norm)
    if math.isfinite(loss) and math.isfinite(grad_norm):
        return True
    what = f"loss {loss}" if not math.isfinite(loss) else f"gradient norm {grad_norm}"
    if state.bad_steps >= max_bad_steps:
        skipped = f" after skipping {state.bad_steps}" if max_bad_steps else ""
        saved = " and ".join(f"{path} holds step {step}" for path, step in kept.items())
        raise DivergenceError(
            f"non-finite {what} at {where}: training stopped{skipped}, before the update. "
            + (f"{saved}. " if saved else "")
            + f"{advice}, or let up to N such steps be skipped with train.max_bad_steps=N"
        )
    state.bad_steps += 1
    if log:
        logger.warning(
            "non-finite %s at %s: step skipped, weights unchanged (%d of at most %d)",
            what, where, state.bad_steps, max_bad_steps,
        )  # fmt: skip
    return False


def kept_checkpoints(out_dir: Path, steps: dict[str, int]) -> dict[str, int]:
    """``{out_dir/name: step}`` of the checkpoints in ``steps`` that exist (step >= 0)."""
    return {str(out_dir / n): s for n, s in steps.items() if s >= 0 and (out_dir / n).is_file()}
