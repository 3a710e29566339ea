"""The :class:`Task` interface: what the trainer and the commands need to know about a task.

A task is *data + input encoder + encoder + head + metric*. The trainer
(:class:`attnlab.train.Trainer`) and the commands (:mod:`attnlab.commands`: ``train``,
``eval``, ``predict``, ``show``) only ever talk to this interface, so a new task, whatever its
input kind (sentences, wav files, SMILES strings, node ids, images), is one class listed in
:data:`attnlab.tasks.TASKS`; neither the trainer nor the command line is touched.

Life cycle, as the trainer drives it::

    task = TASKS.get(cfg.task)()
    task.load_state_dict(saved)          # only when resuming / reloading (vocabularies)
    task.setup(cfg.task_options)         # load data; build vocabularies from train if not loaded
    splits = task.splits()               # {"train": [...], "dev": [...], "test": [...]}
    model = task.build_model(cfg.model)
    batch = task.collate(examples)       # dict of padded tensors, with "lengths"
    loss_sum, units = task.loss(model, batch)
    metrics = task.evaluate(model, batches)   # {task.metric_name: ..., ...}

and as the commands drive it, on a task and model rebuilt from a checkpoint::

    x = task.parse_input("I saw a saw .")           # predict / show: one user input
    # (a task's own flags, e.g. ``--node 12``: add_arguments + command_inputs)
    records = task.predict(model, [x])              # one JSON-friendly dict per input
    print(task.format_text(records[0]))             # or task.format_json(...) with --json
    task.draw(model, x, "saw.png", title=...)       # show: attention_map(...) as a picture
    examples = task.read_examples("dev.conllu")     # eval --data: labelled examples

A task only ever sees its own settings: ``setup`` gets the options dataclass of
:meth:`Task.default_options` and ``build_model`` the model configuration of
:meth:`Task.default_model_config`, never the whole run configuration.

Losses are *sums* over units (tokens for tagging, sequences for classification) and come with
their unit count, so the trainer divides by the total count of a whole optimizer step: averaging
across gradient-accumulation micro-batches and across DDP ranks is then exact (it equals the
big-batch gradient), whatever the padding or the split.
"""

from __future__ import annotations

import argparse
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypeVar

import torch
from torch import Tensor, nn

__all__ = ["Task", "AttentionMap", "classification_metrics", "options_as"]

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


