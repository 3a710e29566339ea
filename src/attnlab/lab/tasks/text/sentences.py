"""Sentence classification (N -> 1): :class:`SentenceTask` and the ``sst2``, ``sst5`` and
``trec`` tasks on it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.data import SENTENCE_LABELS, load_sentences
from attnlab.lab.data.readers import read_classification_file
from attnlab.lab.models import ModelConfig
from attnlab.lab.tasks.base import classification_metrics
from attnlab.lab.tasks.text.base import TextTask, options_as, read_split_files

__all__ = ["SentenceTask", "SST2Task", "SST5Task", "TRECTask", "SentenceOptions"]


@dataclass
class SentenceOptions:
    """Options of the sentence-classification tasks.

    Args:
        min_count: words seen fewer times in train become ``<unk>``.
        lowercase: lowercase words before lookup.
        train_file: read the training sentences from this local ``label sentence`` file
            instead of the task's corpus (labels index the corpus's classes).
        dev_file: with ``train_file``: the dev sentences (none: no dev split).
        test_file: with ``train_file``: the test sentences (none: no test split).
    """

    min_count: int = 1
    lowercase: bool = False
    train_file: str = ""
    dev_file: str = ""
    test_file: str = ""


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
        opts = options_as(SentenceOptions, options)
        if opts.train_file:
            labels = SENTENCE_LABELS[self.corpus]
            splits = read_split_files(opts.train_file, opts.dev_file, opts.test_file,
                                      self._read_labelled(labels))  # fmt: skip
        else:
            if opts.dev_file or opts.test_file:
                raise ValueError(
                    "task_options.dev_file/test_file are read only with task_options.train_file"
                )
            corpus = load_sentences(self.corpus)
            labels = corpus.labels
            splits = {"train": list(corpus.train), "dev": list(corpus.dev),
                      "test": list(corpus.test)}  # fmt: skip
        self._splits = splits
        self._build_vocab([s for s, _ in splits["train"]], opts.min_count, opts.lowercase)
        if not self.labels:
            self.labels = list(labels)

    def _read_labelled(self, labels: Sequence[str]) -> Callable[[str | Path], list]:
        def read(path: str | Path) -> list:
            examples = read_classification_file(path)
            bad = next((y for _, y in examples if y >= len(labels)), None)
            if bad is not None:
                with open(path, encoding="utf-8", errors="replace") as fh:  # its line, to fix it
                    lines = enumerate(fh, 1)
                    line = next((n for n, text in lines if text.split()[:1] == [str(bad)]), "?")
                raise ValueError(
                    f"{path}: label {bad} is outside the {len(labels)} classes of "
                    f"{self.name or self.corpus} (0 to {len(labels) - 1}: {', '.join(labels)}), "
                    f"at line {line}"
                )
            return examples

        return read

    def read_examples(self, path: str | Path) -> list:
        """``(tokens, label)`` pairs of a ``label sentence`` file, labels checked against the
        model's classes.

        Raises:
            ValueError: not a sentence-classification file (e.g. a tagging file); a label
                outside the model's classes.
        """
        return self._read_labelled(self.labels)(path)

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
