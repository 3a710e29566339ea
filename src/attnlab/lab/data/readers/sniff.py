"""Evaluation files of any format (``attnlab eval --data``, a task's ``--data.train``): which
format a file is in (:func:`sniff_text_format`, :func:`tagging_format`), and reading it as tagged
or labelled sentences, refusing a file of the other kind with a message that says so.
"""

import os

from attnlab.lab.data.readers.base import LabeledSentence, StrPath, TaggedSentence
from attnlab.lab.data.readers.sentences import iter_numbered_sentences
from attnlab.lab.data.readers.tables import LabelledRow
from attnlab.lab.data.readers.tagging import parse_columns, parse_slash, read_conllu

__all__ = [
    "TEXT_FILE_FORMATS",
    "TAGGING_FORMATS",
    "sniff_text_format",
    "tagging_format",
    "read_tagging_file",
    "tag_line",
    "read_classification_file",
    "classification_rows",
]

TEXT_FILE_FORMATS = ("conllu", "tsv", "slash", "columns", "sentences")
"""What :func:`sniff_text_format` recognises: the tagging formats, then ``label sentence``."""

TAGGING_FORMATS = ("conllu", "tsv", "slash", "columns")
"""The tagging formats: CoNLL-U, ``word<TAB>tag`` lines, ``word/TAG`` tokens, ``word TAG``
columns."""

_WHAT = {
    "conllu": "10 tab-separated CoNLL-U columns",
    "tsv": "'word<TAB>tag'",
    "slash": "word/TAG tokens",
    "columns": "'word TAG' columns",
}

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
    - ``"tsv"``: every line is a word and its tag separated by one tab;
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
    lines = [line for _, line in _first_lines(path)]
    if not lines:
        raise ValueError(f"{path}: empty file (no sentences)")
    if path.endswith(".conllu") or all(line.count("\t") == 9 for line in lines):
        return "conllu"
    if all(_is_tsv(line) for line in lines):
        return "tsv"
    rows = [line.split() for line in lines]
    if all(len(r) >= 2 and _is_label(r[0]) for r in rows):
        return "sentences"
    if all(all(_is_slash_token(t) for t in r) for r in rows):
        return "slash"
    if len({len(r) for r in rows}) == 1 and len(rows[0]) >= 2:
        return "columns"
    return None


def _first_lines(path: str) -> list[tuple[int, str]]:
    """The first lines with text (not ``#`` comments), numbered."""
    lines: list[tuple[int, str]] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip() and not line.startswith("#"):
                lines.append((n, line.rstrip("\r\n")))
                if len(lines) == _SNIFF_LINES:
                    break
    return lines


def _is_tsv(line: str) -> bool:
    fields = line.split("\t")
    return len(fields) == 2 and all(f.strip() for f in fields)


_FITS = {
    "conllu": lambda line, first: line.count("\t") == 9,
    "tsv": lambda line, first: _is_tsv(line),
    "slash": lambda line, first: all(_is_slash_token(t) for t in line.split()),
    "columns": lambda line, first: len(line.split()) == len(first.split()) >= 2,
}


def _misfit(path: str) -> str:
    """Where a file leaves every tagging format: its first line that breaks the format of its
    first line (``line N is not ... like line 1: ...``)."""
    lines = _first_lines(path)
    first = lines[0][1]
    fmt = next((f for f, fits in _FITS.items() if fits(first, first)), None)
    if fmt is None:
        return f"line {lines[0][0]} is in none of them: {first!r}"
    n, line = next(((n, x) for n, x in lines if not _FITS[fmt](x, first)), lines[0])
    return f"line {n} is not {_WHAT[fmt]} like line {lines[0][0]}: {line!r}"