class AttentionMap(NamedTuple):
    """The attention of a model on one input, ready to draw.

    Attributes:
        weights: per layer, the ``(h, i, j)`` attention weights (rows: queries, columns: keys).
        queries: the ``i`` axis labels (a word, a frame time, an atom symbol, a node id, ...).
        keys: the ``j`` axis labels.
    """

    weights: list[Tensor]
    queries: list[str]
    keys: list[str]


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

    The commands' methods (:meth:`parse_input`, :meth:`predict`, :meth:`format_text`,
    :meth:`format_json`, :meth:`attention_map`, :meth:`draw`, :meth:`read_examples`) run on a
    task restored by :meth:`load_state_dict` and a model from :meth:`build_model`, without
    :meth:`setup` (no training data is loaded). Their defaults suit text: a user input is a
    whitespace-tokenised sentence and a record ``{"tokens", "tags"}`` or ``{"label"}``; a task
    of another input kind overrides :meth:`parse_input` (a wav path, a SMILES string, a node id,
    an image path) and whichever renderings differ.
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
    def default_train_options(cls) -> dict[str, Any]:
        """The task's training recipe: ``TrainConfig`` fields that differ from the trainer's
        defaults (e.g. a full-batch graph task's lr, epochs and patience). Command-line
        ``--train.X`` overrides still win. Default: none."""
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

    # ---------------------------------------------------------------- commands: inputs
    def add_arguments(self, parser: argparse.ArgumentParser, command: str) -> None:
        """Declare this task's own flags of ``predict`` and ``show`` (``--node 12``,
        ``--beam 5``, ``--stream``, ``--index 17``, ...). Default: none.

        The commands parse what follows the checkpoint with ``parser`` (built after the
        checkpoint names the task), then pass the flags, by their ``dest`` names, to
        :meth:`command_inputs` (as a dict) and to :meth:`predict` and :meth:`draw` (as keyword
        arguments). A task that declares no flag is called with the plain signatures.

        Args:
            parser: the command's parser; its positional ``inputs`` is already declared.
            command: ``"predict"`` or ``"show"``.
        """
        return None  # no flags of its own

    def command_inputs(self, texts: Sequence[str], options: Mapping[str, Any]) -> list:
        """The parsed inputs of a ``predict`` / ``show`` command line.

        Default: :meth:`parse_input` of every text. A task whose inputs come from its own flags
        (a graph task's ``--node`` ids, an image task's ``--index``) overrides this.

        Args:
            texts: the positional inputs (for ``show``, its words joined into one text).
            options: the task's flags (:meth:`add_arguments`), by ``dest`` name.

        Raises:
            ValueError: no inputs.
        """
        if not texts:
            raise ValueError(
                f"{self._label()}: no inputs given: pass inputs as arguments, or '-' and one "
                "per line"
            )
        return [self.parse_input(text) for text in texts]

    def parse_input(self, text: str) -> Any:
        """One user input, as typed on the command line, to what :meth:`predict` takes.

        Default (text): the whitespace-separated tokens of a sentence. Other input kinds read a
        path (wav, image), a SMILES string or a node id here, and raise a ``ValueError`` naming
        the input when it is unusable.

        Raises:
            ValueError: an empty text.
        """
        tokens = text.split()
        if not tokens:
            raise ValueError(f"{self._label()}: empty input {text!r}; give at least one word")
        return tokens

    def encode_inputs(self, inputs: Sequence[Any]) -> dict[str, Tensor]:
        """The model's batch (no labels) for parsed inputs; what :meth:`attention_map` feeds
        the model. Default: not available (a task that draws its own picture needs none)."""
        raise NotImplementedError(f"task {self._label()} does not encode inputs for a model")

    def input_labels(self, input: Any) -> list[str]:
        """Axis labels of one parsed input's positions. Default (text): the tokens."""
        return [str(token) for token in input]

    def read_examples(self, path: str | Path) -> list:
        """Labelled examples (as :meth:`collate` takes them) from an evaluation file.

        A file that is empty, or not in a format of this task (e.g. a sentence-classification
        file given to a tagger), raises a ``ValueError`` naming the file and what was expected.
        """
        raise NotImplementedError(f"task {self._label()} cannot read evaluation files")

    # ---------------------------------------------------------------- commands: outputs
    def predict(self, model: nn.Module, inputs: Sequence[Any]) -> list[dict[str, Any]]:
        """One JSON-friendly record per parsed input (``{"tokens": [...], "tags": [...]}``,
        ``{"label": ...}``, ...)."""
        raise NotImplementedError(f"task {self._label()} does not implement predict")

    def format_text(self, record: Mapping[str, Any]) -> str:
        """A record as one line for people. Default: ``word/TAG ...`` for a record with
        ``tokens`` and ``tags``, the ``label`` for one with a label, else the JSON line."""
        if "tags" in record and "tokens" in record:
            return " ".join(f"{w}/{t}" for w, t in zip(record["tokens"], record["tags"]))
        if "label" in record:
            return str(record["label"])
        return self.format_json(record)

    def format_json(self, record: Mapping[str, Any]) -> str:
        """A record as one line of JSON (``predict --json``)."""
        return json.dumps(dict(record))

    @torch.no_grad()
    def attention_map(self, model: nn.Module, input: Any) -> AttentionMap:
        """The model's per-layer attention on one parsed input, with the axis labels.

        Default: runs ``model(encode_inputs([input]), need_weights=True)`` (the lab's
        :class:`~attnlab.models.SequenceModel` protocol) and labels both axes with
        :meth:`input_labels`.

        Raises:
            ValueError: the model has no attention weights (a CNN, RNN or window encoder).
        """
        model.eval()
        out = model(self.encode_inputs([input]), need_weights=True)
        weights = getattr(out, "weights", None)
        if not weights:
            encoder = type(getattr(model, "encoder", model)).__name__
            raise ValueError(f"this model's encoder ({encoder}) has no attention weights to show")
        labels = self.input_labels(input)
        return AttentionMap([w[0] for w in weights], labels, labels)

    def draw(
        self, model: nn.Module, input: Any, out: str | Path, *, title: str = "", **options: Any
    ) -> Path:
        """Draw the attention on one parsed input into the PNG ``out`` and return its path.

        Default: one heatmap per layer and head of :meth:`attention_map`
        (:func:`attnlab.viz.plot_attention`). Tasks with a natural picture of their input (a
        spectrogram, a molecule, a graph neighbourhood, an image) override this; ``options``
        are the task's own ``show`` flags (:meth:`add_arguments`), unused by the default.
        """
        from attnlab.viz import plot_attention

        attn = self.attention_map(model, input)
        return plot_attention(attn.weights, attn.keys, out, title=title, query_tokens=attn.queries)

    def _label(self) -> str:
        return repr(self.name or type(self).__name__)
