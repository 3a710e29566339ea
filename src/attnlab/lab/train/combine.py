"""Several checkpoints as one model: an ensemble of runs (their class probabilities averaged),
or one run's snapshots averaged weight by weight (``attnlab average``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from attnlab.lab.train.checkpoint import (
    config_changes,
    find_checkpoint,
    load_checkpoint,
    load_for_inference,
)

if TYPE_CHECKING:
    from attnlab.lab.tasks.base import Task
    from attnlab.lab.train.config import RunConfig

__all__ = ["load_ensemble", "average_checkpoints"]


def load_ensemble(
    paths: Sequence[str | Path],
    *,
    device: str | torch.device = "cpu",
    setup: bool = False,
) -> tuple[Task, nn.Module, RunConfig]:
    """:func:`load_for_inference` of several runs of one task, as one model: their
    :class:`~attnlab.lab.models.Ensemble` (class probabilities averaged). One path gives that run's
    own model, unwrapped.

    The members must read inputs the same way: the same task and the same task state
    (vocabularies, label set), so that one collated batch means the same to each.

    Returns:
        The first run's task (``setup`` as in :func:`load_for_inference`), the ensemble in eval
        mode and the first run's config.

    Raises:
        ValueError: no paths; a member of another task, or with other vocabularies or labels
            than the first (the message names both runs).
    """
    from attnlab.lab.models import Ensemble

    if not paths:
        raise ValueError("checkpoints: give at least one run directory or .pt file")
    loaded = [load_for_inference(p, device=device) for p in paths]
    first_task, _, first_cfg = loaded[0]
    for path, (task, _, cfg) in zip(paths[1:], loaded[1:]):
        if cfg.task != first_cfg.task:
            raise ValueError(
                f"checkpoints: {path} is a {cfg.task!r} model and {paths[0]} a "
                f"{first_cfg.task!r} one; an ensemble's members must share a task"
            )
        if task.state_dict() != first_task.state_dict():
            raise ValueError(
                f"checkpoints: {path} and {paths[0]} encode inputs differently (their "
                "vocabularies or labels differ), so one batch cannot feed both; ensemble runs "
                "trained on the same data and options"
            )
    if setup:
        first_task.setup(first_cfg.task_options)
    if len(loaded) == 1:
        return loaded[0]
    return first_task, Ensemble([model for _, model, _ in loaded]).eval(), first_cfg


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, Any]:
    """One checkpoint whose model weights are the element-wise mean of ``paths``' weights.

    Checkpoint averaging (Vaswani et al. 2017 averaged a Transformer's last 5 or 20
    checkpoints): snapshots of *one* run, taken near its end, lie in one basin, and their mean
    usually generalises a little better than any of them. (Runs trained from different random
    initialisations are not averaged usefully: their hidden units are permuted; ensemble those,
    :func:`load_ensemble`.) The mean is taken in float64 and stored in each tensor's dtype;
    a non-floating tensor (a counter, an index buffer) must be equal in every member.

    Args:
        paths: ``.pt`` files or run directories (their ``best.pt``, else ``last.pt``), at least
            two; listing one twice weighs it twice.

    Returns:
        A checkpoint for :func:`save_checkpoint`: the mean ``model``, the first member's
        ``config`` and ``task`` (so :func:`load_for_inference` and ``attnlab eval`` read it),
        and ``averaged``, each member's path and step. It holds no optimizer state: an
        evaluation and inference checkpoint, not one to resume.

    Raises:
        ValueError: fewer than two paths; a member of another task, model configuration or
            vocabulary than the first, or with other weights' names, shapes or integer values
            (the message names both files and what differs).
    """
    if len(paths) < 2:
        raise ValueError(f"checkpoints: averaging needs at least two, got {len(paths)}")
    chosen = [find_checkpoint(p) for p in paths]
    first = load_checkpoint(chosen[0])
    total = {
        k: v.to(torch.float64) if v.is_floating_point() else v for k, v in first["model"].items()
    }
    members = [{"path": str(chosen[0]), "step": first.get("state", {}).get("step", -1)}]
    for path in chosen[1:]:
        ckpt = load_checkpoint(path)
        differs = _average_mismatch(first, ckpt)
        if differs:
            raise ValueError(f"checkpoints: {path} and {chosen[0]} differ in {differs}; only "
                             "snapshots of one model (one run) can be averaged")  # fmt: skip
        for key, value in ckpt["model"].items():
            if value.is_floating_point():
                total[key] += value.to(torch.float64)
            elif not torch.equal(value, total[key]):
                raise ValueError(f"checkpoints: {path} and {chosen[0]} differ in the integer "
                                 f"tensor {key!r}, which has no mean")  # fmt: skip
        members.append({"path": str(path), "step": ckpt.get("state", {}).get("step", -1)})
    n = len(chosen)
    model = {
        k: (v / n).to(first["model"][k].dtype) if v.is_floating_point() else v
        for k, v in total.items()
    }
    return {"model": model, "config": first["config"], "task": first["task"], "averaged": members}


def _average_mismatch(a: dict[str, Any], b: dict[str, Any]) -> str:
    """What keeps checkpoints ``a`` and ``b`` from being averaged, in words ("" if nothing)."""
    if a["config"].get("task") != b["config"].get("task"):
        return f"task ({a['config'].get('task')!r} vs {b['config'].get('task')!r})"
    changed = config_changes(a["config"].get("model"), b["config"].get("model"))
    if changed:
        return "model config (" + ", ".join(f"model.{c}" for c in changed) + ")"
    if a["task"] != b["task"]:
        return "vocabularies or labels (the task state)"
    wa, wb = a["model"], b["model"]
    if wa.keys() != wb.keys():
        return "weight names (" + ", ".join(sorted(set(wa) ^ set(wb))[:3]) + ")"
    for key in wa:
        if wa[key].shape != wb[key].shape:
            return f"the shape of {key!r} ({tuple(wa[key].shape)} vs {tuple(wb[key].shape)})"
    return ""
