"""The task registry: name -> :class:`~attnlab.lab.tasks.base.Task` subclass.

The lab's own tasks are listed in :data:`BUILTIN_TASKS` as ``name -> "module:Class"`` and
imported the first time they are looked up, so registration never depends on some module
having been imported for its side effects, and ``attnlab tasks`` lists every task without
importing any (nor its data or model code). A new task of the lab is one line in that table;
a task defined elsewhere (a notebook, a test, a plug-in) registers itself with
:func:`register_task`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping

from attnlab.lab.tasks.base import Task
from attnlab.registry import Registry

__all__ = ["BUILTIN_TASKS", "TASKS", "TaskRegistry", "register_task"]

#: the lab's tasks, imported on first use
BUILTIN_TASKS: Mapping[str, str] = {
    # text: words of a sentence
    "pos": "attnlab.lab.tasks.text.tagging:PosTask",
    "sst2": "attnlab.lab.tasks.text.sentences:SST2Task",
    "sst5": "attnlab.lab.tasks.text.sentences:SST5Task",
    "trec": "attnlab.lab.tasks.text.sentences:TRECTask",
    "mlm": "attnlab.lab.tasks.text.mlm:MLMTask",  # pre-training: attnlab pretrain mlm
    # text: your own files, no code (--data.train=FILE)
    "text-tag": "attnlab.lab.tasks.text.generic:TextTagTask",  # one label per word
    "text-classify": "attnlab.lab.tasks.text.generic:TextClassifyTask",  # one per sentence
    # speech: 10 ms frames
    "fsdd": "attnlab.lab.tasks.speech.fsdd:FsddTask",
    "phones": "attnlab.lab.tasks.speech.phones:PhonesTask",
    "audio-classify": "attnlab.lab.tasks.speech.generic:AudioClassifyTask",  # your recordings
    "audio-frames": "attnlab.lab.tasks.speech.frames:AudioFramesTask",  # aligned recordings
    # graphs: nodes, attention along edges
    "cora": "attnlab.lab.tasks.graph.task:CoraTask",
    "citeseer": "attnlab.lab.tasks.graph.task:CiteSeerTask",
    "karate": "attnlab.lab.tasks.graph.task:KarateTask",
    "node-classify": "attnlab.lab.tasks.graph.generic:NodeClassifyTask",  # your graph
    # sequence to sequence: letters in, phones out (N -> M)
    "g2p": "attnlab.lab.tasks.seq2seq.task:G2PTask",
    "seq2seq": "attnlab.lab.tasks.seq2seq.generic:Seq2SeqTask",  # your source TAB target pairs
    # long sequences: generated, N -> 1
    "listops": "attnlab.lab.tasks.longrange.task:ListOpsTask",
    "recall": "attnlab.lab.tasks.longrange.task:RecallTask",
    "positions": "attnlab.lab.tasks.longrange.task:PositionsTask",
    # images: pixels, patches or CNN features as vectors
    "fashion": "attnlab.lab.tasks.images.task:FashionTask",
    "digits": "attnlab.lab.tasks.images.task:DigitsTask",
    "image-classify": "attnlab.lab.tasks.images.generic:ImageClassifyTask",  # your images
    # molecules: atoms, bonds as structure
    "freesolv": "attnlab.lab.tasks.molecules.tasks:FreeSolvTask",
    "solubility": "attnlab.lab.tasks.molecules.tasks:SolubilityTask",
    "molecule-property": "attnlab.lab.tasks.molecules.generic:MoleculePropertyTask",  # your CSV
}


class TaskRegistry(Registry[type[Task]]):
    """A :class:`~attnlab.registry.Registry` of task classes, some listed by import path.

    Args:
        lazy: ``name -> "package.module:ClassName"`` entries, imported on first :meth:`get`.
    """

    def __init__(self, lazy: Mapping[str, str] = {}) -> None:  # noqa: B006 (read only)
        super().__init__("task")
        self._lazy: dict[str, str] = {}
        for name, target in lazy.items():
            self.register_lazy(name, target)

    def register_lazy(self, name: str, target: str) -> None:
        """List the task class at ``target`` (``"package.module:ClassName"``) as ``name``; it
        is imported on the first :meth:`get`."""
        module, _, attr = target.partition(":")
        if not (module and attr):
            raise ValueError(f"task {name!r}: expected 'package.module:ClassName', got {target!r}")
        if name in self:
            raise ValueError(f"task {name!r} is already registered")
        self._lazy[name] = target

    def register(self, name: str, obj: type[Task] | None = None):  # type: ignore[override]
        """Register a :class:`Task` subclass as ``name`` and set its ``name``; usable as a
        decorator when ``obj`` is omitted."""

        def add(cls: type[Task]) -> type[Task]:
            if not (isinstance(cls, type) and issubclass(cls, Task)):
                raise TypeError(f"task {name!r}: expected a Task subclass, got {cls!r}")
            if name in self._lazy:
                raise ValueError(f"task {name!r} is already registered")
            super(TaskRegistry, self).register(name, cls)
            cls.name = name
            return cls

        return add if obj is None else add(obj)

    def unregister(self, name: str) -> None:
        """Forget ``name`` (e.g. to register a changed class again in a notebook or a test)."""
        if name not in self:
            raise ValueError(f"unknown task {name!r}; valid choices: {', '.join(self.names())}")
        self._items.pop(name, None)
        self._lazy.pop(name, None)

    def get(self, name: str) -> type[Task]:
        """The task class registered as ``name`` (importing it if listed by path); an unknown
        name lists the valid ones."""
        if isinstance(name, str) and name in self._lazy:
            self._resolve(name)
        if not isinstance(name, str) or name not in self._items:
            raise ValueError(f"unknown task {name!r}; valid choices: {', '.join(self.names())}")
        return self._items[name]

    def _resolve(self, name: str) -> None:
        target = self._lazy[name]
        module_name, _, attr = target.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"task {name!r}: cannot import {target!r}: {err}") from err
        if not (isinstance(cls, type) and issubclass(cls, Task)):
            raise TypeError(f"task {name!r}: {target!r} is {cls!r}, expected a Task subclass")
        del self._lazy[name]
        self.register(name, cls)

    def names(self) -> list[str]:
        return sorted([*self._items, *self._lazy])

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items) + len(self._lazy)


#: name -> Task subclass
TASKS: TaskRegistry = TaskRegistry(BUILTIN_TASKS)


def register_task(name: str) -> Callable[[type[Task]], type[Task]]:
    """Class decorator: register a :class:`Task` subclass as ``name`` (and set ``cls.name``)."""
    return TASKS.register(name)
