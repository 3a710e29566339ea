"""Text tasks on real corpora: part-of-speech tagging (N -> N) and sentence classification
(N -> 1). Both share vocabularies (words, characters) and the model family of
:mod:`attnlab.models`; they differ in the head, the labels and the unit of the loss.

Both read their corpus from the dataset registry (:mod:`attnlab.data`) or, with
``train_file`` (and optionally ``dev_file``, ``test_file``) in their options, from local files
in any format :func:`attnlab.data.readers.sniff_text_format` recognises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.data import SENTENCE_LABELS, TAGGING_CORPORA, load_sentences, load_tagging
from attnlab.data.readers import read_classification_file, read_tagging_file
from attnlab.models import (
    CharVocabulary,
    ModelConfig,
    Vocabulary,
    build_model,
    encode_batch,
)

from .base import Task

__all__ = [
    "PosTask",
    "SentenceTask",
    "SST2Task",
    "SST5Task",
    "TRECTask",
    "TaggingOptions",
    "SentenceOptions",
]

IGNORE = -100  # label of padded positions

OptionsT = TypeVar("OptionsT")


def _options(cls: type[OptionsT], options: Any) -> OptionsT:
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


def _read_files(
    train_file: str, dev_file: str, test_file: str, read: Callable[[str], list]
) -> dict[str, list]:
    """The splits of local files: a split without a file is empty."""
    files = {"train": train_file, "dev": dev_file, "test": test_file}
    return {split: list(read(path)) if path else [] for split, path in files.items()}


class _TextTask(Task):
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
        """A :class:`~attnlab.models.SequenceModel` for ``model_config``; :meth:`encode` (and
        so :meth:`collate`) encodes inputs for it from now on."""
        self.model_cfg = model_config
        return build_model(
            model_config, vocab_size=len(self.vocab), char_vocab_size=len(self.chars),
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
        corpus: ``brown`` (default), ``ud-ewt``, ``ud-atis``, ``conll2000``, or ``files``: the
            local files below.
        tagset: ``auto`` (Brown: the 12 universal tags; UD: UPOS; CoNLL-2000: Penn tags),
            ``universal`` or ``native``; local files keep their tags as written.
        min_count: words seen fewer times in train become ``<unk>``.
        max_train_sentences: use only the first N train sentences (0: all).
        train_file: with ``corpus="files"``: the training sentences (CoNLL-U, ``word/TAG`` or
            ``word TAG`` columns; see :func:`~attnlab.data.readers.read_tagging_file`).
        dev_file: with ``corpus="files"``: the dev sentences (none: no dev split).
        test_file: with ``corpus="files"``: the test sentences (none: no test split).
    """

    corpus: str = "brown"
    tagset: str = "auto"
    min_count: int = 1
    max_train_sentences: int = 0
    train_file: str = ""
    dev_file: str = ""
    test_file: str = ""


class PosTask(_TextTask):
    """Part-of-speech tagging: one tag per word (N -> N), token accuracy."""

    name = "pos"
    unit = "tok"
    output = "token"

    @classmethod
    def default_options(cls) -> TaggingOptions:
        return TaggingOptions()

    def setup(self, options: TaggingOptions) -> None:
        opts = _options(TaggingOptions, options)
        if opts.corpus == "files":
            if not opts.train_file:
                raise ValueError(
                    "task_options.corpus='files' needs task_options.train_file (and optionally "
                    "dev_file, test_file)"
                )
            splits = _read_files(opts.train_file, opts.dev_file, opts.test_file,
                                 read_tagging_file)  # fmt: skip
            tags = sorted({t for split in splits.values() for _, ts in split for t in ts})
        else:
            if opts.train_file or opts.dev_file or opts.test_file:
                raise ValueError(
                    f"task_options.train_file/dev_file/test_file are read only with "
                    f"task_options.corpus='files', got corpus={opts.corpus!r}"
                )
            if opts.corpus not in TAGGING_CORPORA:
                raise ValueError(
                    f"task_options.corpus must be one of {(*TAGGING_CORPORA, 'files')}, got "
                    f"{opts.corpus!r}"
                )
            tagset = opts.tagset
            if tagset == "auto":
                tagset = "native" if opts.corpus == "conll2000" else "universal"
            corpus = load_tagging(opts.corpus, tagset)
            splits = {"train": list(corpus.train), "dev": list(corpus.dev),
                      "test": list(corpus.test)}  # fmt: skip
            tags = corpus.tags()
        if opts.max_train_sentences:
            splits["train"] = splits["train"][: opts.max_train_sentences]
        self._splits = splits
        self._build_vocab([s for s, _ in splits["train"]], opts.min_count)
        if not self.labels:
            self.labels = tags

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

    def read_examples(self, path: str | Path) -> list:
        """Tagged sentences of a CoNLL-U, ``word/TAG`` or ``word TAG`` columns file (see
        :func:`~attnlab.data.readers.read_tagging_file`), checked against the model's tags.

        Raises:
            ValueError: not a tagging file; a tag the model does not know.
        """
        examples = read_tagging_file(path)
        known = set(self.labels)
        unknown = sorted({t for _, tags in examples for t in tags if t not in known})
        if unknown:
            raise ValueError(
                f"{path}: tags {unknown[:10]} are not in the model's tag set {self.labels}"
            )
        return examples

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

    def setup(self, options: SentenceOptions) -> None:
        opts = _options(SentenceOptions, options)
        if opts.train_file:
            labels = SENTENCE_LABELS[self.corpus]
            splits = _read_files(opts.train_file, opts.dev_file, opts.test_file,
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
