"""What the text tasks share: word and character vocabularies, encoding, the model family of
:mod:`attnlab.lab.models`, and reading their options and local files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch import Tensor, nn

from attnlab.lab.models import (
    CharVocabulary,
    ModelConfig,
    Vocabulary,
    build_model,
    encode_batch,
)
from attnlab.lab.models.transfer import TransferReport, transfer_weights, vocab_rows
from attnlab.lab.tasks.base import Task, options_as
from attnlab.lab.tasks.commands import TaskCommands

__all__ = ["TextTask", "options_as", "read_split_files"]


def read_split_files(
    train_file: str, dev_file: str, test_file: str, read: Callable[[str], list]
) -> dict[str, list]:
    """The splits of local files: a split without a file is empty."""
    files = {"train": train_file, "dev": dev_file, "test": test_file}
    return {split: list(read(path)) if path else [] for split, path in files.items()}


class TextTask(Task, TaskCommands):
    """Vocabularies and batching shared by the text tasks."""

    output = "token"  # the head: one label per token ("token") or per sentence ("sequence")

    def __init__(self) -> None:
        self.vocab: Vocabulary | None = None
        self.chars: CharVocabulary | None = None
        self.labels: list[str] = []
        self.model_cfg: ModelConfig = ModelConfig()
        self._splits: dict[str, list] = {}

    @classmethod
    def default_model_config(cls) -> ModelConfig:
        return ModelConfig()

    def _build_vocab(
        self, train: Sequence[Sequence[str]], min_count: int, lowercase: bool = False
    ) -> None:
        if self.vocab is None:
            self.vocab = Vocabulary.build(train, min_count=min_count, lowercase=lowercase)
            self.chars = CharVocabulary.build(train)

    def encode(self, sentences: Sequence[Sequence[str]]) -> dict[str, Tensor]:
        """Token lists -> model inputs (no labels), as the model configuration of
        :meth:`build_model` reads them (characters and word shapes only if it uses them)."""
        if self.vocab is None:
            raise RuntimeError(f"{type(self).__name__}: call setup() or load_state_dict() first")
        cfg = self.model_cfg.input
        uses_chars = cfg.kind == "embedding" and cfg.char_features
        return encode_batch(
            sentences, self.vocab, char_vocab=self.chars if uses_chars else None,
            shapes=cfg.shape_dim > 0,
        )  # fmt: skip

    def encode_inputs(self, inputs: Sequence[Sequence[str]]) -> dict[str, Tensor]:
        return self.encode(inputs)

    def build_model(self, model_config: ModelConfig) -> nn.Module:
        """A :class:`~attnlab.lab.models.SequenceModel` for ``model_config``; :meth:`encode` (and
        so :meth:`collate`) encodes inputs for it from now on."""
        self.model_cfg = model_config
        return build_model(
            model_config, vocab_size=len(self.vocab), char_vocab_size=len(self.chars),
            num_labels=len(self.labels), output=self.output,
        )  # fmt: skip

    def splits(self) -> dict[str, list]:
        return self._splits

    def load_pretrained(
        self, model: nn.Module, weights: Mapping[str, Tensor], state: Mapping[str, Any]
    ) -> TransferReport:
        """Copy a text model's weights by name (:func:`~attnlab.lab.models.transfer.
        transfer_weights`), the word and character embedding rows by their string, from the
        checkpoint's vocabularies in ``state``; the head stays fresh.

        Raises:
            ValueError: the checkpoint has no word vocabulary (not a text task's), or a
                parameter's shape differs.
        """
        if "vocab" not in state:
            raise ValueError(
                f"the checkpoint's task state has no word vocabulary (keys {sorted(state)}): "
                "start a text task from a text task's checkpoint (e.g. attnlab pretrain mlm)"
            )
        rows = {"inputs.embed.weight": vocab_rows(self.vocab, Vocabulary.from_state_dict(
            state["vocab"]))}  # fmt: skip
        if "chars" in state and self.chars is not None:
            chars = CharVocabulary.from_state_dict(state["chars"])
            rows["inputs.chars.embed.weight"] = vocab_rows(self.chars, chars)
        return transfer_weights(model, weights, rows=rows)

    def state_dict(self) -> dict[str, Any]:
        return {"vocab": self.vocab.state_dict(), "chars": self.chars.state_dict(),
                "labels": list(self.labels)}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.vocab = Vocabulary.from_state_dict(state["vocab"])
        self.chars = CharVocabulary.from_state_dict(state["chars"])
        self.labels = list(state["labels"])
