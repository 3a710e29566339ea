"""The pieces of one optimizer step that do not depend on the trainer's bookkeeping.

:meth:`~attnlab.lab.train.trainer.Trainer._step` runs :func:`backward_micros` on this rank's
micro-batches, all-reduces the summed loss and units, scales the gradients by
``world_size / U`` (:func:`scale_gradients`), checks them (:mod:`~attnlab.lab.train.divergence`),
calls :func:`apply_update` and counts the step (:func:`record_step`).
"""

from __future__ import annotations

import contextlib
import warnings

import torch

from attnlab.lab.tasks import Task
from attnlab.lab.train.distributed import DistEnv
from attnlab.lab.train.feed import Feed, Micro
from attnlab.lab.train.state import TrainState

__all__ = ["backward_micros", "scale_gradients", "apply_update", "record_step"]


def backward_micros(
    task: Task,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    micros: list[Micro],
    feed: Feed,
    env: DistEnv,
) -> tuple[float, float]:
    """Backpropagate the *summed* loss of each micro-batch; return ``(loss_sum, units)``.

    ``model`` is the training model (DDP wrapper and/or compiled): under DDP gradients are
    all-reduced once per step, on the last micro-batch. A dummy micro-batch (a rank with fewer
    real ones) contributes a zero loss and zero units but still runs, so that every rank takes
    part in the same collectives.

    ``model`` is put in train mode and ``optimizer``'s gradients are cleared first.
    """
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss_local = torch.zeros((), dtype=torch.float64)
    units_local = 0.0
    for m, (batch, is_dummy) in enumerate(micros):
        batch = feed.to_device(batch)
        last = m == len(micros) - 1
        sync = contextlib.nullcontext()
        if env.distributed and not last:
            sync = model.no_sync()  # all-reduce gradients once per step
        with sync:
            with feed.autocast():
                loss_sum, units = task.loss(model, batch)
            loss_sum = loss_sum.float()
            if is_dummy:
                loss_sum, units = loss_sum * 0.0, 0
            loss_sum.backward()
        loss_local += loss_sum.detach().double().cpu()
        units_local += float(units)
    return loss_local.item(), units_local


def apply_update(
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    *,
    finite: bool,
) -> None:
    """Step the optimizer and the schedule, or (``finite`` False) drop the gradients.

    A skipped step still advances the schedule: it follows the step count.
    """
    if finite:
        optimizer.step()
        scheduler.step()
    else:
        optimizer.zero_grad(set_to_none=True)
        with warnings.catch_warnings():  # "lr_scheduler.step() before optimizer.step()"
            warnings.simplefilter("ignore", UserWarning)
            scheduler.step()


def scale_gradients(model: torch.nn.Module, *, world_size: int, units: float) -> None:
    """Multiply every gradient by ``world_size / units``.

    DDP averaged the summed-loss gradients over ranks: this undoes the ``1 / world_size`` and
    divides by the global unit count ``U``, so the update is that of the per-unit mean loss.
    """
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    torch._foreach_mul_(grads, world_size / units)


def record_step(
    state: TrainState, *, seconds: float, loss_sum: float, units: float, finite: bool
) -> None:
    """Count a finished step in ``state``; a skipped (non-finite) step adds no loss or units."""
    s = state
    s.step += 1
    s.batch_in_epoch += 1
    s.interval_time_s += seconds
    s.train_time_s += seconds
    if finite:
        s.interval_loss += loss_sum
        s.interval_units += units
        s.units_seen += units
