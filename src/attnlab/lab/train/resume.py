"""The trainer's checkpoint bookkeeping: what goes into ``last.pt`` / ``best.pt``, and resuming.

:mod:`~attnlab.lab.train.checkpoint` defines the file format (atomic writes, versioned loads);
this module fills it from a running trainer and restores a run from it, so that a resumed run
continues bit-exactly (same weights, optimizer and schedule state, progress and RNG streams).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from attnlab.lab.train.budget import format_duration, parse_duration
from attnlab.lab.train.checkpoint import (
    LAST,
    config_changes,
    load_checkpoint,
    load_weights,
    save_checkpoint,
)
from attnlab.lab.train.distributed import DistEnv, all_gather_object
from attnlab.lab.train.errors import RunComplete, RunError
from attnlab.lab.train.rng import get_rng_state, set_rng_state
from attnlab.lab.train.rundir import EPOCH_SNAPSHOTS
from attnlab.lab.train.state import TrainState

if TYPE_CHECKING:
    from attnlab.lab.tasks.base import Task
    from attnlab.lab.train.config import RunConfig, TrainConfig

__all__ = [
    "save_training_checkpoint",
    "save_epoch_snapshot",
    "find_resume_checkpoint",
    "restore_training",
    "restore_rng",
    "completed_run",
    "check_not_complete",
    "log_resumed_schedule",
]

logger = logging.getLogger(__name__)


def save_training_checkpoint(
    path: Path,
    *,
    model: nn.Module,
    optimizer: Optimizer,
    scheduler: LambdaLR,
    state: TrainState,
    cfg: RunConfig,
    task: Task,
    env: DistEnv,
) -> None:
    """Write a resumable checkpoint to ``path``.

    Collective: every rank contributes its RNG state; rank 0 alone writes the file.

    Args:
        path: the checkpoint file (``out_dir/last.pt`` or ``out_dir/best.pt``).
        model: the *unwrapped* model (not its DDP wrapper).
        optimizer: the optimizer.
        scheduler: the LR scheduler.
        state: the run's progress.
        cfg: the resolved run configuration.
        task: the task (its ``state_dict`` holds the vocabularies).
        env: this process's place in the run.
    """
    rng = all_gather_object(get_rng_state(), env)
    if not env.is_main:
        return
    save_checkpoint(
        path,
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng,
            "state": state.to_dict(),
            "config": cfg.to_dict(),
            "task": task.state_dict(),
            "world_size": env.world_size,
        },
    )


def save_epoch_snapshot(
    out_dir: Path, *, model: nn.Module, state: TrainState, cfg: RunConfig, task: Task, keep: int
) -> Path:
    """Write ``out_dir/epoch-EEE.pt`` (``EEE``: the epochs completed, ``state.epoch``) and
    delete the epoch snapshots older than the last ``keep``; return the file written.

    A snapshot holds the weights, progress, config and task state, but no optimizer state (a
    third of ``last.pt``'s size): it is for evaluation and for averaging the last epochs
    (:func:`~attnlab.lab.train.combine.average_checkpoints`, ``attnlab average``), not for
    resuming. Called on the main rank only.
    """
    path = out_dir / f"epoch-{state.epoch:03d}.pt"
    save_checkpoint(path, {"model": model.state_dict(), "state": state.to_dict(),
                           "config": cfg.to_dict(), "task": task.state_dict()})  # fmt: skip
    for old in out_dir.glob(EPOCH_SNAPSHOTS):
        number = old.stem.removeprefix("epoch-")
        if number.isdigit() and int(number) <= state.epoch - keep:
            old.unlink()
    return path


def find_resume_checkpoint(
    path: Path, cfg: RunConfig, env: DistEnv, *, resume: bool
) -> dict[str, Any] | None:
    """The checkpoint to resume from, or ``None`` to start from scratch (``resume`` False).

    Warns (on rank 0) when the checkpoint was written with another config or another number of
    ranks (the run then is not an exact continuation). Whether the run directory may be
    started afresh is :func:`~attnlab.lab.train.rundir.open_run_dir`'s decision.

    Args:
        path: the run's ``last.pt``.
        cfg: the current run configuration.
        env: this process's place in the run.
        resume: whether to resume at all.

    Raises:
        RunError: ``resume`` but ``path`` does not exist (a typo in ``out_dir`` must not
            restart a long run from scratch under a new name).
    """
    if not resume:
        return None
    if not path.is_file():
        raise RunError(
            f"resume: no {path} to continue; check --out_dir, or start a new run without --resume"
        )
    ckpt = load_checkpoint(path, map_location="cpu")
    changed = config_changes(ckpt["config"], cfg.to_dict())
    if changed and env.is_main:
        logger.warning("resuming with a changed config (%s): not an exact resume", changed)
    if ckpt.get("world_size") != env.world_size and env.is_main:
        logger.warning(
            "resuming a %s-rank checkpoint on %d ranks: data shards and RNG streams differ",
            ckpt.get("world_size"), env.world_size,
        )  # fmt: skip
    if env.is_main:
        logger.info("resuming from %s at step %d", path, ckpt["state"]["step"])
    return ckpt


def restore_training(
    ckpt: dict[str, Any], model: nn.Module, optimizer: Optimizer, scheduler: LambdaLR
) -> TrainState:
    """Load the weights, optimizer and schedule state of ``ckpt``; return its progress.

    Raises:
        CheckpointError: the weights do not fit ``model`` (:func:`~.checkpoint.load_weights`).
    """
    load_weights(model, ckpt, "resume: the run's last.pt")
    optimizer.load_state_dict(ckpt["optimizer"])
    sched = dict(ckpt["scheduler"])
    # The schedule's shape (total steps, warm-up) comes from the current config.
    sched["lr_lambdas"] = [None] * len(sched.get("lr_lambdas", []))
    scheduler.load_state_dict(sched)
    return TrainState.from_dict(ckpt["state"])


def restore_rng(states: list[dict[str, Any]], rank: int) -> None:
    """Restore this rank's RNG state from a checkpoint's per-rank list (rank 0's if the
    checkpoint had fewer ranks)."""
    set_rng_state(states[rank] if rank < len(states) else states[0])


def completed_run(state: dict[str, Any], tc: TrainConfig, out_dir: Path) -> str | None:
    """Why the run whose ``last.pt`` holds ``state`` has nothing left to train under the
    settings ``tc`` (its final test written, ``metrics.json``), or None when it has."""
    if not (Path(out_dir) / "metrics.json").is_file():
        return None  # stopped before its final test: resuming finishes it
    s = TrainState.from_dict(state)
    budget = tc.max_time_s
    if s.stopped_early:
        return f"stopped early at step {s.step}, patience {tc.patience}"
    if tc.max_steps and s.step >= tc.max_steps:
        return f"train.max_steps={tc.max_steps} reached; raise it to continue"
    if s.epoch >= tc.epochs:
        return f"train.epochs={tc.epochs} reached; raise it to continue"
    if budget and s.elapsed_s >= budget:
        return (f"{format_duration(s.elapsed_s)} of train.max_time={tc.max_time} spent; raise "
                "it to continue")  # fmt: skip
    return None


def check_not_complete(cfg: RunConfig) -> None:
    """Before ``--resume``: raise :class:`RunComplete` if the run in ``cfg.out_dir`` has nothing
    left to train under ``cfg.train`` (:func:`completed_run`). What ``attnlab train --resume``
    calls; a :class:`~attnlab.lab.train.Trainer` resuming such a run tests it again.

    Raises:
        RunComplete: naming what completed it and what to raise to continue.
    """
    out_dir = Path(cfg.out_dir)
    if not ((out_dir / "metrics.json").is_file() and (out_dir / LAST).is_file()):
        return
    state = load_checkpoint(out_dir / LAST, map_location="cpu")["state"]
    done = completed_run(state, cfg.train, out_dir)
    if done:
        raise RunComplete(f"{out_dir} is already complete ({done}); nothing to resume")


def log_resumed_schedule(
    ckpt: dict[str, Any], cfg: RunConfig, state: TrainState, *, total_steps: int,
    steps_per_epoch: int,
) -> None:  # fmt: skip
    """Log where a resumed run goes: its steps (and the schedule's length, when the run's
    ``epochs`` or ``max_steps`` changed since the checkpoint) and the time budget left."""
    tc = cfg.train
    old = ckpt["config"].get("train", {})
    epochs, max_steps = old.get("epochs", tc.epochs), old.get("max_steps", tc.max_steps)
    before = min(epochs * steps_per_epoch, max_steps) if max_steps else epochs * steps_per_epoch
    if before != total_steps:
        logger.info(
            "resuming at step %d with a schedule of another length: %d steps (train.epochs=%d, "
            "train.max_steps=%d), was %d; the %s learning-rate schedule is stretched to the new "
            "length (warm-up as configured)", state.step, total_steps, tc.epochs, tc.max_steps,
            before, tc.schedule,
        )  # fmt: skip
    budget = tc.max_time_s
    if budget:
        spent = state.elapsed_s
        was = parse_duration(old.get("max_time", 0) or 0)
        changed = f" (was {old.get('max_time')})" if was and was != budget else ""
        logger.info("time budget train.max_time=%s%s: %s spent, %s left", tc.max_time, changed,
                    format_duration(spent), format_duration(max(budget - spent, 0.0)))  # fmt: skip
