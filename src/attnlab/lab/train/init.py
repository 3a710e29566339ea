"""``--model.init``: a new run starts from another run's weights (pre-training, then
fine-tuning: ``attnlab pretrain mlm``, then ``attnlab train sst2 --model.init=runs/mlm``).

The trainer calls :func:`init_from_checkpoint` after building a fresh model, before the
optimizer sees it, and never on resume (``last.pt`` then holds the weights). What is copied,
and how, is the task's business (:meth:`~attnlab.lab.tasks.Task.load_pretrained`); this module
finds and reads the checkpoint and logs the task's report.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from torch import nn

from attnlab.lab.tasks import Task
from attnlab.lab.train.checkpoint import find_checkpoint, load_checkpoint

__all__ = ["init_from_checkpoint"]

logger = logging.getLogger(__name__)


def init_from_checkpoint(
    task: Task, model: nn.Module, source: str | Path, *, log: bool = True
) -> Any:
    """Load the weights of ``source`` (a ``.pt`` file, or a run directory: its ``best.pt``,
    else ``last.pt``) into ``model`` through ``task.load_pretrained``; returns its report.

    Raises:
        FileNotFoundError: no checkpoint at ``source``.
        CheckpointError: the checkpoint cannot be read.
        ValueError: the task refuses it (e.g. a parameter's shape differs).
    """
    path = find_checkpoint(source)
    ckpt = load_checkpoint(path, map_location="cpu")
    try:
        report = task.load_pretrained(model, ckpt["model"], ckpt.get("task") or {})
    except ValueError as err:
        raise ValueError(f"model.init={source}: {err}") from None
    if log:
        origin = (ckpt.get("config") or {}).get("task", "?")
        logger.info("model.init: %s (task %s, step %s)", path, origin,
                    (ckpt.get("state") or {}).get("step", "?"))  # fmt: skip
        for line in getattr(report, "lines", lambda: [])():
            logger.info("model.init: %s", line)
    return report
