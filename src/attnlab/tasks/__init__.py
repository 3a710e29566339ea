"""Tasks: data + input encoder + encoder + head + metric, behind one interface (:class:`Task`).

:data:`TASKS` lists every task by name; the lab's own (``pos``, ``sst2``, ``sst5``, ``trec``)
are imported from :mod:`attnlab.tasks.text` the first time they are looked up.
"""

from .base import AttentionMap, Task
from .registry import BUILTIN_TASKS, TASKS, TaskRegistry, register_task

__all__ = ["AttentionMap", "BUILTIN_TASKS", "Task", "TASKS", "TaskRegistry", "register_task"]
