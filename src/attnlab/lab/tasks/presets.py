"""Presets: named sets of options per task (``attnlab train TASK --preset tiny``).

Every task has

* ``default``: the task's own defaults, unchanged;
* ``tiny``: a smoke run of seconds: a few steps (:data:`TINY_TRAIN`) on a small part of the
  data where the task can take a part (:data:`TINY_DATA`), to check that the whole pipeline
  runs, not to learn anything;

and a task with a known published recipe also ``paper`` (:data:`PAPER`). A preset is a
settings tree like a config file's (``{"train": {"lr": 0.005}}``); it is applied over the
task's defaults, before ``--config`` and the ``--a.b=value`` overrides
(:func:`attnlab.lab.train.resolve_config`). A task defined elsewhere adds its own presets by
overriding :meth:`attnlab.lab.tasks.Task.presets`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from attnlab.lab.tasks.registry import TASKS

__all__ = ["TINY_TRAIN", "TINY_DATA", "PAPER", "presets_of", "preset"]

#: the trainer's side of ``tiny``, every task: 20 steps, evaluated twice
TINY_TRAIN: dict[str, Any] = {
    "epochs": 1, "max_steps": 20, "eval_every": 10, "log_every": 10, "patience": 0,
    "warmup_steps": 0, "warmup_fraction": 0.0,
}  # fmt: skip

_GENERATED = {"train": 320, "dev": 64, "test": 64}
#: the data side of ``tiny``: options that make a task's data small (and quick to make)
TINY_DATA: dict[str, dict[str, Any]] = {
    "pos": {"max_train_sentences": 300},
    "mlm": {"corpora": "conll2000", "max_train_sentences": 500, "heldout_sentences": 100},
    "g2p": {"max_train_words": 1000, "max_eval_words": 200},
    "listops": {**_GENERATED, "min_length": 20, "max_length": 100, "max_depth": 3},
    "recall": _GENERATED,
    "positions": _GENERATED,
    "digits": {"train_size": 300},
    "fashion": {"train_size": 500, "val_size": 200},
    "fsdd": {"limit": 200},
    "phones": {"sentences": 40},
}

#: ``paper``: the published recipe a task's defaults follow or can be set to
PAPER: dict[str, dict[str, Any]] = {
    # GAT (Velickovic et al. 2018): the defaults are its recipe (Adam, lr 0.005, L2 5e-4,
    # patience 100, its selection rule); named for symmetry with citeseer
    "cora": {"task_options": {"l2": 5e-4, "select": "acc+loss"}},
    # the same recipe: GAT used Cora's L2 penalty 5e-4 (this task's default is 1e-3)
    "citeseer": {"task_options": {"l2": 5e-4, "select": "acc+loss"}},
}


def presets_of(task: str) -> dict[str, dict[str, Any]]:
    """``{name: settings}`` of every preset of ``task`` (a registered name)."""
    cls = TASKS.get(task)
    found: dict[str, dict[str, Any]] = {
        "default": {},
        "tiny": {"train": dict(TINY_TRAIN), "task_options": dict(TINY_DATA.get(task, {}))},
    }
    if task in PAPER:
        found["paper"] = PAPER[task]
    found.update(cls.presets())
    if not found["tiny"]["task_options"]:
        del found["tiny"]["task_options"]
    return copy.deepcopy(found)


def preset(task: str, name: str) -> Mapping[str, Any]:
    """The settings of preset ``name`` of ``task``.

    Raises:
        ValueError: ``task`` has no such preset; the message lists the ones it has.
    """
    found = presets_of(task)
    if name not in found:
        raise ValueError(
            f"--preset: task {task!r} has no preset {name!r}; its presets: {', '.join(found)}"
        )
    return found[name]
