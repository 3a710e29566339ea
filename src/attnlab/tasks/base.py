"""The :class:`Task` interface: what the one trainer of the lab needs to know about a task.

A task is *data + input encoder + encoder + head + metric*. The trainer
(:class:`attnlab.train.Trainer`) only ever talks to this interface, so adding a task is one new
class registered with :func:`register_task`; the trainer is never touched.

Life cycle, as the trainer drives it::

    task = TASKS.get(cfg.task)()
    task.load_state_dict(saved)          # only when resuming / reloading (vocabularies)
    task.setup(cfg)                      # load data; build vocabularies from train if not loaded
    splits = task.splits()               # {"train": [...], "dev": [...], "test": [...]}
    model = task.build_model(cfg)
    batch = task.collate(examples)       # dict of padded tensors, with "lengths"
    loss_sum, units = task.loss(model, batch)
    metrics = task.evaluate(model, batches)   # {task.metric_name: ..., ...}

Losses are *sums* over units (tokens for tagging, sequences for classification) and come with
their unit count, so the trainer divides by the total count of a whole optimizer step: averaging
across gradient-accumulation micro-batches and across DDP ranks is then exact (it equals the
big-batch gradient), whatever the padding or the split.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from torch import Tensor, nn

from attnlab.registry import Registry

if TYPE_CHECKING:
    from attnlab.train.config import RunConfig

__all__ = ["Task", "TASKS", "register_task"]


class Task(ABC):
    """Abstract base class of a trainable task.

    Class attributes:
        name: the registry name (set by :func:`register_task`).
        metric_name: key of :meth:`evaluate`'s result used for model selection / early stopping.
        higher_is_better: whether a larger ``metric_name`` is better (accuracy) or worse (loss).
        unit: what :meth:`loss` counts (``"tok"``, ``"seq"``, ...), for logs and throughput.

    Contract of the methods the trainer relies on:

    * :meth:`setup` may be called after :meth:`load_state_dict`; it must then *keep* the loaded
      vocabularies (a resumed or reloaded run encodes with exactly the vocabulary its weights
      were trained with) and only build them from the train split otherwise.
    * :meth:`collate` is a pure function of its examples (no randomness): with
      ``num_workers > 0`` it runs in worker processes, and resuming must reproduce batches.
    * :meth:`loss` calls ``model(...)`` (never ``model.module`` or other attributes): under DDP
      the model is the ``DistributedDataParallel`` wrapper.
    * :meth:`evaluate` runs under ``torch.no_grad()`` with the model in eval mode (the trainer
      arranges both) and returns plain floats, including ``metric_name``.
    """

    name: ClassVar[str] = ""
    metric_name: ClassVar[str] = "accuracy"
    higher_is_better: ClassVar[bool] = True
    unit: ClassVar[str] = "seq"

    # ---------------------------------------------------------------- configuration defaults
    @classmethod
    def default_model_config(cls) -> Any:
        """The task's model configuration with its defaults: a (nested) dataclass, so that
        ``--model.encoder.heads=8`` is type-checked, or a free-form dict."""
        return {}

    @classmethod
    def default_options(cls) -> Any:
        """Task options (dataset name, paths, ...) with their defaults: a dataclass or a dict."""
        return {}

    # ---------------------------------------------------------------- data
    @abstractmethod
    def setup(self, cfg: RunConfig) -> None:
        """Load the data and build the vocabularies from the train split (unless loaded)."""

    @abstractmethod
    def splits(self) -> dict[str, list]:
        """The example lists ``{"train": [...], "dev": [...], "test": [...]}`` (dev/test may be
        empty lists)."""

    @abstractmethod
    def collate(self, examples: list) -> dict[str, Tensor]:
        """Pad and encode ``examples`` into a batch of tensors, including ``"lengths"`` ``(b,)``."""

    def batch_size_of(self, example: Any) -> int:
        """The cost of one example for token-based batching (``train.batch_tokens``), e.g. its
        number of tokens. Default 1: ``batch_tokens`` then counts examples."""
        return 1

    # ---------------------------------------------------------------- model, loss, metric
    @abstractmethod
    def build_model(self, cfg: RunConfig) -> nn.Module:
        """A fresh model for ``cfg.model``; needs the vocabularies (from setup or state)."""

    @abstractmethod
    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int | Tensor]:
        """``(loss_sum, num_units)``: the loss *summed* over the batch's units (a scalar tensor)
        and how many units it sums over (tokens for tagging, sequences for classification)."""

    @abstractmethod
    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        """Metrics of ``model`` over ``batches`` (collated, already on the model's device)."""

    # ---------------------------------------------------------------- state (vocabularies)
    def state_dict(self) -> dict[str, Any]:
        """JSON-friendly state needed to rebuild the model and encode inputs (vocabularies)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; a later :meth:`setup` must keep it."""
        if state:
            raise NotImplementedError(
                f"{type(self).__name__} has state {sorted(state)} but does not override "
                "load_state_dict"
            )

    # ---------------------------------------------------------------- model selection
    def score(self, metrics: Mapping[str, float]) -> float:
        """The model-selection score ``metrics[metric_name]``."""
        if self.metric_name not in metrics:
            raise KeyError(
                f"{type(self).__name__}.evaluate returned {sorted(metrics)}, which lacks its "
                f"metric_name {self.metric_name!r}"
            )
        return float(metrics[self.metric_name])

    def is_better(self, score: float, best: float | None) -> bool:
        """Whether ``score`` strictly improves on ``best`` (``None``: nothing yet)."""
        if math.isnan(score):
            return False
        if best is None or math.isnan(best):
            return True
        return score > best if self.higher_is_better else score < best


#: name -> Task subclass
TASKS: Registry[type[Task]] = Registry("task")


def register_task(name: str) -> Callable[[type[Task]], type[Task]]:
    """Class decorator: register a :class:`Task` subclass as ``name`` (and set ``cls.name``)."""

    def add(cls: type[Task]) -> type[Task]:
        if not (isinstance(cls, type) and issubclass(cls, Task)):
            raise TypeError(f"register_task({name!r}) expects a Task subclass, got {cls!r}")
        cls.name = name
        TASKS.register(name, cls)
        return cls

    return add
