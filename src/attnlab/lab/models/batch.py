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

import torch
from torch import Tensor

from attnlab.lab.models.vocab import CharVocabulary, Vocabulary

__all__ = ["encode_batch", "word_shape", "WORD_SHAPES"]

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
    tokens = torch.zeros(b, n, dtype=torch.long)  # (b, n)
    lengths = torch.tensor([len(s) for s in sentences], dtype=torch.long)  # (b,)
    for i, s in enumerate(sentences):
        tokens[i, : len(s)] = torch.tensor(vocab.encode(s), dtype=torch.long)
    batch = {"tokens": tokens, "lengths": lengths}
    if char_vocab is not None:
        words = [char_vocab.encode(s, max_chars=max_chars) for s in sentences]
        c = max((len(w) for s in words for w in s), default=1)
        chars = torch.zeros(b, n, c, dtype=torch.long)  # (b, n, c)
        for i, s in enumerate(words):
            for t, w in enumerate(s):
                chars[i, t, : len(w)] = torch.tensor(w, dtype=torch.long)
        batch["chars"] = chars
    if shapes:
        shape_ids = torch.zeros(b, n, dtype=torch.long)  # (b, n)
        for i, s in enumerate(sentences):
            shape_ids[i, : len(s)] = torch.tensor([word_shape(t) for t in s], dtype=torch.long)
        batch["shapes"] = shape_ids
    return batch
