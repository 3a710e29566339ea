"""Text tasks on real corpora: part-of-speech tagging (N -> N) and sentence classification
(N -> 1). Both share vocabularies (words, characters) and the model family of
:mod:`attnlab.models`; they differ in the head, the labels and the unit of the loss.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.data import load_sentences, load_tagging
from attnlab.models import (
    CharVocabulary,
    ModelConfig,
    Vocabulary,
    build_model,
    encode_batch,
)

from .base import Task, register_task

__all__ = ["PosTask", "SentenceTask", "TaggingOptions", "SentenceOptions"]

IGNORE = -100  # label of padded positions


def _unwrap(model: nn.Module) -> nn.Module:
    return getattr(model, "module", model)


class _TextTask(Task):
    """Vocabularies and batching shared by the text tasks."""

    output = "token"

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
        """Token lists -> model inputs (no labels)."""
        assert self.vocab is not None, "call setup() or load_state_dict() first"
        cfg = self.model_cfg.input
        uses_chars = cfg.kind == "embedding" and cfg.char_features
        return encode_batch(
            sentences, self.vocab, char_vocab=self.chars if uses_chars else None,
            shapes=cfg.shape_dim > 0,
        )  # fmt: skip

    def build_model(self, cfg) -> nn.Module:
        self.model_cfg = cfg.model
        return build_model(
            cfg.model, vocab_size=len(self.vocab), char_vocab_size=len(self.chars),
            num_labels=len(self.labels), output=self.output,
        )  # fmt: skip

    def splits(self) -> dict[str, list]:
        return self._splits

    def state_dict(self) -> dict[str, Any]:
        return {"vocab": self.vocab.state_dict(), "chars": self.chars.state_dict(),
                "labels": list(self.labels)}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.vocab = Vocabulary.from_state_dict(state["vocab"])
        self.chars = CharVocabulary.from_state_dict(state["chars"])
        self.labels = list(state["labels"])


@dataclass
class TaggingOptions:
    """Options of the ``pos`` task.

    Args:
        corpus: ``brown`` (default), ``ud-ewt``, ``ud-atis`` or ``conll2000``.
        tagset: ``auto`` (Brown: the 12 universal tags; UD: UPOS; CoNLL-2000: Penn tags),
            ``universal`` or ``native``.
        min_count: words seen fewer times in train become ``<unk>``.
        max_train_sentences: use only the first N train sentences (0: all).
    """

    corpus: str = "brown"
    tagset: str = "auto"
    min_count: int = 1
    max_train_sentences: int = 0


@register_task("pos")
class PosTask(_TextTask):
    """Part-of-speech tagging: one tag per word (N -> N), token accuracy."""

    unit = "tok"
    output = "token"

    @classmethod
    def default_options(cls) -> TaggingOptions:
        return TaggingOptions()

    def setup(self, cfg) -> None:
        opts: TaggingOptions = cfg.task_options
        self.model_cfg = cfg.model
        tagset = opts.tagset
        if tagset == "auto":
            tagset = "native" if opts.corpus == "conll2000" else "universal"
        corpus = load_tagging(opts.corpus, tagset)
        train = list(corpus.train)
        if opts.max_train_sentences:
            train = train[: opts.max_train_sentences]
        self._splits = {"train": train, "dev": list(corpus.dev), "test": list(corpus.test)}
        self._build_vocab([s for s, _ in train], opts.min_count)
        if not self.labels:
            self.labels = corpus.tags()

    def batch_size_of(self, example) -> int:
        return len(example[0])

    def collate(self, examples: list) -> dict[str, Tensor]:
        batch = self.encode([tokens for tokens, _ in examples])
        index = {t: i for i, t in enumerate(self.labels)}
        labels = torch.full(batch["tokens"].shape, IGNORE, dtype=torch.long)  # (b, n)
        for i, (_, tags) in enumerate(examples):
            labels[i, : len(tags)] = torch.tensor([index[t] for t in tags], dtype=torch.long)
        batch["labels"] = labels
        return batch

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        logits = model(batch)  # (b, n, L)
        labels = batch["labels"]
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), reduction="sum",
                               ignore_index=IGNORE)  # fmt: skip
        return loss, (labels != IGNORE).sum()

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        correct = total = oov_correct = oov_total = 0
        loss = 0.0
        for batch in batches:
            logits = model(batch)
            labels = batch["labels"]
            valid = labels != IGNORE
            loss += F.cross_entropy(logits[valid].float(), labels[valid], reduction="sum").item()
            hit = (logits.argmax(-1) == labels) & valid
            oov = (batch["tokens"] == 1) & valid  # <unk> id: words unseen in training
            correct += int(hit.sum())
            total += int(valid.sum())
            oov_correct += int((hit & oov).sum())
            oov_total += int(oov.sum())
        return {
            "accuracy": correct / max(total, 1),
            "oov_accuracy": oov_correct / max(oov_total, 1),
            "oov_rate": oov_total / max(total, 1),
            "loss": loss / max(total, 1),
            "tokens": float(total),
        }

    @torch.no_grad()
    def predict(self, model: nn.Module, sentences: Sequence[Sequence[str]]) -> list[dict]:
        """Tag whitespace-tokenised sentences: ``[{"tokens": [...], "tags": [...]}, ...]``."""
        model.eval()
        batch = self.encode(sentences)
        ids = model(batch).argmax(-1)  # (b, n)
        return [
            {"tokens": list(s), "tags": [self.labels[int(t)] for t in ids[i, : len(s)]]}
            for i, s in enumerate(sentences)
        ]


@dataclass
class SentenceOptions:
    """Options of the sentence-classification tasks.

    Args:
        min_count: words seen fewer times in train become ``<unk>``.
        lowercase: lowercase words before lookup.
    """

    min_count: int = 1
    lowercase: bool = False


class SentenceTask(_TextTask):
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

    def setup(self, cfg) -> None:
        self.model_cfg = cfg.model
        corpus = load_sentences(self.corpus)
        self._splits = {"train": list(corpus.train), "dev": list(corpus.dev),
                        "test": list(corpus.test)}  # fmt: skip
        opts: SentenceOptions = cfg.task_options
        self._build_vocab([s for s, _ in corpus.train], opts.min_count, opts.lowercase)
        if not self.labels:
            self.labels = list(corpus.labels)

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
        correct = total = 0
        loss = 0.0
        for batch in batches:
            logits = model(batch).float()
            loss += F.cross_entropy(logits, batch["labels"], reduction="sum").item()
            correct += int((logits.argmax(-1) == batch["labels"]).sum())
            total += batch["labels"].numel()
        return {"accuracy": correct / max(total, 1), "loss": loss / max(total, 1)}

    @torch.no_grad()
    def predict(self, model: nn.Module, sentences: Sequence[Sequence[str]]) -> list[dict]:
        """Classify sentences: ``[{"tokens": [...], "label": ...}, ...]``."""
        model.eval()
        batch = self.encode(sentences)
        ids = model(batch).argmax(-1)
        return [{"tokens": list(s), "label": self.labels[int(i)]} for s, i in zip(sentences, ids)]


@register_task("sst2")
class SST2Task(SentenceTask):
    """SST-2 binary sentiment of movie-review sentences (Socher et al. 2013)."""

    corpus = "sst2"


@register_task("sst5")
class SST5Task(SentenceTask):
    """SST-5 five-way sentiment of movie-review sentences (Socher et al. 2013)."""

    corpus = "sst5"


@register_task("trec")
class TRECTask(SentenceTask):
    """TREC question classification, 6 coarse types (Li & Roth 2002)."""

    corpus = "trec"
