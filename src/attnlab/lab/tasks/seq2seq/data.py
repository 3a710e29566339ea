"""The ``g2p`` data: words and their pronunciations, the split by word and the vocabularies."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import torch

from attnlab.lab.data.readers.cmudict import Lexicon, Pronunciation

__all__ = [
    "BOS",
    "EOS",
    "G2PExample",
    "PAD",
    "PHONE_SPECIALS",
    "LETTER_SPECIALS",
    "UNK",
    "letter_vocabulary",
    "phone_vocabulary",
    "split_lexicon",
]

PAD, UNK = 0, 1  # letter ids
BOS, EOS = 1, 2  # phone ids (PAD = 0 too)
LETTER_SPECIALS = ("<pad>", "<unk>")
PHONE_SPECIALS = ("<pad>", "<bos>", "<eos>")


class G2PExample(NamedTuple):
    """A word and its reference pronunciations (a training example has one)."""

    word: str
    prons: tuple[Pronunciation, ...]


def split_lexicon(
    lexicon: Lexicon, *, seed: int = 0, fractions: Sequence[float] = (0.9, 0.05, 0.05)
) -> dict[str, list[G2PExample]]:
    """Split the words of ``lexicon`` into train / dev / test, seeded, all the alternate
    pronunciations of a word on the same side.

    The words are sorted, then permuted by a ``torch.Generator`` seeded ``seed``, so the split is
    a pure function of the dictionary and the seed. Every split holds one example per word with
    all its pronunciations (:meth:`~attnlab.lab.tasks.seq2seq.task.G2PTask.splits` expands train).

    Raises:
        ValueError: fractions that are not three non-negative numbers summing to 1.
    """
    if len(fractions) != 3 or min(fractions) < 0 or abs(sum(fractions) - 1.0) > 1e-6:
        raise ValueError(f"fractions must be 3 non-negative numbers summing to 1, got {fractions}")
    words = sorted(lexicon.entries)
    order = torch.randperm(len(words), generator=torch.Generator().manual_seed(seed)).tolist()
    n_train = round(fractions[0] * len(words))
    n_dev = round(fractions[1] * len(words))
    cuts = {"train": order[:n_train], "dev": order[n_train : n_train + n_dev],
            "test": order[n_train + n_dev :]}  # fmt: skip
    return {
        split: [G2PExample(words[i], lexicon.entries[words[i]]) for i in index]
        for split, index in cuts.items()
    }


def letter_vocabulary(words: Iterable[str]) -> list[str]:
    """``["<pad>", "<unk>", *sorted letters]``: the letters of ``words``."""
    return [*LETTER_SPECIALS, *sorted({c for w in words for c in w})]


def phone_vocabulary(prons: Iterable[Pronunciation]) -> list[str]:
    """``["<pad>", "<bos>", "<eos>", *sorted phones]``: the phones of ``prons``."""
    return [*PHONE_SPECIALS, *sorted({p for pron in prons for p in pron})]
