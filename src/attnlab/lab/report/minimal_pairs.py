"""Claim 3's long-range minimal pairs (``minimal_pairs.tsv``, shipped with the package): pairs of
sentences that differ in one word only, at least :data:`MIN_DISTANCE` tokens from an ambiguous
word whose tag differs between the two; the ambiguous word and its -1 and +1 neighbours are the
same in both.

A window of 3 (the word and its two neighbours) sees the same input in both sentences of a pair
and so gives both the same tag: it tags at most one of the two right, a pair accuracy of 0 by
construction. Only a model that reads the far word can tag both. The pairs were written for the
report, like the probes of :mod:`.probes`; no run trains or is chosen on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path

__all__ = ["MIN_DISTANCE", "Pair", "pairs", "check", "scores", "pair_scores"]

#: the fewest tokens between the ambiguous word and the word that decides its tag
MIN_DISTANCE = 3


@dataclass(frozen=True)
class Pair:
    """Two readings of an ambiguous word (``a``, ``b``: token tuples) at ``index``."""

    family: str
    index: int
    a: tuple[str, ...]
    tag_a: str
    b: tuple[str, ...]
    tag_b: str
    line: int = 0

    @property
    def decider(self) -> int:
        """The position of the one word that differs."""
        return next(i for i, (x, y) in enumerate(zip(self.a, self.b)) if x != y)


def parse(text: str, where: str = "minimal_pairs.tsv") -> list[Pair]:
    """The pairs of a ``family TAB index TAB tag_a TAB sentence_a TAB tag_b TAB sentence_b``
    file (``#`` lines are comments).

    Raises:
        ValueError: a line that is not a pair, naming the file and the line.
    """
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        try:
            family, index, tag_a, a, tag_b, b = fields
            out.append(Pair(family, int(index), tuple(a.split()), tag_a, tuple(b.split()), tag_b,
                            n))  # fmt: skip
        except ValueError:
            fields = "family, index, tag_a, sentence_a, tag_b, sentence_b"
            raise ValueError(f"{where}:{n}: expected 6 tab-separated fields ({fields})") from None
    return out


@cache
def pairs() -> tuple[Pair, ...]:
    """The shipped pairs."""
    text = files("attnlab.lab.report").joinpath("minimal_pairs.tsv").read_text(encoding="utf-8")
    return tuple(parse(text))


def check(pair: Pair) -> list[str]:
    """What ``pair`` breaks of the construction rules (module docstring); empty when none."""
    a, b, i = pair.a, pair.b, pair.index
    if len(a) != len(b):
        return [f"line {pair.line}: the sentences differ in length ({len(a)} and {len(b)})"]
    if not 0 <= i < len(a):
        return [f"line {pair.line}: index {i} outside the sentence"]
    problems = []
    differ = [j for j in range(len(a)) if a[j] != b[j]]
    if len(differ) != 1:
        problems.append(f"line {pair.line}: the sentences differ in {len(differ)} positions, not 1")
    elif abs(differ[0] - i) < MIN_DISTANCE:
        problems.append(f"line {pair.line}: the differing word is {abs(differ[0] - i)} tokens "
                        f"from the ambiguous word (< {MIN_DISTANCE})")  # fmt: skip
    if any(a[j] != b[j] for j in (i - 1, i, i + 1) if 0 <= j < len(a)):
        problems.append(f"line {pair.line}: the window of 3 around {a[i]!r} differs")
    if pair.tag_a == pair.tag_b:
        problems.append(f"line {pair.line}: both readings are tagged {pair.tag_a}")
    return problems


def scores(tags_a: list[str], tags_b: list[str], chosen: tuple[Pair, ...] | None = None) -> dict:
    """From the tags a model gave the ambiguous word of each pair's two sentences: the share of
    pairs with both right (``pair_accuracy``), the share of sentences right (``accuracy``), and
    the share of pairs given the same tag twice (``same_tag``: 1 for a window of 3)."""
    chosen = pairs() if chosen is None else chosen
    right_a = [t == p.tag_a for t, p in zip(tags_a, chosen, strict=True)]
    right_b = [t == p.tag_b for t, p in zip(tags_b, chosen, strict=True)]
    n = len(chosen)
    return {
        "pair_accuracy": sum(x and y for x, y in zip(right_a, right_b)) / n,
        "accuracy": (sum(right_a) + sum(right_b)) / (2 * n),
        "same_tag": sum(x == y for x, y in zip(tags_a, tags_b)) / n,
        "pairs": n,
        "wrong": [i for i, (x, y) in enumerate(zip(right_a, right_b)) if not (x and y)],
    }


def pair_scores(run: str | Path) -> dict:
    """:func:`scores` of the ``pos`` run ``run`` (its best checkpoint) on the shipped pairs."""
    from attnlab.lab.train.checkpoint import load_for_inference

    task, model, _ = load_for_inference(str(run))
    chosen = pairs()
    tagged = task.predict(model, [s for p in chosen for s in (p.a, p.b)])
    tags_a = [t["tags"][p.index] for t, p in zip(tagged[0::2], chosen)]
    tags_b = [t["tags"][p.index] for t, p in zip(tagged[1::2], chosen)]
    return scores(tags_a, tags_b, chosen)
