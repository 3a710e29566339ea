"""What the text tasks share: word and character vocabularies, encoding, the model family of
:mod:`attnlab.lab.models`, and reading their options and local files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from attnlab.lab.data.own import complete_splits
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
from attnlab.lab.tasks.text.files import (
    DataOptions,
    data_files,
    save_splits,
    saved_splits,
)

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
    predict_batch = 64  # sentences per predict call, of similar lengths

    def __init__(self) -> None:
        self.vocab: Vocabulary | None = None
        self.chars: CharVocabulary | None = None
        self.labels: list[str] = []
        self.model_cfg: ModelConfig = ModelConfig()
        self._splits: dict[str, list] = {}
        self.reading: dict[str, str] | None = None  # how the run read the user's files
        self._saved: dict[str, Path] | None = None  # the splits the run kept (load_run_data)
        self._files: tuple[DataOptions, dict[str, str]] | None = None  # what save_run_data names
        self.split_paths: dict[str, str] = {}  # the file of each split read (file_splits)

    # -- the user's files (--data.train=FILE) ------------------------------------------------

    saved_ext = ".txt"  # the extension of the splits a run keeps, in a format the task reads

    def render_split(self, examples: list) -> str:
        """A split as the text of the file a run keeps (read back by :meth:`read_saved`)."""
        raise NotImplementedError

    def read_saved(self, path: Path) -> list:
        """The raw examples of a split a run kept (:meth:`render_split`)."""
        raise NotImplementedError

    def file_splits(self, data: DataOptions, read: Callable[[str], list]) -> tuple[dict, list]:
        """The raw splits of the user's files (``read`` reads one), or of the copy the run kept
        (:meth:`load_run_data`): dev and test cut from train when not given
        (:func:`~attnlab.lab.data.own.complete_splits`).

        Returns:
            ``(splits, from_train)``: the splits, and the names of those that came from the
            train file (its labels are the task's); ``split_paths`` names each split's file.
        """
        if self._saved is not None:
            self.split_paths = {s: str(p) for s, p in self._saved.items()}
            return {s: self.read_saved(p) for s, p in self._saved.items()}, ["train"]
        files = data_files(data)
        self.split_paths = {s: files.get(s, files["train"]) for s in ("train", "dev", "test")}
        raw = {split: read(path) for split, path in files.items()}
        splits, sources, cut = complete_splits(raw, files, data.split, data.seed)
        self._files = (data, sources)
        self.reading = data.reading()
        return splits, ["train", *cut]

    def load_run_data(self, run_dir: str | Path) -> None:
        """Read the splits from what the run ``run_dir`` kept of the user's files, if it did."""
        self._saved = saved_splits(run_dir)

    def save_run_data(self, run_dir: str | Path) -> None:
        """Keep the splits read from the user's files in ``run_dir/data/``."""
        if self._files is not None:
            data, sources = self._files
            save_splits(run_dir, self._splits, self.render_split, self.saved_ext, sources, data)

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
        state = {"vocab": self.vocab.state_dict(), "chars": self.chars.state_dict(),
                 "labels": list(self.labels)}  # fmt: skip
        if self.reading is not None:
            state["reading"] = dict(self.reading)
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.vocab = Vocabulary.from_state_dict(state["vocab"])
        self.chars = CharVocabulary.from_state_dict(state["chars"])
        self.labels = list(state["labels"])
        self.reading = dict(state["reading"]) if "reading" in state else None

    def read_option(self, name: str) -> str:
        """How the run read its files (``column``, ``text_column``, ``label_column``): the
        run's, else the default."""
        return (self.reading or DataOptions().reading())[name]
