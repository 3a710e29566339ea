"""Readers of two more NLTK tagged corpora, MASC and the Penn Treebank sample, by document.

- **MASC** (``masc_tagged.zip``): ``word_TAG`` tokens, one sentence per line, one file per
  document under ``spoken/`` and ``written/`` (``categories.txt`` is not a document). A token
  is split at its *last* underscore; a token without one (a stray ``.`` or a mangled URL, a
  few dozen in 500k tokens) keeps its text as the word and gets the tag ``""``.
- **Penn Treebank sample** (``treebank.zip``, ``tagged/wsj_NNNN.pos``): ``word/TAG`` tokens
  over several lines (4,009 sentences), ``[ ... ]`` around base noun phrases, ``=====`` lines between
  paragraphs. As NLTK's reader does, a sentence ends after a token tagged ``.`` outside the
  brackets, and at a paragraph's or the file's end. Escaped slashes (``1\\/2``) are unescaped
  and the empty elements of the annotation (tag ``-NONE-``: traces like ``*T*-1``) dropped,
  since they are not words of the text.

Both return ``{fileid: [(tokens, tags), ...]}`` in sorted file-id order, like
:func:`~attnlab.lab.data.readers.read_nltk_tagged_zip`.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterator

from attnlab.lab.data.readers.base import StrPath, TaggedSentence

__all__ = ["read_masc_zip", "read_treebank_zip", "parse_underscore", "parse_treebank_pos"]

_TREEBANK_DOC = re.compile(r"wsj_\d{4}\.pos")


def parse_underscore(text: str) -> Iterator[TaggedSentence]:
    """Sentences of ``word_TAG`` text, one per line (MASC)."""
    for line in text.split("\n"):
        parts = [t.rpartition("_") if "_" in t else (t, "", "") for t in line.split()]
        if parts:
            yield tuple(p[0] or p[2] for p in parts), tuple(p[2] if p[0] else "" for p in parts)


def parse_treebank_pos(text: str) -> Iterator[TaggedSentence]:
    """Sentences of a Penn Treebank ``.pos`` file (see the module docstring)."""
    tokens: list[str] = []
    tags: list[str] = []
    for line in text.split("\n"):
        if line.startswith("====="):  # a paragraph ends, and so does its sentence
            if tokens:
                yield tuple(tokens), tuple(tags)
            tokens, tags = [], []
            continue
        depth = 0
        for item in line.split():
            if item in ("[", "]"):
                depth += 1 if item == "[" else -1
                continue
            word, _, tag = item.rpartition("/")
            if not word:  # a bare token: no tag to split off
                word, tag = item, ""
            if tag != "-NONE-":
                tokens.append(word.replace("\\/", "/"))
                tags.append(tag)
            if tag == "." and depth <= 0 and tokens:
                yield tuple(tokens), tuple(tags)
                tokens, tags = [], []
    if tokens:
        yield tuple(tokens), tuple(tags)


def _read_documents(
    zip_path: StrPath, keep: Callable[[str], bool], parse: Callable[[str], Iterator]
) -> dict[str, list[TaggedSentence]]:
    with zipfile.ZipFile(zip_path) as zf:
        members = sorted(n for n in zf.namelist() if keep(n))
        if not members:
            raise ValueError(f"{zip_path}: no document of the expected layout in the zip")
        return {name: list(parse(zf.read(name).decode("utf-8"))) for name in members}


def read_masc_zip(zip_path: StrPath) -> dict[str, list[TaggedSentence]]:
    """MASC's documents (``masc_tagged/{spoken,written}/*.txt``) and their sentences.

    Raises:
        ValueError: the zip holds no such document.
    """

    def keep(name: str) -> bool:
        return name.endswith(".txt") and name.count("/") == 2  # not categories.txt

    return _read_documents(zip_path, keep, parse_underscore)


def read_treebank_zip(zip_path: StrPath) -> dict[str, list[TaggedSentence]]:
    """The treebank sample's documents (``treebank/tagged/wsj_NNNN.pos``) and their sentences.

    Raises:
        ValueError: the zip holds no such document.
    """

    def keep(name: str) -> bool:
        return name.startswith("treebank/tagged/") and bool(
            _TREEBANK_DOC.fullmatch(name.rpartition("/")[2])
        )

    return _read_documents(zip_path, keep, parse_treebank_pos)
