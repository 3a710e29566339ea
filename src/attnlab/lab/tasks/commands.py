"""``TaskCommands``: what the commands need of a task, apart from what training needs.

The trainer needs :class:`~attnlab.lab.tasks.base.Task` only. ``attnlab predict``, ``show`` and
``eval --data`` also need a task to read a user's input and render its prediction, which is
this interface; a task that serves them inherits both (``class SpeechTask(Task,
TaskCommands)``), one that only trains (a toy, a benchmark) writes nothing of this.

As the commands drive it, on a task and model rebuilt from a checkpoint::

    x = task.parse_input("I saw a saw .")           # predict / show: one user input
    # (a task's own flags, e.g. ``--node 12``: add_arguments + command_inputs)
    records = task.predict(model, [x])              # one JSON-friendly dict per input
    print(task.format_text(records[0]))             # or task.format_json(...) with --json
    task.draw(model, x, "saw.png", title=...)       # show: attention_map(...) as a picture
    examples = task.read_examples("dev.conllu")     # eval --data: labelled examples

These methods run on a task restored by :meth:`~attnlab.lab.tasks.base.Task.load_state_dict` and a
model from :meth:`~attnlab.lab.tasks.base.Task.build_model`, without ``setup`` (no training data is
loaded). Their defaults suit text: a user input is a whitespace-tokenised sentence and a record
``{"tokens", "tags"}`` or ``{"label"}``; a task of another input kind overrides
:meth:`TaskCommands.parse_input` (a wav path, a SMILES string, a node id, an image path) and
whichever renderings differ.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from attnlab.viz import AttentionView

__all__ = ["AttentionMap", "TaskCommands"]


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


class TaskCommands:
    """The commands' interface of a task (module docstring); mixed into a
    :class:`~attnlab.lab.tasks.base.Task`."""

    name: ClassVar[str] = ""
    #: ``predict``'s inputs per call, in batches of similar :meth:`input_size` (so that a file
    #: of thousands of sentences is neither one batch padded to its longest nor a call per
    #: line); None: one call with every input (e.g. a graph's nodes, which share one forward)
    predict_batch: ClassVar[int | None] = None

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

    def example_input(self, example: Any) -> tuple[Any, str]:
        """A labelled example of a split (as :meth:`splits` holds it) as :meth:`predict`'s
        input, with its gold answer as text: what ``predict RUN --index N`` and ``show RUN
        --index N`` feed the model (example ``N`` of the test split). Default: not available.
        """
        raise NotImplementedError(
            f"task {self._label()} does not take --index (an example of its test split); pass "
            "an input instead"
        )

    def read_examples(self, path: str | Path) -> list:
        """Labelled examples (as :meth:`collate` takes them) from an evaluation file.

        A file that is empty, or not in a format of this task (e.g. a sentence-classification
        file given to a tagger), raises a ``ValueError`` naming the file and what was expected.
        """
        raise NotImplementedError(f"task {self._label()} cannot read evaluation files")

    def input_size(self, input: Any) -> int:
        """What sorts ``predict``'s inputs into batches (:attr:`predict_batch`): its length."""
        return len(input)

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
        :class:`~attnlab.lab.models.SequenceModel` protocol) and labels both axes with
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

    def attention_view(
        self, model: nn.Module, input: Any, *, title: str = "", **options: Any
    ) -> AttentionView:
        """The model's attention on one parsed input as an interactive page's data
        (:class:`attnlab.viz.AttentionView`: ``show --html``).

        Default: :meth:`attention_map` as one self-attention family labelled by the input's
        tokens, with the prediction (:meth:`predict`, :meth:`format_text`). Tasks with a
        picture of their input (a spectrogram, an image, a graph, a molecule) or several
        attentions (an encoder-decoder) override this; ``options`` are the task's ``show``
        flags.
        """
        from attnlab.viz import Attention, AttentionView

        attn = self.attention_map(model, input)
        try:
            prediction = self.format_text(self.predict(model, [input])[0])
        except NotImplementedError:
            prediction = ""
        return AttentionView(
            Attention("self-attention", attn.weights, attn.queries, attn.keys),
            title=title, prediction=prediction,
        )  # fmt: skip

    def draw(
        self, model: nn.Module, input: Any, out: str | Path, *, title: str = "", **options: Any
    ) -> Path:
        """Draw the attention on one parsed input into the PNG ``out`` and return its path.

        Default: one heatmap per layer and head of :meth:`attention_map`
        (:func:`attnlab.lab.viz.plot_attention`). Tasks with a natural picture of their input (a
        spectrogram, a molecule, a graph neighbourhood, an image) override this; ``options``
        are the task's own ``show`` flags (:meth:`add_arguments`), unused by the default.
        The title's second line is the prediction (:meth:`predict`, :meth:`format_text`:
        ``word/TAG ...`` or the label), where the task predicts.
        """
        from attnlab.lab.viz import plot_attention

        attn = self.attention_map(model, input)
        try:
            record = self.predict(model, [input])[0]
        except NotImplementedError:  # a task that draws but does not predict
            record = None
        if record is not None:
            title = f"{title}\npredicted: {self.format_text(record)}".strip()
        # The encoder's window / causal structure: pairs it never scores are drawn as masked.
        encoder = getattr(model, "encoder", None)
        structure = getattr(encoder, "attention_mask", None)
        mask = structure() if callable(structure) else None
        n_i, n_j = attn.weights[0].shape[-2:] if attn.weights else (0, 0)
        masked, why = None, []
        if mask is not None and (n_i, n_j) == (len(attn.queries), len(attn.keys)):
            masked = ~mask.dense(1, 1, n_i, n_j).expand(1, 1, n_i, n_j)[0, 0]  # (i, j)
            if getattr(encoder, "window", None) is not None:
                why.append(f"|i - j| > {encoder.window}")
            if getattr(encoder, "causal", False):
                why.append("j > i")
        label = f"masked pair ({' or '.join(why)})" if why else "masked pair"
        return plot_attention(attn.weights, attn.keys, out, title=title, query_tokens=attn.queries,
                              masked=masked, masked_label=label)  # fmt: skip

    def _label(self) -> str:
        return repr(self.name or type(self).__name__)
