"""The long-sequence tasks: ``listops`` (Long Range Arena), ``recall`` and ``positions``.

Each is a 10-way classification of a whole token sequence (N -> 1) on generated data, so it
reuses :class:`~attnlab.lab.tasks.text.sentences.SentenceTask` (vocabulary, batches, loss,
accuracy, ``predict`` / ``eval --data`` on ``label tokens`` files) and only says how its
examples are made. The vocabulary is the task's fixed alphabet, not the training tokens, so an
input of another length never meets an unknown token.

Options make tiny versions (``--task_options.train=64 --task_options.max_length=60``); model
defaults are a small pre-norm Transformer (width 64, 2 blocks, 4 heads, attention pooling)
that trains on CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from attnlab.lab.models import ModelConfig
from attnlab.lab.tasks.base import options_as
from attnlab.lab.tasks.longrange.listops import END, OPERATORS, ListOpsSpec, load_listops
from attnlab.lab.tasks.longrange.listops_parse import evaluate_listops
from attnlab.lab.tasks.longrange.synthetic import (
    KEYS,
    MARKER,
    QUERY,
    SYMBOLS,
    VALUES,
    make_positions,
    make_recall,
)
from attnlab.lab.tasks.text.sentences import SentenceTask

__all__ = [
    "ListOpsOptions",
    "ListOpsTask",
    "LongRangeTask",
    "PositionsOptions",
    "PositionsTask",
    "RecallOptions",
    "RecallTask",
]

DIGITS = tuple("0123456789")


class LongRangeTask(SentenceTask):
    """A sequence classification task on generated data: subclasses set :attr:`alphabet`,
    :attr:`label_names`, :attr:`options_class` and implement :meth:`generate`."""

    alphabet: tuple[str, ...] = ()
    label_names: tuple[str, ...] = DIGITS
    options_class: type = object
    corpus = ""

    @classmethod
    def default_options(cls) -> Any:
        return cls.options_class()

    @classmethod
    def default_model_config(cls) -> ModelConfig:
        cfg = ModelConfig()
        cfg.input.dim = 64
        cfg.input.char_features = False  # one token, one symbol: nothing to spell
        cfg.input.word_dropout = 0.0  # a dropped digit changes the answer
        cfg.input.dropout = 0.0
        cfg.encoder.ff_hidden = 128
        cfg.encoder.dropout = 0.0
        cfg.head.pooling = "attention"
        cfg.head.dropout = 0.0
        return cfg

    @classmethod
    def default_train_options(cls) -> dict[str, Any]:
        return {"epochs": 20, "batch_size": 32, "lr": 1e-3, "warmup_fraction": 0.05}

    def generate(self, options: Any) -> dict[str, list]:
        """``{"train", "dev", "test"}`` lists of ``(tokens, label)``."""
        raise NotImplementedError

    def setup(self, options: Any) -> None:
        opts = options_as(self.options_class, options)
        self._splits = self.generate(opts)
        self._build_vocab([list(self.alphabet)], 1)
        if not self.labels:
            self.labels = list(self.label_names)

    def build_model(self, model_config: ModelConfig) -> nn.Module:
        if self.vocab is None:  # the vocabulary is the alphabet: no data needed to build it
            self._build_vocab([list(self.alphabet)], 1)
            self.labels = self.labels or list(self.label_names)
        return super().build_model(model_config)

    def parse_input(self, text: str) -> list[str]:
        """The whitespace-separated tokens of one sequence, every one of them in the task's
        alphabet (the model has no embedding for anything else: an unknown token would be read
        as ``<unk>`` and still get an answer).

        Raises:
            ValueError: an empty input, or a token outside the alphabet (its position named).
        """
        tokens = super().parse_input(text)
        for i, token in enumerate(tokens):
            if token not in self.alphabet:
                raise ValueError(
                    f"{self._label()}: token {i} is {token!r}, not in the task's alphabet "
                    f"({' '.join(self.alphabet)})"
                )
        return tokens


# ---------------------------------------------------------------------------------- listops
@dataclass
class ListOpsOptions:
    """Options of ``listops`` (:class:`~attnlab.lab.tasks.longrange.listops.ListOpsSpec`; LRA's
    defaults: 96k / 2k / 2k trees of 500-2,000 tokens, depth <= 10, <= 10 arguments).

    Args:
        train, dev, test: examples per split.
        max_depth: deepest nesting of operators.
        max_args: most arguments of an operator.
        min_length, max_length: lengths kept lie strictly between them.
        seed: the generator's seed.
        cache: where the generated data goes (default ``$ATTNLAB_CACHE``).
    """

    train: int = 96_000
    dev: int = 2_000
    test: int = 2_000
    max_depth: int = 10
    max_args: int = 10
    min_length: int = 500
    max_length: int = 2_000
    seed: int = 0
    cache: str = ""

    def spec(self) -> ListOpsSpec:
        return ListOpsSpec(
            train=self.train, dev=self.dev, test=self.test, max_depth=self.max_depth,
            max_args=self.max_args, min_length=self.min_length, max_length=self.max_length,
            seed=self.seed,
        )  # fmt: skip


class ListOpsTask(LongRangeTask):
    """ListOps (Long Range Arena): the value, 0-9, of nested MAX / MIN / MED / SUM_MOD lists."""

    options_class = ListOpsOptions
    alphabet = (*OPERATORS, END, *DIGITS)
    # On a CPU its heads of 16 dimensions attend in float32 under bf16 too (the sdpa backend's
    # rule), and its steps then spent more on casts, and on oneDNN's bf16 kernels for each new
    # group shape, than bf16 saved: 1.12x faster in float32 on an AMX Xeon (BENCHMARKS.md,
    # "Training speed"). On CUDA ``auto`` still picks bf16.
    cpu_precision = "fp32"

    @classmethod
    def default_train_options(cls) -> dict[str, Any]:
        return {"epochs": 5, "batch_size": 32, "lr": 5e-4, "warmup_fraction": 0.05}

    def generate(self, options: ListOpsOptions) -> dict[str, list]:
        return load_listops(options.spec(), root=options.cache or None)

    def parse_input(self, text: str) -> list[str]:
        """One well-formed ListOps expression, as tokens (``[MAX 2 9 [MIN 4 7 ] 0 ]``).

        Raises:
            ValueError: a token outside the alphabet, or not one whole expression; the message
                names the token's position and what was expected there.
        """
        tokens = super().parse_input(text)
        evaluate_listops(tokens)  # raises, naming the position, unless well formed
        return tokens

    def predict(self, model: nn.Module, sentences: Sequence[Sequence[str]]) -> list[dict]:
        """The predicted value and the expression's true value (``answer``); every input is a
        well-formed expression (:meth:`parse_input` refuses the others)."""
        records = super().predict(model, sentences)
        for record, tokens in zip(records, sentences):
            record["answer"] = str(evaluate_listops(tokens))
        return records


# ---------------------------------------------------------------------------------- recall
@dataclass
class RecallOptions:
    """Options of ``recall`` (:func:`~attnlab.lab.tasks.longrange.synthetic.make_recall`).

    Args:
        train, dev, test: examples per split.
        distance: how far back the queried pair lies (between ``distance / 2`` and
            ``distance`` tokens); sequences have ``distance + 4`` tokens.
        seed: the generator's seed.
    """

    train: int = 4_000
    dev: int = 500
    test: int = 500
    distance: int = 64
    seed: int = 0


class RecallTask(LongRangeTask):
    """Associative recall: ``k v k v ... ? k``, the value of the queried key from far back."""

    options_class = RecallOptions
    alphabet = (*KEYS, *VALUES, QUERY)
    label_names = VALUES

    def generate(self, options: RecallOptions) -> dict[str, list]:
        total = options.train + options.dev + options.test
        data = make_recall(total, distance=options.distance, seed=options.seed)
        a, b = options.train, options.train + options.dev
        return {"train": data[:a], "dev": data[a:b], "test": data[b:]}


# ---------------------------------------------------------------------------------- positions
@dataclass
class PositionsOptions:
    """Options of ``positions`` (:func:`~attnlab.lab.tasks.longrange.synthetic.make_positions`).

    Args:
        train, dev, test: examples per split.
        length: tokens per train / dev example (``L``).
        k: the answer is the symbol ``k`` places before the marker.
        test_length: tokens per test example (0: ``length``; ``2L``, ``4L`` to test
            extrapolation).
        seed: the generator's seed.
    """

    train: int = 4_000
    dev: int = 500
    test: int = 500
    length: int = 64
    k: int = 3
    test_length: int = 0
    seed: int = 0


class PositionsTask(LongRangeTask):
    """The symbol ``k`` places before the marker ``#``: an answer given by relative position."""

    options_class = PositionsOptions
    alphabet = (*SYMBOLS, MARKER)
    label_names = SYMBOLS

    def generate(self, options: PositionsOptions) -> dict[str, list]:
        n = options.train + options.dev
        data = make_positions(n, length=options.length, k=options.k, seed=options.seed)
        test = self.test_at(options, options.test_length or options.length)
        return {"train": data[: options.train], "dev": data[options.train :], "test": test}

    @staticmethod
    def test_at(options: PositionsOptions, length: int) -> list:
        """The test split of ``options`` with ``length`` tokens per example (the same seed at
        every length: the report tests one trained model at ``L``, ``2L`` and ``4L``)."""
        return make_positions(options.test, length=length, k=options.k, seed=options.seed + 1)
