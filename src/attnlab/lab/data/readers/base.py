"""What the readers return and take: sentences as tuples, and file paths.

A sentence is immutable (tuples), because the corpora built from it are cached and shared.
"""

import os

TaggedSentence = tuple[tuple[str, ...], tuple[str, ...]]
"""``(tokens, tags)``, equally long."""

LabeledSentence = tuple[tuple[str, ...], int]
"""``(tokens, label)``."""

StrPath = str | os.PathLike[str]
"""A file path: a string or a path-like object."""
