"""Tasks: data + input encoder + encoder + head + metric, behind one interface (:class:`Task`)."""

from . import text  # noqa: F401  (registers pos, sst2, sst5, trec)
from .base import TASKS, Task, register_task

__all__ = ["Task", "TASKS", "register_task"]