def tagging_format(path: StrPath, fmt: str = "auto") -> str:
    """The tagging format of a file: ``fmt``, else from its extension (``.conllu``, ``.tsv``),
    else :func:`sniff_text_format`'s.

    Raises:
        ValueError: an unknown ``fmt``; a sentence-classification file; a file in no tagging
            format (naming its first line that breaks the format of the lines before it).
    """
    if fmt in TAGGING_FORMATS:
        return fmt
    if fmt != "auto":
        raise ValueError(f"tagging format must be auto or one of {TAGGING_FORMATS}, got {fmt!r}")
    name = os.fspath(path)
    if name.endswith((".tsv", ".tab")) and os.path.isfile(name):
        return "tsv"
    found = sniff_text_format(path)
    if found == "sentences":
        raise ValueError(
            f"{path} is not a tagging file: it holds 'label sentence' lines (a "
            f"sentence-classification file); expected {', '.join(_WHAT.values())}"
        )
    if found is None:
        raise ValueError(
            f"{path} is not a tagging file: expected CoNLL-U, word<TAB>tag lines, word/TAG tokens "
            f"or 'word TAG' columns; {_misfit(name)}"
        )
    return found


def parse_tsv(text: str, where: str) -> list[TaggedSentence]:
    """Sentences of ``word<TAB>tag`` lines, a blank line between sentences (a word may hold
    spaces); ``where`` names the text in errors."""
    sentences: list[TaggedSentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            if tokens:
                sentences.append((tuple(tokens), tuple(tags)))
                tokens, tags = [], []
            continue
        if not _is_tsv(line):
            raise ValueError(f"{where}:{lineno}: expected 'word<TAB>tag', got {line!r}")
        word, tag = line.split("\t")
        tokens.append(word)
        tags.append(tag.strip())
    if tokens:
        sentences.append((tuple(tokens), tuple(tags)))
    return sentences


def read_tagging_file(
    path: StrPath, column: str = "upos", fmt: str = "auto"
) -> list[TaggedSentence]:
    """Read ``(tokens, tags)`` sentences from a CoNLL-U (tags from ``column``: ``upos`` or
    ``xpos``), ``word<TAB>tag`` (blank line between sentences), ``word/TAG`` (one sentence per
    line) or ``word TAG ...`` columns file (blank line between sentences); the format is
    :func:`tagging_format`'s. Tags are kept as written.

    Raises:
        FileNotFoundError: no such file.
        ValueError: an empty file; a file in none of these formats, or a sentence-classification
            file (the message names the file and says what it found); a malformed line.
    """
    fmt = tagging_format(path, fmt)
    if fmt == "conllu":
        sentences = read_conllu(path, column)
    else:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        where = os.fspath(path)
        if fmt == "tsv":
            sentences = parse_tsv(text, where)
        elif fmt == "slash":
            sentences = list(parse_slash(text, where, None, upper=False))
        else:
            sentences = list(parse_columns(text, where, None, 1))
    if not sentences:
        raise ValueError(f"{path}: no sentences")
    return sentences


def _slash_tags(line: str) -> list[str]:
    return [t.rpartition("/")[2] for t in line.split() if _is_slash_token(t)]


def tag_line(path: StrPath, tag: str) -> int | None:
    """The first line of a tagging file where ``tag`` stands as a tag (in any format), for an
    error message; None if none does."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) == 10:  # CoNLL-U: UPOS or XPOS
                if tag in fields[3:5]:
                    return n
            elif tag in (*fields[1:2], *line.split()[1:2], *_slash_tags(line)):
                return n
    return None


def read_classification_file(path: StrPath) -> list[LabeledSentence]:
    """Read ``(tokens, label)`` pairs from a ``label<space>tokenized sentence`` file, refusing
    a tagging file with a message that says so (:func:`sniff_text_format`).

    Raises:
        FileNotFoundError: no such file.
        ValueError: an empty file; a tagging file; a line without an integer label.
    """
    return [(row.tokens, int(row.label)) for row in classification_rows(path)]


def classification_rows(path: StrPath) -> list[LabelledRow]:
    """:func:`read_classification_file`'s sentences as :class:`LabelledRow` (the label as a
    string, and its line)."""
    fmt = sniff_text_format(path)
    if fmt in TAGGING_FORMATS:
        raise ValueError(
            f"{path} is not a sentence-classification file: it looks like a tagging file "
            f"({fmt}); expected 'label<space>tokenized sentence' per line"
        )
    try:
        return [LabelledRow(t, str(y), n) for t, y, n in iter_numbered_sentences(path)]
    except ValueError as err:
        raise ValueError(f"{path} is not a sentence-classification file: {err}") from err
