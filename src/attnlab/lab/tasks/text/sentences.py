"""Sentence classification (N -> 1): :class:`SentenceTask` and the ``sst2``, ``sst5`` and
``trec`` tasks on it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.data import SENTENCE_LABELS, load_sentences
from attnlab.lab.data.own import keep_unseen
from attnlab.lab.data.readers import (
    TABLE_FORMATS,
    LabelledRow,
    classification_rows,
    read_labelled_table,
    table_format,
)
from attnlab.lab.models import ModelConfig
from attnlab.lab.tasks.base import classification_metrics
from attnlab.lab.tasks.text.base import TextTask, options_as
from attnlab.lab.tasks.text.files import DataOptions, as_data_options

#: what ``data.format`` may name for sentence classification (``sentences``: label sentence)
CLASSIFICATION_FORMATS = ("auto", *TABLE_FORMATS, "sentences")

__all__ = ["SentenceTask", "SST2Task", "SST5Task", "TRECTask", "SentenceOptions"]


@dataclass
class SentenceOptions:
    """Options of the sentence-classification tasks.

    Args:
        min_count: words seen fewer times in train become ``<unk>``.
        lowercase: lowercase words before lookup.
        train_file: read the training sentences from this local ``label sentence`` file
            instead of the task's corpus (labels index the corpus's classes); the older
            spelling of data.train, which cuts no dev or test split.
        dev_file: with ``train_file``: the dev sentences (none: no dev split).
        test_file: with ``train_file``: the test sentences (none: no test split).
        data: your own files (CSV, TSV, JSON lines, label sentence), ``--data.train=FILE``.
    """

    min_count: int = 1
    lowercase: bool = False
    train_file: str = ""
    dev_file: str = ""
    test_file: str = ""
    data: DataOptions = field(default_factory=DataOptions)


def legacy_files(opts: SentenceOptions) -> DataOptions:
    """``opts.data``, or the older ``train_file`` (and ``dev_file``, ``test_file``) as data
    options that cut nothing."""
    data = as_data_options(opts.data)
    if opts.train_file and not data.train:
        files = {"train": opts.train_file, "dev": opts.dev_file, "test": opts.test_file}
        return replace(data, **files, split=(0.0, 0.0))
    if opts.train_file or opts.dev_file or opts.test_file:
        raise ValueError(
            "task_options.dev_file/test_file are read only with task_options.train_file, and "
            "none of them with --data.train"
        )
    return data


class SentenceTask(TextTask):
    """One label per sentence (N -> 1), accuracy."""

    unit = "seq"
    output = "sequence"
    corpus = ""

    @classmethod
    def default_options(cls) -> SentenceOptions:
        return SentenceOptions()

    @classmethod
    def default_model_config(cls) -> ModelConfig:
        cfg = ModelConfig()
        cfg.encoder.positional = "sinusoidal"
        cfg.encoder.dropout = 0.2
        cfg.head.pooling = "attention"
        return cfg

    def setup(self, options: SentenceOptions) -> None:
        opts = options_as(type(self.default_options()), options)
        data = self.data_options(opts)
        if data.train:  # the user's files (or the copy the run kept of them)
            if data.format not in CLASSIFICATION_FORMATS:
                raise ValueError(
                    f"data.format: a sentence task reads {', '.join(CLASSIFICATION_FORMATS)}; "
                    f"got {data.format!r}"
                )
            rows, from_train = self.file_splits(data, lambda path: self.read_rows(path, data))
            if not self.labels:
                self.labels = self.train_labels([r for s in from_train for r in rows[s]])
                if data.unseen == "keep":  # a corpus task's digits are its classes' indices
                    others = (r.label for s in rows if s not in from_train for r in rows[s]
                              if not (self.corpus and r.label.isdigit()))  # fmt: skip
                    self.labels = keep_unseen(self.labels, others)
            splits = {s: self.labelled(self.split_paths[s], part) for s, part in rows.items()}
        else:
            corpus = load_sentences(self.corpus)
            splits = {"train": list(corpus.train), "dev": list(corpus.dev),
                      "test": list(corpus.test)}  # fmt: skip
            if not self.labels:
                self.labels = list(corpus.labels)
        self._splits = splits
        self._build_vocab([s for s, _ in splits["train"]], opts.min_count, opts.lowercase)

    # -- the user's files --------------------------------------------------------------------

    saved_ext = ".jsonl"

    def data_options(self, opts: SentenceOptions) -> DataOptions:
        """The user's files of ``opts`` (:func:`legacy_files`)."""
        return legacy_files(opts)

    def train_labels(self, rows: Sequence[LabelledRow]) -> list[str]:
        """The task's classes (a corpus task's own: its files' labels must be among them)."""
        return list(SENTENCE_LABELS[self.corpus])

    def read_rows(self, path: str | Path, data: DataOptions | None = None) -> list[LabelledRow]:
        """The labelled sentences of a file: a CSV, TSV or JSON-lines table (by ``data.format``
        or the extension), else ``label sentence`` lines."""
        fmt = data.format if data is not None else "auto"
        fmt = (table_format(path) or "sentences") if fmt == "auto" else fmt
        if fmt == "sentences":
            return classification_rows(path)
        column, label = (self.read_option("text_column"), self.read_option("label_column"))
        if data is not None:
            column, label = data.text_column, data.label_column
        return read_labelled_table(path, column, label, fmt)

    def labelled(self, path: str | Path, rows: Sequence[LabelledRow]) -> list:
        """``(tokens, class index)`` of each row; a label outside the classes is an error naming
        the file and its line."""
        index = {label: i for i, label in enumerate(self.labels)}
        out = []
        for row in rows:
            if row.label not in index and not (row.label.isdigit() and self.corpus):
                raise ValueError(
                    f"{path}: label {row.label!r} is not one of the labels of the train file "
                    f"({', '.join(self.labels)}), at line {row.line}"
                )
            y = index[row.label] if row.label in index else int(row.label)
            if y >= len(self.labels):
                raise ValueError(
                    f"{path}: label {y} is outside the {len(self.labels)} classes of "
                    f"{self.name or self.corpus} (0 to {len(self.labels) - 1}: "
                    f"{', '.join(self.labels)}), at line {row.line}"
                )
            out.append((row.tokens, y))
        return out

    def render_split(self, examples: list) -> str:
        return "".join(json.dumps({"text": " ".join(tokens), "label": self.labels[y]},
                                  ensure_ascii=False) + "\n" for tokens, y in examples)  # fmt: skip

    def read_saved(self, path: Path) -> list:
        return read_labelled_table(path, fmt="jsonl") if path.stat().st_size else []

    def read_examples(self, path: str | Path) -> list:
        """``(tokens, label)`` pairs of a CSV / TSV / JSON-lines table (the run's columns) or a
        ``label sentence`` file, labels checked against the model's classes.

        Raises:
            ValueError: not a sentence-classification file (e.g. a tagging file); a label
                outside the model's classes.
        """
        return self.labelled(path, self.read_rows(path))

    def batch_size_of(self, example) -> int:
        return len(example[0])

    def collate(self, examples: list) -> dict[str, Tensor]:
        batch = self.encode([tokens for tokens, _ in examples])
        batch["labels"] = torch.tensor([label for _, label in examples], dtype=torch.long)
        return batch

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        logits = model(batch)  # (b, L)
        loss = F.cross_entropy(logits.float(), batch["labels"], reduction="sum")
        return loss, batch["labels"].numel()

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        return classification_metrics((model(b), b["labels"]) for b in batches)

    def example_input(self, example: Any) -> tuple[list[str], str]:
        tokens, label = example
        return list(tokens), self.labels[int(label)]

    @torch.no_grad()
    def predict(self, model: nn.Module, sentences: Sequence[Sequence[str]]) -> list[dict]:
        """Classify sentences: ``[{"tokens": [...], "label": ..., "probabilities": {label: p}},
        ...]``."""
        model.eval()
        probs = model(self.encode(sentences)).float().softmax(-1)
        return [{"tokens": list(s), "label": self.labels[int(p.argmax())],
                 "probabilities": {c: round(float(q), 4) for c, q in zip(self.labels, p)}}
                for s, p in zip(sentences, probs)]  # fmt: skip


class SST2Task(SentenceTask):
    """SST-2 binary sentiment of movie-review sentences (Socher et al. 2013)."""

    name = "sst2"
    corpus = "sst2"


class SST5Task(SentenceTask):
    """SST-5 five-way sentiment of movie-review sentences (Socher et al. 2013)."""

    name = "sst5"
    corpus = "sst5"


class TRECTask(SentenceTask):
    """TREC question classification, 6 coarse types (Li & Roth 2002)."""

    name = "trec"
    corpus = "trec"
