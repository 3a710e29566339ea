"""The verdict rules on synthetic results with known answers."""

from __future__ import annotations

import math

import pytest

from attnlab.lab.report.stats import (
    Better,
    Equivalent,
    Verdict,
    bootstrap_difference,
    combine,
)

HIGH = [0.90, 0.91, 0.92]
LOW = [0.80, 0.81, 0.82]


def test_the_interval_contains_the_difference_and_is_seeded():
    c = bootstrap_difference(HIGH, LOW)
    assert c.difference == pytest.approx(0.10)
    assert c.low <= c.difference <= c.high
    assert c == bootstrap_difference(HIGH, LOW)  # same seed, same interval
    assert c.seeds == (3, 3)


def test_better_holds_fails_or_is_inconclusive():
    assert Better(0.0)(HIGH, LOW)[0] is Verdict.HELD
    assert Better(0.0)(LOW, HIGH)[0] is Verdict.NOT_HELD
    assert Better(0.0)([0.80, 0.90, 0.85], [0.84, 0.86, 0.85])[0] is Verdict.INCONCLUSIVE
    assert Better(0.2)(HIGH, LOW)[0] is Verdict.NOT_HELD  # better, but not by the margin
    assert Better(0.0, higher=False)(LOW, HIGH)[0] is Verdict.HELD  # a loss: lower is better


def test_equivalent_within_the_margin():
    close = [0.901, 0.899, 0.900]
    assert Equivalent(0.01)(close, [0.900, 0.902, 0.898])[0] is Verdict.HELD
    assert Equivalent(0.01)(HIGH, LOW)[0] is Verdict.NOT_HELD
    assert Equivalent(0.01)([0.90, 0.88, 0.92], [0.90, 0.90, 0.90])[0] is Verdict.INCONCLUSIVE


def test_one_seed_is_never_a_verdict():
    assert Better(0.0)([0.99], [0.10])[0] is Verdict.INCONCLUSIVE
    assert Equivalent(0.01)([0.5], [0.5])[0] is Verdict.INCONCLUSIVE


def test_a_claim_of_several_parts():
    H, N, I, P = Verdict.HELD, Verdict.NOT_HELD, Verdict.INCONCLUSIVE, Verdict.PENDING
    assert combine([H, H]) is H
    assert combine([H, N, I]) is N
    assert combine([H, I]) is I
    assert combine([H, P, N]) is P
    assert combine([]) is I


@pytest.mark.parametrize(("a", "message"), [([], "no scores"), ([math.nan, 0.5], "not finite")])
def test_bad_scores_are_refused(a, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_difference(a, [0.5, 0.6])
