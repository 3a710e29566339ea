"""Evaluation files of any format (``attnlab eval --data``, a task's local ``train_file``): which
format a file is in (:func:`sniff_text_format`), and reading it as tagged or labelled sentences,
refusing a file of the other kind with a message that says so.
"""

import os

from attnlab.lab.data.readers.base import LabeledSentence, StrPath, TaggedSentence
from attnlab.lab.data.readers.sentences import read_sentences
from attnlab.lab.data.readers.tagging import parse_columns, parse_slash, read_conllu

__all__ = [
    "TEXT_FILE_FORMATS",
    "sniff_text_format",
    "read_tagging_file",
    "read_classification_file",
]

TEXT_FILE_FORMATS = ("conllu", "slash", "columns", "sentences")
"""What :func:`sniff_text_format` recognises: the tagging formats, then ``label sentence``."""

_SNIFF_LINES = 50


def _is_label(field: str) -> bool:
    return field.isascii() and field.isdigit()


def _is_slash_token(token: str) -> bool:
    word, slash, tag = token.rpartition("/")
    return bool(word and slash and tag)


def sniff_text_format(path: StrPath) -> str | None:
    """Which format a tagging or sentence-classification file is in, from its first lines.

    Looks at the first 50 lines that are neither blank nor ``#`` comments:

    - ``"conllu"``: the name ends in ``.conllu``, or every line has 10 tab-separated columns;
    - ``"sentences"``: every line is an integer label followed by at least one token;
    - ``"slash"``: every token of every line is ``word/TAG``;
    - ``"columns"``: every line has the same number (at least 2) of whitespace-separated
      columns, the word first and its tag second (``word TAG``, CoNLL-2000's ``word POS chunk``).

    Returns:
        One of :data:`TEXT_FILE_FORMATS`, or ``None`` if no format fits.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file holds no line with text, or is binary (it names the file).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    with open(path, "rb") as fh:
        if b"\0" in fh.read(8192):  # text never holds NUL bytes: don't echo binary as a "line"
            raise ValueError(f"{path}: a binary file, not a text file of sentences")
    lines: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip() and not line.startswith("#"):
                lines.append(line.rstrip("\n"))
                if len(lines) == _SNIFF_LINES:
                    break
    if not lines:
        raise ValueError(f"{path}: empty file (no sentences)")
    if path.endswith(".conllu") or all(line.count("\t") == 9 for line in lines):
        return "conllu"
    rows = [line.split() for line in lines]
    if all(len(r) >= 2 and _is_label(r[0]) for r in rows):
        return "sentences"
    if all(all(_is_slash_token(t) for t in r) for r in rows):
        return "slash"
    if len({len(r) for r in rows}) == 1 and len(rows[0]) >= 2:
        return "columns"
    return None


def read_tagging_file(path: StrPath) -> list[TaggedSentence]:
    """Read ``(tokens, tags)`` sentences from a CoNLL-U (UPOS), ``word/TAG`` (one sentence per
    line) or ``word TAG ...`` columns file (blank line between sentences); the format is
    :func:`sniff_text_format`'s. Tags are kept as written.

    Raises:
        FileNotFoundError: no such file.
        ValueError: an empty file; a file in none of these formats, or a sentence-classification
            file (the message names the file and says what it found); a malformed line.
    """
    fmt = sniff_text_format(path)
    expected = "CoNLL-U, word/TAG tokens, or 'word TAG' columns"
    if fmt == "sentences":
        raise ValueError(
            f"{path} is not a tagging file: it holds 'label sentence' lines (a "
            f"sentence-classification file); expected {expected}"
        )
    if fmt is None:
        raise ValueError(f"{path} is not a tagging file: expected {expected}")
    if fmt == "conllu":
        sentences = read_conllu(path)
    else:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        where = os.fspath(path)
        if fmt == "slash":
            sentences = list(parse_slash(text, where, None, upper=False))
        else:
            sentences = list(parse_columns(text, where, None, 1))
    if not sentences:
        raise ValueError(f"{path}: no sentences")
    return sentences


def read_classification_file(path: StrPath) -> list[LabeledSentence]:
    """Read ``(tokens, label)`` pairs from a ``label<space>tokenized sentence`` file, refusing
    a tagging file with a message that says so (:func:`sniff_text_format`).

    Raises:
        FileNotFoundError: no such file.
        ValueError: an empty file; a tagging file; a line without an integer label.
    """
    fmt = sniff_text_format(path)
    if fmt in ("conllu", "slash", "columns"):
        raise ValueError(
            f"{path} is not a sentence-classification file: it looks like a tagging file "
            f"({fmt}); expected 'label<space>tokenized sentence' per line"
        )
    try:
        return read_sentences(path)
    except ValueError as err:
        raise ValueError(f"{path} is not a sentence-classification file: {err}") from err
