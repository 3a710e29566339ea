r"""Character-level word features: a 1-D CNN over each word's characters, max-pooled.

A word that was never seen in training maps to ``<unk>``, and all unknown words would share one
vector. Its characters still tell a lot: ``-ing``, ``-ly``, ``-ed``, a capital first letter.
Following Ma & Hovy (2016) and Santos & Zadrozny (2014),

.. math::
    f(w) = \max_{t} \mathrm{ReLU}\big(W * [e(c_{t-r}); \dots; e(c_{t+r})] + b\big),

a convolution of width :math:`2r+1` over the character embeddings, max-pooled over the word's
characters (padding excluded), gives every word, seen or not, a vector of its own.

Legend: ``b`` batch, ``n`` words, ``c`` characters per word, ``e`` char embedding width,
``f`` filters.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.models.vocab import PAD_ID

__all__ = ["CharCNN", "ROW_MULTIPLE", "unique_rows"]

#: the words convolved at once are padded to a multiple of this (see ``CharCNN.forward``)
ROW_MULTIPLE = 64


class CharCNN(nn.Module):
    """Per-word features from characters: embedding, convolution, max-pool over characters.

    Args:
        char_vocab_size: number of character ids (``0`` is padding).
        char_dim: character embedding width.
        channels: number of filters, the output width.
        kernel: convolution width in characters (odd).

    Shapes:
        - chars: ``(b, n, c)`` long, ``0`` = padding
        - output: ``(b, n, channels)``; all-padding words (padded positions) give zeros
    """

    def __init__(
        self, char_vocab_size: int, *, char_dim: int = 32, channels: int = 64, kernel: int = 3
    ) -> None:
        super().__init__()
        if kernel < 1 or kernel % 2 == 0:
            raise ValueError(f"kernel must be odd and >= 1 (centred windows), got {kernel}")
        self.out_dim = channels
        self.embed = nn.Embedding(char_vocab_size, char_dim, padding_idx=PAD_ID)
        self.conv = nn.Conv1d(char_dim, channels, kernel, padding=kernel // 2)

    def forward(self, chars: Tensor) -> Tensor:
        if chars.dim() != 3:
            raise ValueError(f"chars: expected shape (batch, seq, chars), got {tuple(chars.shape)}")
        b, n, c = chars.shape
        flat = chars.reshape(b * n, c)  # (b*n, c)
        if torch.compiler.is_compiling():  # a data-dependent size would break the graph
            return self._features(flat).view(b, n, -1)  # (b, n, f)
        # Only the words that have characters are convolved: the padded positions of a batch
        # of sentences (often most of its b*n slots) are all-padding words, whose features
        # are zeros anyway. The result is the same; the work is the real words'.
        words = (flat != PAD_ID).any(dim=1).nonzero().squeeze(1)  # (w,) rows with characters
        # A word's features depend on its characters alone, and a batch of sentences repeats
        # its words ("the", ",", "of": about half of a batch of Brown's tokens are repeats), so
        # each distinct spelling is convolved once and its features are shared; the gradient of
        # a shared row is the sum over its occurrences, as before.
        spellings, which = unique_rows(flat.index_select(0, words))
        # A count of spellings that differs in every batch would be a new convolution shape in
        # every step, and oneDNN compiles a kernel per shape; padded to a multiple of
        # ROW_MULTIPLE with empty words (zeros, no gradient), a few shapes recur.
        u = len(spellings)
        h = self._features(F.pad(spellings, (0, 0, 0, -u % ROW_MULTIPLE), value=PAD_ID))[:u]
        out = h.new_zeros(b * n, h.shape[1]).index_copy(0, words, h.index_select(0, which))
        return out.view(b, n, -1)  # (b, n, f)

    def _features(self, words: Tensor) -> Tensor:
        """``(w, c)`` character ids -> ``(w, f)`` features; a word without characters gets
        zeros."""
        e = self.embed(words).transpose(1, 2)  # (w, e, c)
        h = F.relu(self.conv(e))  # (w, f, c)
        # The max ignores padded character slots, so a word's vector does not depend on the
        # longest word of its batch. After the ReLU every value is >= 0, so a padded slot set
        # to 0 never exceeds the max of the real ones, and a word without characters gets 0.
        # max_pool1d, not amax: its backward routes the gradient to one index instead of
        # comparing every slot with the max (4-5% of pos's training step).
        valid = (words != PAD_ID).unsqueeze(1)  # (w, 1, c)
        return F.max_pool1d(h.masked_fill(~valid, 0.0), h.shape[2]).squeeze(2)  # (w, f)


def unique_rows(rows: Tensor) -> tuple[Tensor, Tensor]:
    """The distinct rows of a ``(w, c)`` integer tensor and, for each row, the index of its
    distinct row: ``distinct[which] == rows``, as ``torch.unique(rows, dim=0,
    return_inverse=True)`` (in another order) at a fraction of its cost on CPU, where it
    compares rows pair by pair, a tensor operation each (1.6 ms for a batch of 1,400 words;
    this: 0.2 ms).

    Each row is hashed to one integer, the hashes are made unique, and every row is checked
    against its group's representative; a collision (two spellings, one hash) fails the check
    and falls back to ``torch.unique``, so the answer is exact either way.
    """
    keys = (rows * _hash_weights(rows.shape[1], rows.device)).sum(dim=1)  # (w,), wraps mod 2^64
    hashes, which = torch.unique(keys, return_inverse=True)
    index = torch.arange(len(rows), device=rows.device)
    first = index.new_empty(len(hashes)).scatter_(0, which, index)  # a row of each hash
    distinct = rows.index_select(0, first)
    if not torch.equal(distinct.index_select(0, which), rows):  # a collision
        return torch.unique(rows, dim=0, return_inverse=True)
    return distinct, which


@functools.cache
def _hash_weights(width: int, device: torch.device) -> Tensor:
    """``width`` fixed odd 63-bit multipliers, one per character slot."""
    gen = torch.Generator().manual_seed(width)
    return (torch.randint(1, 2**62, (width,), generator=gen) * 2 + 1).to(device)
