"""``seq2seq``: a target sequence per source sequence of your own (N -> M), no code:
``attnlab train seq2seq --data.train=pairs.tsv [--data.tokenizer=whitespace]``.

``g2p``'s machinery (:class:`~.task.G2PTask`: the Transformer encoder-decoder by default,
label-smoothed teacher forcing, greedy or beam decoding, ``--beam`` and n-best in ``predict``)
on the pairs of :mod:`.files`. The vocabularies are train's tokens: a source token never seen
in train is read as ``<unk>``, and so is a dev or test target token (the target vocabulary
holds ``<unk>``; the model can output it). The metrics keep g2p's names: ``per`` is the token
error rate (edit distance to the closest reference over its length), ``wer`` the share of
outputs equal to no reference. The vocabularies and tokenizers are kept in the checkpoint,
the splits in ``RUN/data/``, so ``eval``, ``predict`` (texts, or ``--index N``) and ``show``
need the run alone. Outputs stop at 256 tokens.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from attnlab.lab.data.own import SPLITS, complete_splits, save_splits, saved_splits
from attnlab.lab.tasks.base import options_as
from attnlab.lab.tasks.seq2seq.data import (
    LETTER_SPECIALS,
    PHONE_SPECIALS,
    G2PExample,
    letter_vocabulary,
)
from attnlab.lab.tasks.seq2seq.files import (
    Pair,
    Seq2SeqDataOptions,
    as_seq2seq_options,
    join,
    read_pairs,
    render_pairs,
    tokenize,
)
from attnlab.lab.tasks.seq2seq.task import G2POptions, G2PTask

__all__ = ["Seq2SeqOptions", "Seq2SeqTask", "UNK_TARGET"]

#: the target token standing for one never seen in train
UNK_TARGET = "<unk>"


@dataclass
class Seq2SeqOptions:
    """Options of the ``seq2seq`` task (a target sequence per source sequence of yours).

    Args:
        label_smoothing: of the training cross-entropy.
        eval_beam: beam width of dev / test decoding (1: greedy).
        data: your files: source TAB target lines, tokenized by data.tokenizer.
    """

    label_smoothing: float = 0.1
    eval_beam: int = 1
    data: Seq2SeqDataOptions = field(default_factory=Seq2SeqDataOptions)


class Seq2SeqTask(G2PTask):
    """Source sequence in, target sequence out (N -> M), on your own pairs; token error rate."""

    name = "seq2seq"
    max_output = 256

    def __init__(self) -> None:
        super().__init__()
        self.tokenizers = ("chars", "chars")
        self._saved: dict[str, Path] | None = None
        self._kept: tuple[Seq2SeqDataOptions, dict[str, str]] | None = None
        self._pairs: dict[str, list[Pair]] = {}

    @classmethod
    def default_options(cls) -> Seq2SeqOptions:  # type: ignore[override]
        return Seq2SeqOptions()

    # ------------------------------------------------------------------ data
    def setup(self, options: Seq2SeqOptions) -> None:
        opts = options_as(Seq2SeqOptions, options)
        data = as_seq2seq_options(opts.data)
        self.options = G2POptions(label_smoothing=opts.label_smoothing, eval_beam=opts.eval_beam)
        if self._saved is not None:
            pairs = {s: read_pairs(str(p), self.tokenizers, s) for s, p in self._saved.items()}
        elif not data.train:
            raise ValueError(
                f"task {self.name!r} trains on your own pairs: give --data.train=FILE.tsv "
                f"(source<TAB>target lines), e.g. attnlab train {self.name} --data.train=pairs.tsv "
                "--data.tokenizer=whitespace; dev and test are cut from it unless --data.dev / "
                "--data.test name them"
            )
        else:
            self.tokenizers = data.tokenizers()
            files = {s: getattr(data, s) for s in SPLITS if getattr(data, s)}
            read = {s: read_pairs(f, self.tokenizers, s) for s, f in files.items()}
            pairs, sources, _ = complete_splits(read, files, data.split, data.seed)
            self._kept = (data, sources)
        if not self.letters:
            self.letters = letter_vocabulary(p.source for p in pairs["train"])
            seen = sorted({t for p in pairs["train"] for target in p.targets for t in target})
            self.phones = [*PHONE_SPECIALS, UNK_TARGET, *seen]
        self._pairs = pairs
        self._splits = {s: self._examples(split) for s, split in pairs.items()}

    def _examples(self, pairs: Sequence[Pair]) -> list[G2PExample]:
        known = set(self.phones)
        return [G2PExample(p.source, tuple(tuple(t if t in known else UNK_TARGET for t in target)
                                           for target in p.targets)) for p in pairs]  # fmt: skip

    def load_run_data(self, run_dir: str | Path) -> None:
        """Read the splits from what the run ``run_dir`` kept, if it did."""
        self._saved = saved_splits(run_dir)

    def save_run_data(self, run_dir: str | Path) -> None:
        """Keep the splits read from the user's files in ``run_dir/data/``."""
        if self._kept is not None:
            data, sources = self._kept
            save_splits(run_dir, self._pairs, lambda p: render_pairs(p, self.tokenizers),
                        ".tsv", sources, data)  # fmt: skip

    def read_examples(self, path: str | Path) -> list:
        """The pairs of a ``source<TAB>target`` file, tokenized as the run's."""
        return self._examples(read_pairs(str(path), self.tokenizers, "test"))

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {"letters": self.letters, "phones": self.phones,
                "tokenizers": list(self.tokenizers)}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.tokenizers = tuple(state["tokenizers"])  # type: ignore[assignment]

    def load_pretrained(self, model: nn.Module, weights: Any, state: Mapping[str, Any]) -> Any:
        if "tokenizers" not in state:
            raise ValueError("start seq2seq from a seq2seq checkpoint (its tokenizers and "
                             "vocabularies)")  # fmt: skip
        return super().load_pretrained(model, weights, state)

    # ------------------------------------------------------------------ commands
    def parse_input(self, text: str) -> tuple[str, ...]:
        """A source text as tokens; tokens never seen in training are read as ``<unk>`` with
        a warning.

        Raises:
            ValueError: an empty input.
        """
        tokens = tokenize(text.strip(), self.tokenizers[0])
        if not tokens:
            raise ValueError(f"{self.name}: empty input {text!r}")
        unseen = sorted({t for t in tokens if t not in self.letters[len(LETTER_SPECIALS) :]})
        if unseen:
            warnings.warn(f"{self.name}: tokens {unseen[:10]} of {text!r} were never seen in "
                          "training; they are read as <unk>", stacklevel=2)  # fmt: skip
        return tokens

    def input_labels(self, input: Sequence[str]) -> list[str]:
        return list(input)

    def input_text(self, input: Sequence[str]) -> str:
        return join(input, self.tokenizers[0])

    def example_input(self, example: G2PExample) -> tuple[tuple[str, ...], str]:
        """Test pair ``example`` as ``predict``'s input, its references as the gold answer."""
        return tuple(example.word), " | ".join(join(t, self.tokenizers[1]) for t in example.prons)

    def predict(self, model: nn.Module, inputs: Sequence[Any], beam: int = 1) -> list[dict]:
        """``[{"source", "target", "score", "nbest": [{"target", "score", "log_prob"}]}]``."""
        records = super().predict(model, inputs, beam=beam)
        tgt = self.tokenizers[1]
        return [{"source": self.input_text(r["word"]), "target": join(r["phones"], tgt),
                 "score": r["score"], "nbest": [{"target": join(h["phones"], tgt),
                 "score": h["score"], "log_prob": h["log_prob"]} for h in r["nbest"]]}
                for r in records]  # fmt: skip

    def format_text(self, record: Mapping[str, Any]) -> str:
        return f"{record['source']}\t{record['target']}"

    def prediction_line(self, model: nn.Module, input: Sequence[str]) -> str:
        record = self.predict(model, [input])[0]
        return f"{record['source']} -> {record['target']}"
