"""Checkpoints: atomic, complete enough to resume bit-exactly, and loadable for inference.

A checkpoint is a ``torch.save``-d dict, loadable with ``weights_only=True``:

=============  ==============================================================================
key            content
=============  ==============================================================================
``version``    :data:`CHECKPOINT_VERSION`
``model``      the (unwrapped) model's ``state_dict``
``optimizer``  AdamW's ``state_dict``
``scheduler``  the LR scheduler's ``state_dict``
``rng``        one :func:`~attnlab.train.rng.get_rng_state` per rank (torch, Python, NumPy)
``state``      :class:`~attnlab.train.state.TrainState`: step, epoch, position in the epoch,
               running sums, best score, early-stopping counter, evaluation history
``config``     the resolved :class:`~attnlab.train.config.RunConfig` as a dict
``task``       the task's ``state_dict()`` (vocabularies)
``world_size`` number of ranks that wrote it
=============  ==============================================================================

A run directory holds ``last.pt`` (written every ``checkpoint_every`` steps, at evaluations
and at epoch ends; what ``resume`` continues from) and ``best.pt`` (the best dev score so far;
what the final test evaluation and :func:`load_for_inference` use).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from .atomic import atomic_write

if TYPE_CHECKING:
    from attnlab.tasks.base import Task

    from .config import RunConfig

__all__ = [
    "CHECKPOINT_VERSION",
    "LAST",
    "BEST",
    "save_checkpoint",
    "load_checkpoint",
    "find_checkpoint",
    "load_for_inference",
    "config_changes",
]

CHECKPOINT_VERSION = 1
LAST = "last.pt"
BEST = "best.pt"


def save_checkpoint(path: str | Path, checkpoint: dict[str, Any]) -> Path:
    """Atomically ``torch.save`` ``checkpoint`` to ``path`` (temporary file in the same
    directory, fsync, ``os.replace``): a crash mid-write leaves the previous file intact."""
    payload = {"version": CHECKPOINT_VERSION, **checkpoint}
    return atomic_write(path, lambda f: torch.save(payload, f))


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (``weights_only=True``)."""
    ckpt = torch.load(path, map_location=map_location, weights_only=True)
    version = ckpt.get("version") if isinstance(ckpt, dict) else None
    if version != CHECKPOINT_VERSION:
        raise ValueError(
            f"{path}: not an attnlab checkpoint of version {CHECKPOINT_VERSION} (got {version!r})"
        )
    return ckpt


def find_checkpoint(path: str | Path) -> Path:
    """``path`` itself if it is a file; for a run directory its ``best.pt``, else ``last.pt``."""
    path = Path(path)
    if path.is_dir():
        for name in (BEST, LAST):
            if (path / name).is_file():
                return path / name
        raise FileNotFoundError(f"{path} holds neither {BEST} nor {LAST}")
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return path


def load_for_inference(
    path: str | Path,
    *,
    device: str | torch.device = "cpu",
    setup: bool = False,
) -> tuple[Task, nn.Module, RunConfig]:
    """Rebuild ``(task, model, cfg)`` from a checkpoint or a run directory, for eval/predict.

    Args:
        path: a ``.pt`` file or a run directory (its ``best.pt``, else ``last.pt``).
        device: where to put the model.
        setup: also call ``task.setup(cfg.task_options)`` (loads the data splits, keeping the
            checkpoint's vocabularies); not needed to predict on new inputs.

    Returns:
        The task with its vocabularies restored, the model with the checkpoint's weights in
        eval mode, and the run's config.
    """
    from attnlab.tasks.registry import TASKS

    from .config import RunConfig

    ckpt = load_checkpoint(find_checkpoint(path), map_location="cpu")
    cfg = RunConfig.from_dict(ckpt["config"])
    task = TASKS.get(cfg.task)()
    task.load_state_dict(ckpt["task"])
    if setup:
        task.setup(cfg.task_options)
    model = task.build_model(cfg.model)
    model.load_state_dict(ckpt["model"])
    return task, model.to(device).eval(), cfg


def config_changes(
    old: Any,
    new: Any,
    *,
    ignore: frozenset[str] = frozenset({"out_dir", "train.resume", "train.overwrite"}),
) -> list[str]:
    """Dotted names whose values differ between two config dicts (e.g. a checkpoint's and the
    current run's), ignoring settings that do not affect training."""
    return _diff(old, new, ignore, "")


def _diff(old: Any, new: Any, ignore: frozenset[str], prefix: str) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            name = f"{prefix}.{key}" if prefix else key
            if name not in ignore:
                out += _diff(old.get(key), new.get(key), ignore, name)
        return out
    return [] if old == new else [prefix]
