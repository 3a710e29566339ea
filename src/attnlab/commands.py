"""What the CLI's ``train``, ``eval``, ``predict`` and ``show`` subcommands do.

Every command talks to a task only through the :class:`~attnlab.tasks.Task` interface
(``parse_input``, ``predict``, ``format_text`` / ``format_json``, ``draw``,
``read_examples``), so a task of any input kind works here unchanged. The commands sit above
both the tasks and the trainer: :mod:`attnlab.cli` imports this module, this module imports
:mod:`attnlab.train` and :mod:`attnlab.tasks`, and neither of those imports it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from attnlab.tasks import Task
from attnlab.train import Trainer, load_for_inference, resolve_config

__all__ = [
    "normalize_overrides",
    "train_command",
    "eval_command",
    "predict_command",
    "show_command",
]

logger = logging.getLogger(__name__)

#: ``--attention.X`` is shorthand for ``--model.encoder.X`` (the efficient-kernel issue's spelling)
_ALIASES = {"--attention.": "--model.encoder."}

#: examples per batch when evaluating a checkpoint
EVAL_BATCH = 64


def normalize_overrides(args: Sequence[str]) -> list[str]:
    """``--a.b value`` -> ``--a.b=value``; apply the aliases; reject stray words."""
    out: list[str] = []
    i = 0
    args = list(args)
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise ValueError(f"expected an option like --train.lr=1e-3, got {arg!r}")
        if "=" not in arg and i + 1 < len(args) and not args[i + 1].startswith("--"):
            arg = f"{arg}={args[i + 1]}"
            i += 1
        for short, full in _ALIASES.items():
            if arg.startswith(short):
                arg = full + arg[len(short) :]
        out.append(arg)
        i += 1
    return out


def train_command(task: str, rest: Sequence[str], *, config: str | None, resume: bool) -> int:
    """``attnlab train TASK [--a.b=value ...]``: train, print the test metrics and the
    checkpoint's path (rank 0 only under ``torchrun``)."""
    overrides = normalize_overrides(rest)
    cfg = resolve_config(task=task, config_file=config, overrides=overrides)
    if not any(o.startswith("--out_dir") for o in overrides) and cfg.out_dir == "runs/default":
        cfg.out_dir = f"runs/{cfg.task}"
    trainer = Trainer(cfg.task, cfg, resume=resume or None)
    try:
        result = trainer.fit()
    finally:
        trainer.close()
    if trainer.env.is_main:
        summary = result.summary()
        test = {k: round(v, 4) for k, v in (summary.get("test") or {}).items()}
        print(f"{cfg.task}: test {json.dumps(test)}")
        print(f"checkpoint: {Path(cfg.out_dir) / 'best.pt'}")
    return 0


def _batches(task: Task, examples: list, size: int = EVAL_BATCH) -> Iterator[dict]:
    for s in range(0, len(examples), size):
        yield task.collate(examples[s : s + size])


def eval_command(checkpoint: str, *, data: str | None, split: str) -> int:
    """``attnlab eval CKPT [--data FILE | --split NAME]``: the task's metrics on a file it
    reads (:meth:`Task.read_examples`) or on one of its splits, as one JSON line."""
    task, model, cfg = load_for_inference(checkpoint, setup=data is None)
    if data is not None:
        if not Path(data).is_file():
            raise FileNotFoundError(f"--data: no such file {data}")
        examples = task.read_examples(data)
        where = str(data)
    else:
        examples = task.splits().get(split) or []
        where = f"{cfg.task} {split} split"
    if not examples:
        raise ValueError(f"{where}: no examples to evaluate")
    with torch.no_grad():
        metrics = task.evaluate(model, _batches(task, examples))
    print(f"{where}: " + json.dumps({k: round(v, 4) for k, v in metrics.items()}))
    return 0


def predict_command(checkpoint: str, texts: Sequence[str], *, as_json: bool) -> int:
    """``attnlab predict CKPT INPUT ... [--json]``: one line per input, as the task renders
    its prediction (:meth:`Task.format_text` or :meth:`Task.format_json`)."""
    task, model, _ = load_for_inference(checkpoint)
    if not texts:
        raise ValueError("predict: no inputs given")
    inputs = [task.parse_input(text) for text in texts]
    for record in task.predict(model, inputs):
        print(task.format_json(record) if as_json else task.format_text(record))
    return 0


def show_command(checkpoint: str, text: str, *, out: str) -> int:
    """``attnlab show CKPT INPUT --out FILE.png``: the task's picture of the model's attention
    on one input (:meth:`Task.draw`); prints the path written."""
    task, model, cfg = load_for_inference(checkpoint)
    path = task.draw(model, task.parse_input(text), out, title=f"{cfg.task}: {text}")
    print(path)
    return 0
