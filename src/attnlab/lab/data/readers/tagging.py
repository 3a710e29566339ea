"""Readers of the tagging formats: CoNLL-U files and NLTK tagged corpora in a zip.

- **CoNLL-U** (Universal Dependencies): one token per line, ten tab-separated columns, a blank
  line after each sentence, ``#`` comments. Multiword-token lines (ids like ``3-4``) and empty
  nodes (ids like ``5.1``) are skipped, so a sentence is its syntactic words.
- **NLTK tagged corpora in a zip**, two layouts:

  - ``"slash"`` (Brown): ``word/tag`` tokens separated by whitespace, one sentence per line,
    blank lines between paragraphs. Tags are upper-cased, as NLTK's ``str2tuple`` does, so
    ``np-tl`` becomes ``NP-TL``; this is the form the keys of ``en-brown.map`` use (all 472
    Brown tags, suffixes ``-HL``, ``-TL``, ``-NC``, ``*`` and ``$`` included, are keys).
  - ``"columns"`` (CoNLL-2000): ``word POS chunk`` per line, a blank line between sentences.

Malformed input raises ``ValueError`` naming the file (``zip:member`` for zip members) and the
line number.
"""

import re
import zipfile
from collections.abc import Iterator, Mapping, Sequence

import conllu
from conllu.exceptions import ParseException

from attnlab.lab.data.readers.base import StrPath, TaggedSentence

__all__ = [
    "CONLLU_TAG_COLUMNS",
    "NLTK_LAYOUTS",
    "iter_conllu",
    "read_conllu",
    "list_zip_fileids",
    "read_nltk_tagged_zip",
    "load_tagmap",
    "parse_slash",
    "parse_columns",
]

CONLLU_TAG_COLUMNS = ("form", "lemma", "upos", "xpos", "deprel")
NLTK_LAYOUTS = ("slash", "columns")


# -- CoNLL-U ----------------------------------------------------------------------------------


def iter_conllu(path: StrPath, column: str = "upos") -> Iterator[TaggedSentence]:
    """Stream ``(tokens, tags)`` sentences from a CoNLL-U file.

    Args:
        path: The ``.conllu`` file (UTF-8).
        column: Which column gives the tags: one of ``CONLLU_TAG_COLUMNS``.

    Raises:
        ValueError: Unknown ``column``; a malformed sentence; a token whose ``column`` is empty
            (``_``), e.g. ``xpos`` in a treebank without language-specific tags.
    """
    if column not in CONLLU_TAG_COLUMNS:
        raise ValueError(f"column must be one of {CONLLU_TAG_COLUMNS}, got {column!r}")
    with open(path, encoding="utf-8") as fh:
        block: list[str] = []
        start = 0
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                if not block:
                    start = lineno
                block.append(line)
            elif block:
                yield _conllu_sentence(path, start, block, column)
                block = []
        if block:
            yield _conllu_sentence(path, start, block, column)


def read_conllu(path: StrPath, column: str = "upos") -> list[TaggedSentence]:
    """Read all ``(tokens, tags)`` sentences of a CoNLL-U file; see :func:`iter_conllu`."""
    return list(iter_conllu(path, column))


# The CoNLL-U columns up to DEPREL. Only those up to the tag column are parsed, and HEAD and
# FEATS are kept as raw strings: about twice as fast as parsing all ten columns.
_CONLLU_FIELDS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel")
_CONLLU_RAW = {"feats": lambda line, i: line[i], "head": lambda line, i: line[i]}


