"""Masked-language-model pre-training (``mlm``; ``attnlab pretrain mlm``) on unlabelled text.

BERT's objective (Devlin et al. 2019) on the words of the mirrored corpora
(:mod:`attnlab.lab.data.unlabelled`: Brown, CoNLL-2000, MASC and the treebank sample by default,
their train splits): 15% of the words of each sentence are chosen, shown as ``<mask>`` (80%), a
random word (10%) or unchanged (10%) (:mod:`.masking`), and the model predicts the chosen words;
the loss counts those positions only. The model is a
:class:`~attnlab.lab.models.masked_lm.MaskedLanguageModel`: the input encoder and encoder that the
sentence classifiers build from the same ``--model.*`` settings, under a tied output layer, so
that ``attnlab train sst2 --model.init=RUN`` starts from its weights (the embedding rows matched
by word, see :mod:`attnlab.lab.models.transfer`).

Splits: train = the corpora's train sentences; dev and test = ``heldout_sentences`` seeded picks
of their dev and test sentences (masked the same way at every evaluation). Metrics: accuracy of
the predicted words at the chosen positions, mean cross-entropy and its exponential, the
perplexity of the masked words.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.data.unlabelled import UNLABELLED_CORPORA, load_unlabelled
from attnlab.lab.models import CharVocabulary, ModelConfig, Vocabulary
from attnlab.lab.models.masked_lm import build_masked_lm
from attnlab.lab.tasks.base import classification_metrics
from attnlab.lab.tasks.text.base import TextTask, options_as
from attnlab.lab.tasks.text.masking import IGNORE, MaskingRule, mask_ids
from attnlab.lab.tasks.text.sentences import SentenceTask

__all__ = ["MLMOptions", "MLMTask", "MASK"]

MASK = "<mask>"
#: typed by a user in ``predict``: either spelling asks for the masked word
MASK_SPELLINGS = (MASK, "[MASK]")
#: sentence keys of a split start at split * KEYS (keys stay distinct across splits)
KEYS = 1 << 32


@dataclass
class MLMOptions:
    """Options of the ``mlm`` task.

    Args:
        corpora: comma-separated corpora whose train sentences are the text (of
            ``brown, conll2000, masc, treebank, sst2, sst5, trec``; the labelled ones give
            their train sentences without labels).
        min_count: words seen fewer times become ``<unk>`` (never chosen for prediction).
        max_vocab: at most this many vocabulary entries, the most frequent words.
        lowercase: lowercase words before lookup (as the sentence tasks' ``lowercase``).
        max_length: keep the first ``max_length`` words of a longer sentence.
        max_train_sentences: use only this many train sentences, a seeded pick (0: all).
        heldout_sentences: sentences of the dev and of the test split, seeded picks.
        copies: every train sentence this many times, masked differently (BERT's
            ``dupe_factor``).
        mask_rate: fraction of the words to predict.
        mask_token: of those, the fraction shown as ``<mask>``.
        random_token: of those, the fraction shown as a random word (the rest: unchanged).
        seed: seeds the masking and the picks.
        train_file: read the training text from this file instead (one whitespace-tokenised
            sentence per line).
        dev_file: with ``train_file``: the held-out text (none: no dev and test split).
    """

    corpora: str = "brown,conll2000,masc,treebank"
    min_count: int = 2
    max_vocab: int = 50_000
    lowercase: bool = True
    max_length: int = 64
    max_train_sentences: int = 0
    heldout_sentences: int = 2000
    copies: int = 1
    mask_rate: float = 0.15
    mask_token: float = 0.8
    random_token: float = 0.1
    seed: int = 0
    train_file: str = ""
    dev_file: str = ""


def read_text_file(path: str) -> list[tuple[str, ...]]:
    """The whitespace-tokenised sentences of a text file, one per non-empty line."""
    with open(path, encoding="utf-8") as fh:
        return [tuple(line.split()) for line in fh if line.strip()]


def sentence_seed(seed: int, key: int) -> int:
    """The masking seed of sentence ``key``: (seed, key) mixed by NumPy's ``SeedSequence``
    into the 32 bits that torch's CPU generator keeps of a seed (it drops the others, so
    ``seed * big + key`` would repeat the same masks under another ``seed``)."""
    return int(np.random.SeedSequence([seed, key]).generate_state(1)[0])


def _pick(sentences: Sequence, n: int, seed: int) -> list:
    """A seeded pick of ``n`` sentences (all if ``n`` is 0 or more than there are), in order."""
    if not n or n >= len(sentences):
        return list(sentences)
    keep = sorted(random.Random(seed).sample(range(len(sentences)), n))
    return [sentences[i] for i in keep]


class MLMTask(TextTask):
    """Masked-language-model pre-training on unlabelled text (BERT), masked-word accuracy."""

    name = "mlm"
    unit = "tok"
    output = "masked-lm"

    @classmethod
    def default_options(cls) -> MLMOptions:
        return MLMOptions()

    @classmethod
    def default_model_config(cls) -> ModelConfig:
        """The sentence classifiers' model (the encoder they fine-tune), with Kim's U[-0.25,
        0.25] embeddings: the tied output layer turns N(0, 1) rows into logits of standard
        deviation sqrt(dim), which start training far from the uniform guess."""
        cfg = SentenceTask.default_model_config()
        cfg.input.embed_init = 0.25
        return cfg

    @classmethod
    def default_train_options(cls) -> dict[str, Any]:
        return {"epochs": 1, "batch_size": 64, "eval_every": 500, "warmup_fraction": 0.05}

    def setup(self, options: MLMOptions) -> None:
        opts = self.options = options_as(MLMOptions, options)
        self.rule = MaskingRule(opts.mask_rate, opts.mask_token, opts.random_token)
        if opts.copies < 1 or opts.max_length < 1:
            raise ValueError("task_options.copies and max_length must be >= 1")
        text = self._text(opts)
        cut = [[s[: opts.max_length] for s in split if s] for split in text]
        train = _pick(cut[0], opts.max_train_sentences, opts.seed)
        dev, test = (_pick(s, opts.heldout_sentences, opts.seed + i) for i, s in
                     enumerate(cut[1:], 1))  # fmt: skip
        n = len(train)
        self._splits = {
            "train": [(s, c * n + i) for c in range(opts.copies) for i, s in enumerate(train)],
            "dev": [(s, KEYS + i) for i, s in enumerate(dev)],
            "test": [(s, 2 * KEYS + i) for i, s in enumerate(test)],
        }
        if self.vocab is None:
            self.vocab = Vocabulary.build(train, min_count=opts.min_count, max_size=opts.max_vocab,
                                          lowercase=opts.lowercase, specials=(MASK,))  # fmt: skip
            self.chars = CharVocabulary.build(train)

    def _text(self, opts: MLMOptions) -> tuple[list, list, list]:
        if opts.train_file:
            held = read_text_file(opts.dev_file) if opts.dev_file else []
            return read_text_file(opts.train_file), held, held
        names = [c.strip() for c in opts.corpora.split(",") if c.strip()]
        unknown = [c for c in names if c not in UNLABELLED_CORPORA]
        if unknown or not names:
            raise ValueError(
                f"task_options.corpora: unknown {unknown or 'empty list'}; choose from "
                f"{', '.join(UNLABELLED_CORPORA)}, comma-separated"
            )
        corpora = [load_unlabelled(c) for c in names]
        return tuple([s for c in corpora for s in getattr(c, split)]
                     for split in ("train", "dev", "test"))  # fmt: skip

    def batch_size_of(self, example) -> int:
        return len(example[0])

    def collate(self, examples: list) -> dict[str, Tensor]:
        """Encode the sentences as the masking of their key shows them (pure: each sentence's
        masking is seeded by ``task_options.seed`` and its key)."""
        shown, labels = [], []
        for tokens, key in examples:
            ids, masked = self._masking(tokens, key)
            # strings, so that character features see <mask>, never the hidden word's letters
            shown.append([t if a == b else self.vocab.token(a) for t, a, b in
                          zip(tokens, masked.inputs.tolist(), ids.tolist())])  # fmt: skip
            labels.append(masked.labels)
        batch = self.encode(shown)
        batch["labels"] = torch.full(batch["tokens"].shape, IGNORE, dtype=torch.long)  # (b, n)
        for i, row in enumerate(labels):
            batch["labels"][i, : len(row)] = row
        return batch

    def _masking(self, tokens: Sequence[str], key: int):
        """``(ids (n,), masked)``: the sentence's ids and :func:`mask_ids` of them, seeded by
        ``task_options.seed`` and the sentence's key (what training and evaluation see)."""
        ids = torch.tensor(self.vocab.encode(tokens), dtype=torch.long)  # (n,)
        gen = torch.Generator().manual_seed(sentence_seed(self.options.seed, key))
        words = (self.vocab.num_reserved, len(self.vocab))
        masked = mask_ids(ids, generator=gen, mask_id=self.vocab.index(MASK), rule=self.rule,
                          random_ids=words, choosable=ids != self.vocab.unk_id)  # fmt: skip
        return ids, masked

    def build_model(self, model_config: ModelConfig) -> nn.Module:
        self.model_cfg = model_config
        return build_masked_lm(model_config, vocab_size=len(self.vocab),
                               char_vocab_size=len(self.chars))  # fmt: skip

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        logits = model(batch)  # (k, V): the chosen positions only
        targets = batch["labels"][batch["labels"] != IGNORE]  # (k,)
        return F.cross_entropy(logits.float(), targets, reduction="sum"), targets.numel()

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        metrics = classification_metrics(
            (model(b), b["labels"][b["labels"] != IGNORE]) for b in batches
        )
        return {**metrics, "perplexity": math.exp(min(metrics["loss"], 50.0))}

    @torch.no_grad()
    def predict(self, model: nn.Module, sentences: Sequence[Sequence[str]]) -> list[dict]:
        """Fill in the ``<mask>`` (or ``[MASK]``) words: ``[{"tokens", "filled"}, ...]``."""
        model.eval()
        words = [[MASK if t in MASK_SPELLINGS else t for t in s] for s in sentences]
        logits = model(self.encode(words))  # (b, n, V)
        logits[..., : self.vocab.num_reserved] = -math.inf  # a word, not a special
        best = logits.argmax(-1)  # (b, n)
        return [{"tokens": list(s), "filled": [self.vocab.token(int(best[i, j])) if w == MASK
                                               else w for j, w in enumerate(words[i])]}
                for i, s in enumerate(sentences)]  # fmt: skip

    def example_input(self, example: Any) -> tuple[list[str], str]:
        """Test sentence ``example`` with the words its evaluation scores (its seeded choice;
        the evaluation shows some of them as a random or the same word, BERT's 80/10/10) as
        ``<mask>``, and the sentence itself as the gold answer."""
        tokens, key = example
        hidden = (self._masking(tokens, key)[1].labels != IGNORE).tolist()
        return [MASK if h else t for t, h in zip(tokens, hidden)], " ".join(tokens)

    def format_text(self, record: Mapping[str, Any]) -> str:
        return " ".join(record["filled"])
