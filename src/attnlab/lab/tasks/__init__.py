"""Tasks: data + input encoder + encoder + head + metric, behind one interface (:class:`Task`),
and what the commands need of them besides (:class:`TaskCommands`).

:data:`TASKS` lists every task by name; the lab's own (``pos``, ``sst2``, ``sst5``, ``trec``)
are imported from :mod:`attnlab.lab.tasks.text` the first time they are looked up.
"""

from attnlab.lab.tasks.base import Task
from attnlab.lab.tasks.commands import AttentionMap, TaskCommands
from attnlab.lab.tasks.registry import BUILTIN_TASKS, TASKS, TaskRegistry, register_task

__all__ = [
    "AttentionMap",
    "BUILTIN_TASKS",
    "Task",
    "TASKS",
    "TaskCommands",
    "TaskRegistry",
    "register_task",
]