def _conllu_sentence(path: StrPath, start: int, block: list[str], column: str) -> TaggedSentence:
    n_comments = 0
    for offset, line in enumerate(block):
        if line.startswith("#"):
            n_comments += 1
        elif (n_columns := line.count("\t") + 1) != 10:
            raise ValueError(
                f"{path}:{start + offset}: expected 10 tab-separated CoNLL-U columns, "
                f"got {n_columns}: {line.rstrip()!r}"
            )
    fields = _CONLLU_FIELDS[: _CONLLU_FIELDS.index(column) + 1]
    try:
        sentences = conllu.parse("".join(block), fields=fields, field_parsers=_CONLLU_RAW)
    except (ParseException, ValueError) as err:
        raise ValueError(f"{path}:{start}: malformed CoNLL-U sentence: {err}") from err
    if len(sentences) != 1:
        raise ValueError(f"{path}:{start}: expected one sentence, parsed {len(sentences)}")
    # Comments become metadata; token k sits on line start + n_comments + k.
    tokens: list[str] = []
    tags: list[str] = []
    for k, token in enumerate(sentences[0]):
        if not isinstance(token["id"], int):  # (3, "-", 4) multiword token, (5, ".", 1) empty node
            continue
        form, tag = token.get("form"), token.get(column)
        if not isinstance(form, str) or not isinstance(tag, str):
            raise ValueError(
                f"{path}:{start + n_comments + k}: token has no form or no {column!r} "
                f"(got form={form!r}, {column}={tag!r})"
            )
        tokens.append(form)
        tags.append(tag)
    return tuple(tokens), tuple(tags)


# -- NLTK tagged corpora in a zip ---------------------------------------------------------------


def _prefix(member_prefix: str) -> str:
    return member_prefix.rstrip("/") + "/"


def list_zip_fileids(
    zip_path: StrPath, member_prefix: str, pattern: str | None = None
) -> list[str]:
    """Sorted file ids (member names relative to ``member_prefix``) of an NLTK corpus zip.

    Args:
        zip_path: The corpus zip, e.g. ``brown.zip``.
        member_prefix: Folder inside the zip, e.g. ``"brown"``.
        pattern: If given, keep only ids that fully match this regex (NLTK's Brown reader uses
            ``r"c[a-z]\\d\\d"``, which leaves out ``README``, ``CONTENTS`` and ``cats.txt``).
    """
    prefix = _prefix(member_prefix)
    with zipfile.ZipFile(zip_path) as zf:
        ids = [n[len(prefix) :] for n in zf.namelist() if n.startswith(prefix)]
    ids = [i for i in ids if i and not i.endswith("/")]
    if pattern is not None:
        regex = re.compile(pattern)
        ids = [i for i in ids if regex.fullmatch(i)]
    return sorted(ids)


def read_nltk_tagged_zip(
    zip_path: StrPath,
    member_prefix: str,
    fileids: Sequence[str] | None = None,
    tagmap: Mapping[str, str] | None = None,
    *,
    layout: str = "slash",
    column: int = 1,
) -> dict[str, list[TaggedSentence]]:
    """Read tagged sentences from an NLTK corpus zip, grouped by file id.

    Args:
        zip_path: The corpus zip, e.g. ``brown.zip`` or ``conll2000.zip``.
        member_prefix: Folder inside the zip, e.g. ``"brown"``.
        fileids: Files to read, relative to ``member_prefix`` (``"ca01"``, ``"train.txt"``).
            Default: every file under the prefix (for Brown pass
            ``list_zip_fileids(zip_path, "brown", r"c[a-z]\\d\\d")`` to skip the README).
        tagmap: If given, map every tag through it (after upper-casing, for ``"slash"``), e.g.
            the Brown-to-universal map from :func:`load_tagmap`. A tag missing from the map is
            an error (NLTK's ``map_tag`` would quietly give ``"X"``).
        layout: ``"slash"`` (Brown: ``word/tag`` tokens, one sentence per line) or
            ``"columns"`` (CoNLL-2000: whitespace-separated columns, blank line between
            sentences).
        column: For ``"columns"``: index of the tag column (1 = POS in CoNLL-2000).

    Returns:
        File id to its sentences, in the order of ``fileids`` (sorted if not given).

    Raises:
        ValueError: Unknown layout or file id; a malformed line; a tag missing from ``tagmap``.
    """
    if layout not in NLTK_LAYOUTS:
        raise ValueError(f"layout must be one of {NLTK_LAYOUTS}, got {layout!r}")
    if layout == "columns" and column < 1:
        raise ValueError(f"column must be >= 1 (column 0 holds the words), got {column}")
    if fileids is None:
        fileids = list_zip_fileids(zip_path, member_prefix)
    prefix = _prefix(member_prefix)
    out: dict[str, list[TaggedSentence]] = {}
    with zipfile.ZipFile(zip_path) as zf:
        names = set(zf.namelist())
        for fileid in fileids:
            member = prefix + fileid
            if member not in names:
                raise ValueError(f"{zip_path} has no member {member!r} (fileid {fileid!r})")
            text = zf.read(member).decode("utf-8")
            where = f"{zip_path}:{member}"
            if layout == "slash":
                out[fileid] = list(parse_slash(text, where, tagmap))
            else:
                out[fileid] = list(parse_columns(text, where, tagmap, column))
    return out


