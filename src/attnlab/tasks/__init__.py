"""Tasks: data + input encoder + encoder + head + metric, behind one interface (:class:`Task`),
and what the commands need of them besides (:class:`TaskCommands`).

:data:`TASKS` lists every task by name; the lab's own (``pos``, ``sst2``, ``sst5``, ``trec``)
are imported from :mod:`attnlab.tasks.text` the first time they are looked up.
"""

from .base import Task
from .commands import AttentionMap, TaskCommands
from .registry import BUILTIN_TASKS, TASKS, TaskRegistry, register_task

__all__ = [
    "AttentionMap",
    "BUILTIN_TASKS",
    "Task",
    "TASKS",
    "TaskCommands",
    "TaskRegistry",
    "register_task",
]
