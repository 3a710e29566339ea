"""Verdicts computed from numbers: each claim states its rule in code, before any result is read.

A rule compares two groups of per-seed scores (a variant against a reference) by the difference
of their means with a 95% bootstrap interval (resampling the seeds of each group, seeded), and
turns the interval into a verdict:

* :class:`Better` (``a`` beats ``b`` by more than ``margin``): held when the whole interval is
  above ``margin``; did not hold when it is wholly below; else inconclusive at this budget.
* :class:`Equivalent` (``a`` and ``b`` within ``margin`` of each other): held when the interval
  lies inside ``[-margin, margin]``; did not hold when it lies wholly outside; else inconclusive.

A group of one seed has no spread to judge a difference by: every rule is inconclusive until
each group has two seeds or more (:data:`MIN_SEEDS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

#: the seeds each group needs before a rule gives "held" or "did not hold"
MIN_SEEDS = 2

__all__ = [
    "MIN_SEEDS",
    "Verdict",
    "Comparison",
    "Better",
    "Equivalent",
    "bootstrap_difference",
    "combine",
]


class Verdict(StrEnum):
    HELD = "held"
    NOT_HELD = "did not hold"
    INCONCLUSIVE = "inconclusive at this budget"
    PENDING = "pending"


@dataclass(frozen=True)
class Comparison:
    """``mean(a) - mean(b)`` with its 95% bootstrap interval, and the seeds it rests on."""

    difference: float
    low: float
    high: float
    seeds: tuple[int, int]

    def __str__(self) -> str:
        return f"{self.difference:+.4f} [{self.low:+.4f}, {self.high:+.4f}] (seeds {self.seeds[0]} vs {self.seeds[1]})"


def bootstrap_difference(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0
) -> Comparison:
    """The difference of means ``mean(a) - mean(b)`` and its 95% percentile bootstrap interval
    (each group resampled with replacement, ``resamples`` times, seeded).

    Raises:
        ValueError: an empty group, or a score that is not finite.
    """
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    for name, g in (("a", x), ("b", y)):
        if g.size == 0:
            raise ValueError(f"bootstrap_difference: group {name} has no scores")
        if not np.isfinite(g).all():
            raise ValueError(
                f"bootstrap_difference: group {name} has a score that is not finite: {g}"
            )
    rng = np.random.default_rng(seed)
    xs = rng.choice(x, (resamples, x.size)).mean(1)
    ys = rng.choice(y, (resamples, y.size)).mean(1)
    low, high = np.percentile(xs - ys, [2.5, 97.5])
    return Comparison(float(x.mean() - y.mean()), float(low), float(high), (x.size, y.size))


@dataclass(frozen=True)
class Better:
    """``a`` is better than ``b`` by more than ``margin`` (in the score's units; ``higher``:
    whether a higher score is better)."""

    margin: float = 0.0
    higher: bool = True

    def __call__(self, a: Sequence[float], b: Sequence[float]) -> tuple[Verdict, Comparison]:
        c = bootstrap_difference(a, b) if self.higher else bootstrap_difference(b, a)
        if min(c.seeds) < MIN_SEEDS:
            return Verdict.INCONCLUSIVE, c
        if c.low > self.margin:
            return Verdict.HELD, c
        if c.high < self.margin:
            return Verdict.NOT_HELD, c
        return Verdict.INCONCLUSIVE, c

    def __str__(self) -> str:
        return (f"held if the 95% interval of the difference of means is above {self.margin:g}; "
                f"did not hold if below; else inconclusive")  # fmt: skip


@dataclass(frozen=True)
class Equivalent:
    """``a`` and ``b`` are within ``margin`` of each other."""

    margin: float

    def __call__(self, a: Sequence[float], b: Sequence[float]) -> tuple[Verdict, Comparison]:
        c = bootstrap_difference(a, b)
        if min(c.seeds) < MIN_SEEDS:
            return Verdict.INCONCLUSIVE, c
        if -self.margin <= c.low and c.high <= self.margin:
            return Verdict.HELD, c
        if c.low > self.margin or c.high < -self.margin:
            return Verdict.NOT_HELD, c
        return Verdict.INCONCLUSIVE, c

    def __str__(self) -> str:
        return (f"held if the 95% interval of the difference of means lies within ±{self.margin:g}; "
                f"did not hold if wholly outside; else inconclusive")  # fmt: skip


def combine(verdicts: Sequence[Verdict]) -> Verdict:
    """A claim of several parts: held when every part held, did not hold when one did not,
    pending when one is pending, else inconclusive."""
    if any(v is Verdict.PENDING for v in verdicts):
        return Verdict.PENDING
    if any(v is Verdict.NOT_HELD for v in verdicts):
        return Verdict.NOT_HELD
    if verdicts and all(v is Verdict.HELD for v in verdicts):
        return Verdict.HELD
    return Verdict.INCONCLUSIVE
