"""Evaluation files of any text format: the format is sniffed, the same sentences read the same
whatever their format, and files of the wrong kind are refused naming the file."""

from __future__ import annotations

import pytest

from attnlab.lab.data.readers import (
    read_classification_file,
    read_tagging_file,
    sniff_text_format,
)

SENTENCES = [
    (("I", "saw", "a", "saw", "."), ("PRON", "VERB", "DET", "NOUN", ".")),
    (("a/b", "is", "1/2"), ("X", "VERB", "NUM")),  # slashes inside words
]


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _slash(sentences) -> str:
    return "".join(" ".join(f"{w}/{t}" for w, t in zip(*s)) + "\n" for s in sentences)


def _columns(sentences, extra: str = "") -> str:
    return "\n".join("".join(f"{w} {t}{extra}\n" for w, t in zip(*s)) for s in sentences)


def _conllu(sentences) -> str:
    blocks = []
    for k, (words, tags) in enumerate(sentences):
        rows = [f"# sent_id = {k}"]
        rows += [
            f"{i}\t{w}\t_\t{t}\t_\t_\t_\t_\t_\t_" for i, (w, t) in enumerate(zip(words, tags), 1)
        ]
        blocks.append("\n".join(rows) + "\n")
    return "\n".join(blocks)


@pytest.mark.parametrize(
    ("name", "text", "fmt"),
    [
        ("a.txt", _slash(SENTENCES), "slash"),
        ("a.txt", _columns(SENTENCES), "columns"),
        ("a.txt", _columns(SENTENCES, " B-NP"), "columns"),  # CoNLL-2000's word POS chunk
        ("a.conllu", _conllu(SENTENCES), "conllu"),
        ("a.txt", _conllu(SENTENCES), "conllu"),  # recognised by its ten columns
    ],
)
def test_the_same_sentences_read_the_same_in_every_format(tmp_path, name, text, fmt):
    path = _write(tmp_path, name, text)
    assert sniff_text_format(path) == fmt
    assert read_tagging_file(path) == SENTENCES


def test_classification_file(tmp_path):
    path = _write(tmp_path, "s.txt", "1 a fine film .\n\n0 dull\n")
    assert sniff_text_format(path) == "sentences"
    assert read_classification_file(path) == [(("a", "fine", "film", "."), 1), (("dull",), 0)]


def test_tags_are_kept_as_written(tmp_path):
    """Unlike Brown in NLTK's zip, a user's word/TAG file is not upper-cased."""
    path = _write(tmp_path, "lower.txt", "the/det cat/noun\n")
    assert read_tagging_file(path) == [(("the", "cat"), ("det", "noun"))]


def test_wrong_kinds_of_file_are_refused_naming_the_file(tmp_path):
    sentences = _write(tmp_path, "sst.txt", "1 a fine film .\n0 a dull one .\n")
    with pytest.raises(ValueError, match=r"sst.txt is not a tagging file: it holds 'label"):
        read_tagging_file(sentences)
    for text in (_slash(SENTENCES), _columns(SENTENCES), _conllu(SENTENCES)):
        tagged = _write(tmp_path, "tagged.txt", text)
        with pytest.raises(ValueError, match=r"tagged.txt is not a sentence-classification file"):
            read_classification_file(tagged)
    prose = _write(tmp_path, "prose.txt", "Just some prose,\nwith lines of any length at all.\n")
    assert sniff_text_format(prose) is None
    with pytest.raises(ValueError, match=r"prose.txt is not a tagging file: expected CoNLL-U"):
        read_tagging_file(prose)
    with pytest.raises(ValueError, match=r"prose.txt is not a sentence-classification file"):
        read_classification_file(prose)


@pytest.mark.parametrize("text", ["", "\n \n", "# only a comment\n"])
def test_empty_files_are_refused(tmp_path, text):
    path = _write(tmp_path, "empty.txt", text)
    for read in (read_tagging_file, read_classification_file):
        with pytest.raises(ValueError, match=r"empty.txt: empty file"):
            read(path)


def test_a_missing_file_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_tagging_file(tmp_path / "missing.txt")


def test_a_malformed_line_after_the_sniffed_ones_names_its_line(tmp_path):
    path = _write(tmp_path, "bad.txt", "the/DET cat/NOUN\n" * 60 + "oops\n")
    with pytest.raises(ValueError, match=r"bad.txt:61: expected word/tag"):
        read_tagging_file(path)
