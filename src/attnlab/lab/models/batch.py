"""Turn token lists into the padded batch a :class:`~attnlab.lab.models.SequenceModel` reads.

A batch is a dict of tensors:

* ``"tokens"`` ``(b, n)`` long: word ids, ``0`` (``<pad>``) beyond each length;
* ``"lengths"`` ``(b,)`` long: the number of real tokens of each sequence;
* ``"chars"`` ``(b, n, c)`` long, optional: character ids of each word, ``0`` = padding;
* ``"shapes"`` ``(b, n)`` long, optional: word-shape classes (:func:`word_shape`).

Labels are the trainer's business (``"labels"`` ``(b, n)`` or ``(b,)``) and pass through.

Legend: ``b`` batch, ``n`` positions, ``c`` characters per word.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from attnlab.lab.models.vocab import CharVocabulary, Vocabulary

__all__ = ["encode_batch", "pad_ids", "word_shape", "WORD_SHAPES"]

#: word-shape classes; id 0 is padding
WORD_SHAPES = (
    "<pad>",
    "lower",  # walked
    "Capitalized",  # Paris
    "UPPER",  # NATO
    "mixedCase",  # iPhone
    "digits",  # 1984
    "number-like",  # 3.5, 1,000, 2nd
    "punctuation",  # , . ?
    "hyphenated",  # well-known
    "other",
)


def word_shape(token: str) -> int:
    """A coarse shape class of ``token`` (an index into :data:`WORD_SHAPES`).

    Shape is a strong cue for the tag of an unseen word: capitalised words are mostly proper
    nouns, digit strings numbers, punctuation punctuation.
    """
    if not token:
        return WORD_SHAPES.index("other")
    if token.isdigit():
        return WORD_SHAPES.index("digits")
    if any(ch.isdigit() for ch in token):
        return WORD_SHAPES.index("number-like")
    if all(not ch.isalnum() for ch in token):
        return WORD_SHAPES.index("punctuation")
    if "-" in token.strip("-"):
        return WORD_SHAPES.index("hyphenated")
    if token.islower():
        return WORD_SHAPES.index("lower")
    if token.isupper():
        return WORD_SHAPES.index("UPPER")
    if token[0].isupper() and token[1:].lower() == token[1:]:
        return WORD_SHAPES.index("Capitalized")
    if any(ch.isupper() for ch in token):
        return WORD_SHAPES.index("mixedCase")
    return WORD_SHAPES.index("other")


def encode_batch(
    sentences: Sequence[Sequence[str]],
    vocab: Vocabulary,
    *,
    char_vocab: CharVocabulary | None = None,
    max_chars: int = 20,
    shapes: bool = False,
) -> dict[str, Tensor]:
    """Pad and encode ``sentences`` into a batch (see the module docstring).

    Args:
        sentences: ``b`` token lists (may differ in length; may be empty).
        vocab: word vocabulary.
        char_vocab: if given, also ``"chars"``, each word as ``<w> c_1 .. c_k </w>``.
        max_chars: longest character sequence kept per word (markers included).
        shapes: also ``"shapes"``, the :func:`word_shape` class of each word.
    """
    b = len(sentences)
    n = max((len(s) for s in sentences), default=0)
    n = max(n, 1)  # keep (b, 1) for a batch of empty sentences; their length is 0
    lengths = [len(s) for s in sentences]
    # Filled as numpy arrays and handed to torch once: a torch.tensor per word cost a
    # thousand small copies per batch (16% of the pos tagger's step).
    batch = {
        "tokens": pad_ids([vocab.encode(s) for s in sentences], n),  # (b, n)
        "lengths": torch.tensor(lengths, dtype=torch.long),  # (b,)
    }
    if char_vocab is not None:
        words = [char_vocab.encode(s, max_chars=max_chars) for s in sentences]
        c = max((len(w) for s in words for w in s), default=1)
        chars = np.zeros((b, n, c), dtype=np.int64)  # (b, n, c)
        for i, s in enumerate(words):
            for t, w in enumerate(s):
                chars[i, t, : len(w)] = w
        batch["chars"] = torch.from_numpy(chars)
    if shapes:
        batch["shapes"] = pad_ids([[word_shape(t) for t in s] for s in sentences], n)  # (b, n)
    return batch


def pad_ids(rows: Sequence[Sequence[int]], width: int, *, fill: int = 0) -> Tensor:
    """``(len(rows), width)`` long tensor of ``rows``, each padded with ``fill`` on the right."""
    out = np.full((len(rows), width), fill, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return torch.from_numpy(out)
