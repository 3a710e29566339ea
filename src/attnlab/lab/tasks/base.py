"""The :class:`Task` interface: what the trainer needs to know about a task.

A task is *data + input encoder + encoder + head + metric*. The trainer
(:class:`attnlab.lab.train.Trainer`) only ever talks to this interface, so a new task, whatever its
input kind (sentences, wav files, SMILES strings, node ids, images), is one class listed in
:data:`attnlab.lab.tasks.TASKS`; neither the trainer nor the command line is touched. What the
commands (``predict``, ``show``, ``eval --data``) need besides is
:class:`~attnlab.lab.tasks.commands.TaskCommands`, which a task that serves them inherits too.

Life cycle, as the trainer drives it::

    task = TASKS.get(cfg.task)()
    task.load_state_dict(saved)          # only when resuming / reloading (vocabularies)
    task.load_run_data(run_dir)          # only when resuming / reloading (the data it kept)
    task.setup(cfg.task_options)         # load data; build vocabularies from train if not loaded
    task.save_run_data(run_dir)          # a new run: keep what its data needs
    splits = task.splits()               # {"train": [...], "dev": [...], "test": [...]}
    model = task.build_model(cfg.model)
    batch = task.collate(examples)       # dict of padded tensors, with "lengths"
    loss_sum, units = task.loss(model, batch)
    metrics = task.evaluate(model, batches)   # {task.metric_name: ..., ...}

A task only ever sees its own settings: ``setup`` gets the options dataclass of
:meth:`Task.default_options` and ``build_model`` the model configuration of
:meth:`Task.default_model_config`, never the whole run configuration.

Losses are *sums* over units (tokens for tagging, sequences for classification) and come with
their unit count, so the trainer divides by the total count of a whole optimizer step: averaging
across gradient-accumulation micro-batches and across DDP ranks is then exact (it equals the
big-batch gradient), whatever the padding or the split.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any, ClassVar, TypeVar

import torch
from torch import Tensor, nn

__all__ = ["Task", "classification_metrics", "options_as"]

OptionsT = TypeVar("OptionsT")

#: label of positions that count for nothing (padding frames; cross_entropy's ignore_index)
IGNORE_INDEX = -100


def classification_metrics(pairs: Iterable[tuple[Tensor, Tensor]]) -> dict[str, float]:
    """Accuracy and mean cross-entropy over ``(logits (n, C), labels (n,))`` pairs, e.g. one per
    evaluation batch; labels equal to ``IGNORE_INDEX`` count for neither."""
    correct = total = 0
    loss = 0.0
    for logits, labels in pairs:
        logits = logits.float()
        keep = labels != IGNORE_INDEX
        loss += torch.nn.functional.cross_entropy(
            logits, labels, ignore_index=IGNORE_INDEX, reduction="sum"
        ).item()
        correct += int((logits.argmax(-1)[keep] == labels[keep]).sum())
        total += int(keep.sum())
    return {"accuracy": correct / max(total, 1), "loss": loss / max(total, 1)}


def options_as(cls: type[OptionsT], options: Any) -> OptionsT:
    """``options`` as the dataclass ``cls`` (a free-form mapping is checked field by field)."""
    if isinstance(options, cls):
        return options
    if isinstance(options, Mapping):
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ValueError(f"unknown task option(s) {unknown}; valid names: {', '.join(valid)}")
        return cls(**options)
    raise TypeError(f"expected {cls.__name__} task options, got {type(options).__name__}")


class Task(ABC):
    """Abstract base class of a trainable task.

    Class attributes:
        name: the registry name (set when the task is registered, see :mod:`.registry`).
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

    What the commands (``predict``, ``show``, ``eval --data``) need is another interface,
    :class:`~attnlab.lab.tasks.commands.TaskCommands`, which a task that serves them inherits too
    (``class MyTask(Task, TaskCommands)``): a task that only trains writes only this class's
    methods.
    """

    name: ClassVar[str] = ""
    metric_name: ClassVar[str] = "accuracy"
    higher_is_better: ClassVar[bool] = True
    unit: ClassVar[str] = "seq"
    #: float tensors of a batch that are sequences along dimension 1, padded with zeros and
    #: masked by the model (e.g. speech ``features``): ``train.pad_multiple`` pads them too, so
    #: that a compiled model meets few lengths (integer tensors are padded whatever this says)
    padded_floats: ClassVar[tuple[str, ...]] = ()
    #: what ``train.precision=auto`` picks on a CPU, where this task is known to train faster
    #: in it than in what the CPU's instructions suggest (None: the CPU decides)
    cpu_precision: ClassVar[str | None] = None

    # ---------------------------------------------------------------- configuration defaults
    @classmethod
    def default_model_config(cls) -> Any:
        """The task's model configuration with its defaults: a (nested) dataclass, so that
        ``--model.encoder.heads=8`` is type-checked, or a free-form dict."""
        return {}

    @classmethod
    def default_train_options(cls) -> dict[str, Any]:
        """The task's training recipe: ``TrainConfig`` fields that differ from the trainer's
        defaults (e.g. a full-batch graph task's lr, epochs and patience). Command-line
        ``--train.X`` overrides still win. Default: none."""
        return {}

    @classmethod
    def presets(cls) -> dict[str, dict[str, Any]]:
        """Presets of this task besides the lab's (:mod:`attnlab.lab.tasks.presets`:
        ``default``, ``tiny``, and ``paper`` where known): ``{name: settings tree}``, e.g.
        ``{"paper": {"train": {"lr": 5e-3}}}`` for ``--preset paper``. Default: none."""
        return {}

    @classmethod
    def default_options(cls) -> Any:
        """Task options (dataset name, paths, ...) with their defaults: a dataclass or a dict."""
        return {}

    # ---------------------------------------------------------------- data
    @abstractmethod
    def setup(self, options: Any) -> None:
        """Load the data and build the vocabularies from the train split (unless loaded).

        Args:
            options: the task's options, as :meth:`default_options` makes them (the run's
                ``task_options``).
        """

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
    def build_model(self, model_config: Any) -> nn.Module:
        """A fresh model; needs the vocabularies (from :meth:`setup` or the state).

        Args:
            model_config: the task's model configuration, as :meth:`default_model_config`
                makes it (the run's ``model``).
        """

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

    def save_run_data(self, run_dir: Any) -> None:
        """Keep in the new run's directory ``run_dir`` what its data needs besides the task's
        options (the text tasks: the splits of the user's files, dev and test cut from train);
        the trainer calls it after :meth:`setup`, on the main process. Default: nothing."""
        return None

    def load_run_data(self, run_dir: Any) -> None:
        """Read back what :meth:`save_run_data` kept, before :meth:`setup` of an existing run
        (resume, ``eval``, ``predict --index``), so that the run sees its own data whatever
        became of the original files. Default: nothing."""
        return None

    def load_pretrained(
        self, model: nn.Module, weights: Mapping[str, Tensor], state: Mapping[str, Any]
    ) -> Any:
        """Start ``model`` (fresh from :meth:`build_model`) from a checkpoint's ``weights`` and
        task ``state`` (``--model.init``); returns a report with ``lines()`` for the log. The
        trainer calls it on a new run only, never on resume. Default: not supported.

        Raises:
            NotImplementedError: the task cannot start from another model's weights.
        """
        raise NotImplementedError(
            f"task {self._label()} cannot start from a checkpoint's weights (model.init)"
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

    def select(
        self, metrics: Mapping[str, float], history: Sequence[Mapping[str, Any]]
    ) -> tuple[bool, bool] | None:
        """A selection rule that needs more than the best score so far: ``(best, progress)``.

        For a dev evaluation with ``metrics``, given the earlier evaluations' ``history`` rows
        (``metrics.csv``'s, with ``dev_<metric>`` keys): ``best`` saves the model as
        ``best.pt``, ``progress`` resets early stopping's counter (GAT's rule: best when dev
        accuracy and dev loss are both at their best so far, progress while either is).
        ``None`` (the default): the usual rule, :meth:`is_better` on :meth:`score`, where a
        new best is the only progress.
        """
        return None

    def _label(self) -> str:
        return repr(self.name or type(self).__name__)
