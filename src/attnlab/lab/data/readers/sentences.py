"""Reader of sentence-classification files (Kim 2014): ``label<space>tokenized sentence`` per
line, the label a non-negative integer.

Malformed input raises ``ValueError`` naming the file and the line number.
"""

import logging
from collections.abc import Iterator

from attnlab.lab.data.readers.base import LabeledSentence, StrPath

__all__ = ["iter_sentences", "iter_numbered_sentences", "read_sentences"]

logger = logging.getLogger(__name__)


def iter_sentences(path: StrPath) -> Iterator[LabeledSentence]:
    """Stream ``(tokens, label)`` pairs from a ``label<space>tokenized sentence`` file; see
    :func:`iter_numbered_sentences`."""
    for tokens, label, _ in iter_numbered_sentences(path):
        yield tokens, label


def iter_numbered_sentences(path: StrPath) -> Iterator[tuple[tuple[str, ...], int, int]]:
    """Stream ``(tokens, label, line)`` from a ``label<space>tokenized sentence`` file.

    Blank lines are skipped. Lines are decoded as UTF-8; a line that is not valid UTF-8 is
    decoded as Latin-1 and logged (``TREC.train.all`` line 66 holds one stray ``0xf0`` byte).

    Args:
        path: The file, e.g. ``stsa.binary.train``.

    Raises:
        ValueError: A line whose first field is not a non-negative integer, or with no tokens.
    """
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                line = raw.decode("latin-1")
                logger.warning("%s:%d: not valid UTF-8; decoded as Latin-1", path, lineno)
            fields = line.split()
            if not fields:
                continue
            label = fields[0]
            if not (label.isascii() and label.isdigit()) or len(fields) < 2:
                raise ValueError(
                    f"{path}:{lineno}: expected 'label<space>tokenized sentence' with an "
                    f"integer label, got {line.rstrip()!r}"
                )
            yield tuple(fields[1:]), int(label), lineno


def read_sentences(path: StrPath) -> list[LabeledSentence]:
    """Read all ``(tokens, label)`` pairs of a sentence file; see :func:`iter_sentences`."""
    return list(iter_sentences(path))
