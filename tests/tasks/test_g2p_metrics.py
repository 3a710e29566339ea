"""PER and WER of the ``g2p`` task against hand-worked examples."""

from __future__ import annotations

import pytest

from attnlab.lab.tasks.seq2seq.metrics import G2PScore, best_reference, edit_distance


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("", "", 0),
        ("KAET", "KAET", 0),
        ("KAET", "KAETS", 1),  # one insertion
        ("KAETS", "KAET", 1),  # one deletion
        ("KAET", "KIHT", 2),  # two substitutions
        ("ABC", "", 3),
        ("kitten", "sitting", 3),  # the textbook case: k->s, e->i, +g
    ],
)
def test_edit_distance(a, b, distance):
    assert edit_distance(list(a), list(b)) == distance
    assert edit_distance(list(b), list(a)) == distance


def test_best_reference_is_the_closest_then_the_shorter():
    out = ["R", "EH", "D"]
    assert best_reference(out, [["R", "IY", "D"], ["R", "EH", "D"]]) == (0, 3)
    # distance 1 to both; the shorter reference wins the tie
    assert best_reference(["K", "AE", "T"], [["K", "AE", "T", "S"], ["K", "AE"]]) == (1, 2)
    assert best_reference(["K"], [["K", "AE", "T"], ["K", "AE"]]) == (1, 2)
    with pytest.raises(ValueError, match="at least one reference"):
        best_reference(out, [])


def test_per_and_wer_by_hand():
    """Three words:
    read   -> R IY D       refs R EH D | R IY D   : 0 errors, ref length 3 (exact match)
    cats   -> K AE T       refs K AE T S          : 1 error (deletion), ref length 4
    hello  -> HH EH L OW   refs HH AH L OW | HH EH L OW W : best is the first (1 sub) -- and
           the second (1 ins) ties at 1; the shorter (4) wins
    PER = (0 + 1 + 1) / (3 + 4 + 4) = 2 / 11; WER = 2 / 3.
    """
    score = G2PScore()
    score.add(["R", "IY", "D"], [["R", "EH", "D"], ["R", "IY", "D"]])
    score.add(["K", "AE", "T"], [["K", "AE", "T", "S"]])
    score.add(["HH", "EH", "L", "OW"], [["HH", "AH", "L", "OW"], ["HH", "EH", "L", "OW", "W"]])
    assert (score.words, score.word_errors, score.phone_errors, score.phones) == (3, 2, 2, 11)
    assert score.per == pytest.approx(2 / 11)
    assert score.wer == pytest.approx(2 / 3)


def test_an_empty_output_costs_every_reference_phone():
    score = G2PScore()
    score.add([], [["HH", "AY"]])
    assert score.per == 1.0 and score.wer == 1.0


def test_nothing_counted_is_zero_not_a_division_error():
    assert G2PScore().per == 0.0 and G2PScore().wer == 0.0


def test_length_accuracy_counts_outputs_of_a_references_length():
    score = G2PScore()
    score.add(["K", "AE", "T"], [["K", "AE", "T"]], letters=3)  # right length, spelled 1:1
    score.add(["K", "AE"], [["K", "AE", "T", "S"], ["K", "AE"]], letters=4)  # the 2nd reference
    score.add(["TH", "IH", "NG", "Z"], [["TH", "IH", "NG"]], letters=6)  # one phone too many
    assert score.length_accuracy == 2 / 3
    assert score.letters_length_accuracy == 2 / 3  # 3 == 3, 4 in {4, 2}; 6 not in {3}
