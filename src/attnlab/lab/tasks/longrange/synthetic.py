"""Seeded generators of the two synthetic long-range tasks, ``recall`` and ``positions``.

Both return ``(tokens, label)`` pairs whose answer the tests recompute independently
(:func:`recall_answer`, :func:`positions_answer` read the answer off the tokens).

**recall** (associative recall; Ba et al. 2016, Zoology / Arora et al. 2023): key-value pairs
``k v k v ...`` then ``? k``; the answer is the value that followed ``k``. The queried pair sits
in the first half of the sequence, between about ``distance / 2`` and ``distance`` tokens before
the query, so a model must *match the key* (not count a fixed offset) and *remember* a token
``distance`` positions back; every other pair uses a different key.

**positions**: ``length`` random symbols with one marker ``#``; the answer is the symbol ``k``
places before the marker. It depends only on relative position; train at ``L`` and test at
``2L`` / ``4L`` to see which positional encodings extrapolate.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = [
    "KEYS",
    "MARKER",
    "QUERY",
    "SYMBOLS",
    "VALUES",
    "make_positions",
    "make_recall",
    "positions_answer",
    "recall_answer",
]

KEYS = tuple("abcdefghijklmnop")  # 16 keys
VALUES = tuple("0123456789")  # 10 values: the labels
QUERY = "?"
SYMBOLS = tuple("0123456789")  # positions: 10 symbols, the labels
MARKER = "#"

Example = tuple[list[str], int]


def _count(name: str, value: int, least: int) -> None:
    if not isinstance(value, int) or value < least:
        raise ValueError(f"{name}: expected an int >= {least}, got {value!r}")


def make_recall(n: int, *, distance: int, seed: int) -> list[Example]:
    """``n`` associative-recall examples of ``distance + 4`` tokens (``distance`` even-ed up).

    Args:
        n: number of examples.
        distance: how far back the queried pair may lie: its value is between
            ``distance / 2 + 2`` and ``distance + 2`` tokens before the query's key.
        seed: the generator's seed.

    Returns:
        ``[(tokens, label)]``: ``label`` indexes :data:`VALUES`.
    """
    _count("n", n, 0)
    _count("distance", distance, 2)
    rng = random.Random(seed)
    pairs = distance // 2 + 1
    out = []
    for _ in range(n):
        key = rng.choice(KEYS)
        others = [k for k in KEYS if k != key]
        at = rng.randint(0, pairs // 2)  # the queried pair, in the first half
        tokens: list[str] = []
        label = 0
        for p in range(pairs):
            value = rng.randrange(len(VALUES))
            tokens += [key if p == at else rng.choice(others), VALUES[value]]
            if p == at:
                label = value
        out.append(([*tokens, QUERY, key], label))
    return out


def recall_answer(tokens: Sequence[str]) -> int:
    """The answer of a recall example, read off its tokens (the value after the queried key)."""
    if len(tokens) < 4 or tokens[-2] != QUERY:
        raise ValueError(f"recall: expected 'k v ... ? k', got {' '.join(tokens[:8])} ...")
    key = tokens[-1]
    hits = [i for i in range(0, len(tokens) - 2, 2) if tokens[i] == key]
    if len(hits) != 1:
        raise ValueError(f"recall: key {key!r} occurs {len(hits)} times; expected once")
    return VALUES.index(tokens[hits[0] + 1])


def make_positions(n: int, *, length: int, k: int, seed: int) -> list[Example]:
    """``n`` examples of ``length`` tokens: symbols and one marker, answer the symbol ``k``
    places before the marker.

    The marker is uniform over positions ``k .. length - 1``, so at ``2L`` it also falls where
    no training example had it.

    Args:
        n: number of examples.
        length: tokens per example (> ``k``).
        k: how many places before the marker the answer is (>= 1).
        seed: the generator's seed.
    """
    _count("n", n, 0)
    _count("k", k, 1)
    if not isinstance(length, int) or length <= k:
        raise ValueError(f"length: expected an int > k={k}, got {length!r}")
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ids = [rng.randrange(len(SYMBOLS)) for _ in range(length)]
        at = rng.randint(k, length - 1)
        tokens = [SYMBOLS[i] for i in ids]
        tokens[at] = MARKER
        out.append((tokens, ids[at - k]))
    return out


def positions_answer(tokens: Sequence[str], k: int) -> int:
    """The answer of a positions example, read off its tokens."""
    at = list(tokens).index(MARKER)
    return SYMBOLS.index(tokens[at - k])
