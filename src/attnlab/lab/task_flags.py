"""What ``predict`` and ``show`` run on: their inputs (on the command line, or a line each on
stdin with ``-``) and the task's own flags (:meth:`TaskCommands.add_arguments`, e.g. ``--beam``),
parsed intermixed so that either may come first."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import torch

from attnlab.lab.predictions import TEST_INDEX
from attnlab.lab.tasks import TASKS, Task, TaskCommands
from attnlab.lab.train import find_checkpoint, load_checkpoint

__all__ = ["commands_of", "task_flags", "task_flags_help", "read_stdin_inputs"]


def commands_of(task: Task, command: str) -> TaskCommands:
    """``task`` as the commands' interface, or a ``ValueError`` saying it has none."""
    if not isinstance(task, TaskCommands):
        raise ValueError(
            f"task {task.name or type(task).__name__!r} trains and evaluates its splits only: "
            f"it does not implement attnlab.lab.tasks.TaskCommands, which {command} needs"
        )
    return task


class _TaskFlags(argparse.ArgumentParser):
    """The parser of a task's own ``predict`` / ``show`` flags: errors raise, naming the task."""

    def error(self, message: str) -> Any:  # argparse would print usage and exit
        raise ValueError(f"{self.prog}: {message}")


def task_flags(
    task: TaskCommands, command: str, texts: Sequence[str], rest: Sequence[str] = ()
) -> tuple[list[str], dict[str, Any]]:
    """Split a command line's inputs from the task's own flags
    (:meth:`TaskCommands.add_arguments`).

    ``texts`` are the positional inputs the CLI saw (inputs for sure, even ``-1,2`` after a
    ``--``) and ``rest`` what it did not recognise: the task's flags, and any inputs that
    followed the first flag (parsed intermixed), so ``--beam 5 hello`` and ``hello --beam 5``
    mean the same. The inputs keep their command-line order.

    Returns:
        ``(inputs, options)``: the positional inputs in order, and the task's flags by ``dest``.

    Raises:
        ValueError: a flag the task does not declare, or a bad value for one.
    """
    parser = _TaskFlags(prog=f"attnlab {command} (task {task.name or type(task).__name__})",
                        add_help=False, allow_abbrev=False)  # fmt: skip
    parser.add_argument("inputs", nargs="*")
    _declare_flags(parser, parser, task, command)
    options = vars(parser.parse_intermixed_args(list(rest)))
    return [*texts, *options.pop("inputs")], options


def task_flags_help(checkpoint: str, command: str) -> str:
    """The help of the own flags of the task of the run ``checkpoint`` (a run directory or a
    ``.pt`` file) for ``command``: what ``attnlab predict|show RUN --help`` adds."""
    path = Path(checkpoint)
    if (path / "config.json").is_file():
        name = json.loads((path / "config.json").read_text()).get("task", "")
    else:
        name = load_checkpoint(find_checkpoint(path), torch.device("cpu"))["config"]["task"]
    task = commands_of(TASKS.get(name)(), command)
    parser = _TaskFlags(prog=f"attnlab {command} RUN", add_help=False, allow_abbrev=False,
                        usage=argparse.SUPPRESS)  # fmt: skip
    flags = parser.add_argument_group(f"flags of the task {name!r} ({command})")
    _declare_flags(flags, parser, task, command)
    return parser.format_help().strip()


def _declare_flags(flags: Any, parser: argparse.ArgumentParser, task: TaskCommands,
                   command: str) -> None:  # fmt: skip
    """The task's own flags, and ``--index N`` unless the task declares one (images do)."""
    task.add_arguments(flags, command)
    if "--index" not in parser._option_string_actions:
        flags.add_argument("--index", dest=TEST_INDEX, type=int, action="append", default=[],
                           metavar="N", help="example N of the run's test split, with its "
                           "gold answer (repeatable)")  # fmt: skip


def read_stdin_inputs(texts: Sequence[str], stdin: TextIO | None) -> list[str]:
    """``texts``, or the lines of ``stdin`` when ``texts`` is the single input ``-``.

    Raises:
        ValueError: ``-`` among other inputs (it would be read as a literal input), or no
            input lines on stdin.
    """
    texts = list(texts)
    if "-" not in texts:
        return texts
    if len(texts) > 1:
        raise ValueError(
            f"inputs: '-' reads every input from stdin, so it must be the only input; got "
            f"{len(texts)} inputs ({' '.join(texts)})"
        )
    lines = [line.rstrip("\n") for line in (stdin or sys.stdin) if line.strip()]
    if not lines:
        raise ValueError("no inputs on stdin ('-'): expected one input per line, got none")
    return lines
