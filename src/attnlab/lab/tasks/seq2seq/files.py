"""A user's own sequence pairs (``--data.train=FILE.tsv``): the options, the tokenizers and the
``source<TAB>target`` files.

One pair per line, the source and the target separated by one tab (spaces around each are
stripped; blank lines are skipped). A source written on several lines has several references:
its lines are grouped (in order of first appearance), training sees every pair, dev and test
score the output against the closest reference. Tokens: ``chars`` (every character, spaces
included) or ``whitespace`` (words split on spaces), for both sides (``--data.tokenizer``) or
each (``--data.source_tokenizer``, ``--data.target_tokenizer``). A run keeps its splits in
``RUN/data/`` in this same layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from attnlab.lab.data.own import FileSplits, as_options

__all__ = ["TOKENIZERS", "Pair", "Seq2SeqDataOptions", "as_seq2seq_options", "join",
           "read_pairs", "render_pairs", "tokenize"]  # fmt: skip

TOKENIZERS = ("chars", "whitespace")


@dataclass
class Seq2SeqDataOptions(FileSplits):
    """Your own pairs (``--data.NAME`` for short): ``source<TAB>target`` lines.

    Args:
        train: the training file (source TAB target per line).
        dev: the dev file (none: cut from train, see split).
        test: the test file (none: cut from train, see split).
        split: the fractions of the train sources cut as dev and test when those files are not
            given (seeded by seed; a source's lines stay together; 0 cuts none).
        seed: seeds the cut of dev and test from train.
        tokenizer: chars (every character is a token) or whitespace (words), both sides.
        source_tokenizer: the source's tokenizer, if other than tokenizer.
        target_tokenizer: the target's tokenizer, if other than tokenizer.
    """

    tokenizer: str = "chars"
    source_tokenizer: str = ""
    target_tokenizer: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("tokenizer", "source_tokenizer", "target_tokenizer"):
            value = getattr(self, name)
            if value not in TOKENIZERS and (value or name == "tokenizer"):
                raise ValueError(f"data.{name}: chars or whitespace, got {value!r}")

    def tokenizers(self) -> tuple[str, str]:
        """``(source, target)`` tokenizers."""
        return self.source_tokenizer or self.tokenizer, self.target_tokenizer or self.tokenizer


def as_seq2seq_options(value: Any) -> Seq2SeqDataOptions:
    """``value`` (a :class:`Seq2SeqDataOptions` or a mapping of its fields) as one."""
    return as_options(Seq2SeqDataOptions, value)


def tokenize(text: str, tokenizer: str) -> tuple[str, ...]:
    """``text`` as tokens: its characters (``chars``) or its words (``whitespace``)."""
    return tuple(text) if tokenizer == "chars" else tuple(text.split())


def join(tokens: Any, tokenizer: str) -> str:
    """Tokens back as text (the inverse of :func:`tokenize`)."""
    return ("" if tokenizer == "chars" else " ").join(tokens)


class Pair(NamedTuple):
    """A source's tokens, its references' tokens, and where its first line was read."""

    source: tuple[str, ...]
    targets: tuple[tuple[str, ...], ...]
    where: str


def read_pairs(path: str, tokenizers: tuple[str, str], split: str = "train") -> list[Pair]:
    """The pairs of one file, a source's lines grouped as its references.

    Raises:
        FileNotFoundError: no such file (naming the option).
        ValueError: one line naming the file and line: no tab, several tabs, an empty source or
            target; a file without pairs.
    """
    if not Path(path).is_file():
        raise FileNotFoundError(f"--data.{split}: no such file {path}")
    grouped: dict[tuple[str, ...], list] = {}
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            where = f"{path}:{number}"
            if line.count("\t") != 1:
                found = "no tab" if "\t" not in line else f"{line.count(chr(9))} tabs"
                raise ValueError(f"{where}: expected source<TAB>target (one tab), found {found}: "
                                 f"{line[:60]!r}")  # fmt: skip
            source, target = (side.strip() for side in line.split("\t"))
            if not source or not target:
                raise ValueError(f"{where}: empty {'source' if not source else 'target'}; "
                                 "expected source<TAB>target")  # fmt: skip
            src, tgt = tokenize(source, tokenizers[0]), tokenize(target, tokenizers[1])
            entry = grouped.setdefault(src, [[], where])
            if tgt not in entry[0]:
                entry[0].append(tgt)
    if not grouped:
        raise ValueError(f"{path}: no pairs (expected source<TAB>target lines)")
    return [Pair(src, tuple(targets), where) for src, (targets, where) in grouped.items()]


def render_pairs(pairs: list[Pair], tokenizers: tuple[str, str]) -> str:
    """Pairs as the file a run keeps (one line per reference; read back by :func:`read_pairs`)."""
    return "".join(f"{join(p.source, tokenizers[0])}\t{join(t, tokenizers[1])}\n"
                   for p in pairs for t in p.targets)  # fmt: skip
