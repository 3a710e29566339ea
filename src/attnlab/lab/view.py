"""``attnlab.viz.view(run, input)``: a trained run's attention on one input, as
``attnlab show RUN INPUT --html`` draws it (:meth:`~attnlab.lab.tasks.TaskCommands.attention_view`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from attnlab.viz import AttentionView

from .commands import _autocast, _one_input, load_for_inference
from .task_flags import commands_of

__all__ = ["view_run"]


def view_run(run: str | Path, input: Any, **options: Any) -> AttentionView:
    """The attention of the model of ``run`` (a run directory or checkpoint) on ``input`` (what
    ``attnlab show`` takes: a sentence, a wav path, a word, a SMILES; ``""`` with a task flag
    such as ``node=12`` or ``index=3``). ``options``: the task's ``show`` flags, by name.

    Raises:
        ValueError: an input the task cannot read; a model without attention.
    """
    task, model, cfg = load_for_inference(str(run))
    task = commands_of(task, "show")
    rest = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
    x, title, flags = _one_input(task, cfg, str(input) if input is not None else "", rest)
    with _autocast(cfg, torch.device("cpu")):
        return task.attention_view(model, x, title=title, **flags)