def _map_tags(
    tags: tuple[str, ...], tagmap: Mapping[str, str] | None, where: str, lineno: int
) -> tuple[str, ...]:
    if tagmap is None:
        return tags
    try:
        return tuple(tagmap[t] for t in tags)
    except KeyError as err:
        raise ValueError(f"{where}:{lineno}: tag {err.args[0]!r} is not in the tag map") from None


def parse_slash(
    text: str, where: str, tagmap: Mapping[str, str] | None, *, upper: bool = True
) -> Iterator[TaggedSentence]:
    """Sentences of ``word/tag`` text, one per line (the ``"slash"`` layout); ``where`` names
    the text in errors, ``upper`` upper-cases the tags before ``tagmap`` maps them."""
    # Split on "\n" only: str.splitlines would also split on form feeds and other separators.
    for lineno, line in enumerate(text.split("\n"), 1):
        parts = [t.rpartition("/") for t in line.split()]
        if not parts:
            continue
        for word, slash, tag in parts:
            if not (word and slash and tag):
                token = word + slash + tag
                raise ValueError(f"{where}:{lineno}: expected word/tag, got token {token!r}")
        tags = tuple(p[2].upper() if upper else p[2] for p in parts)
        yield tuple(p[0] for p in parts), _map_tags(tags, tagmap, where, lineno)


def parse_columns(
    text: str, where: str, tagmap: Mapping[str, str] | None, column: int
) -> Iterator[TaggedSentence]:
    """Sentences of ``word ... tag ...`` columns text, a blank line between sentences (the
    ``"columns"`` layout), tags from column ``column``; ``where`` names the text in errors."""
    tokens: list[str] = []
    tags: list[str] = []
    start = 0
    for lineno, line in enumerate(text.split("\n"), 1):
        fields = line.split()
        if fields:
            if len(fields) <= column:
                raise ValueError(
                    f"{where}:{lineno}: expected at least {column + 1} columns, got {line!r}"
                )
            if not tokens:
                start = lineno
            tokens.append(fields[0])
            tags.append(fields[column])
        elif tokens:
            yield tuple(tokens), _map_tags(tuple(tags), tagmap, where, start)
            tokens, tags = [], []
    if tokens:
        yield tuple(tokens), _map_tags(tuple(tags), tagmap, where, start)


def load_tagmap(zip_path: StrPath, member: str) -> dict[str, str]:
    """Read a tag map (``fine<TAB>coarse`` per line), e.g. ``universal_tagset/en-brown.map``.

    Args:
        zip_path: The zip holding the map, e.g. ``universal_tagset.zip``.
        member: The map's member name.

    Raises:
        ValueError: A line without exactly one tab, or a fine tag listed twice.
    """
    where = f"{zip_path}:{member}"
    with zipfile.ZipFile(zip_path) as zf:
        text = zf.read(member).decode("utf-8")
    mapping: dict[str, str] = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.strip()
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != 2:
            raise ValueError(f"{where}:{lineno}: expected 'fine<TAB>coarse', got {line!r}")
        fine, coarse = fields
        if fine in mapping:
            raise ValueError(f"{where}:{lineno}: tag {fine!r} is mapped twice")
        mapping[fine] = coarse
    return mapping
