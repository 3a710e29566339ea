r"""Input encoders: from a batch of token ids to a sequence of vectors ``(b, n, dim)``.

Every input encoder reads the batch dict (``"tokens"`` and, if it uses them, ``"chars"`` and
``"shapes"``; see :mod:`attnlab.lab.models.batch`) and has an ``out_dim`` attribute.

* :class:`OneHotInput` is the first encoding of the lecture: word ``w`` becomes the one-hot
  vector :math:`e_w \in \{0, 1\}^V`.
* :class:`EmbeddingInput` learns a dense vector per word and handles unknown words with
  ``<unk>`` + word dropout and, optionally, character-level and word-shape features.

One-hot followed by a linear map *is* an embedding lookup: :math:`e_w^\top W = W_{w,:}`, the
``w``-th row of :math:`W`. So a one-hot input with a projection never builds the ``V``-wide
vectors; it indexes the projection's weight.

Legend: ``b`` batch, ``n`` positions, ``c`` characters per word, ``V`` vocabulary size.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.dropout import Dropout
from attnlab.lab.models.batch import WORD_SHAPES
from attnlab.lab.models.chars import CharCNN
from attnlab.lab.models.vocab import PAD_ID, UNK_ID
from attnlab.registry import Registry

__all__ = ["INPUTS", "OneHotInput", "EmbeddingInput", "word_dropout"]

INPUTS: Registry = Registry("input")


def _tokens(batch: Mapping[str, Tensor]) -> Tensor:
    tokens = batch["tokens"]
    if tokens.dim() != 2 or tokens.dtype != torch.long:
        raise ValueError(
            f"batch['tokens']: expected a long tensor (batch, seq), got {tokens.dtype} "
            f"{tuple(tokens.shape)}"
        )
    return tokens


def word_dropout(tokens: Tensor, p: float, *, unk_id: int = UNK_ID, pad_id: int = PAD_ID) -> Tensor:
    """Replace each non-padding token by ``unk_id`` with probability ``p``.

    Training sees ``<unk>`` in real contexts, so its embedding learns what an unknown word in
    such a context usually is (Kiperwasser & Goldberg 2016 drop rare words; uniform here).
    """
    if p <= 0.0:
        return tokens
    drop = (torch.rand(tokens.shape, device=tokens.device) < p) & (tokens != pad_id)
    return tokens.masked_fill(drop, unk_id)


@INPUTS.register("onehot")
class OneHotInput(nn.Module):
    r"""One-hot word vectors, optionally followed by a bias-free linear map to ``dim``.

    .. math::
        x_t = e_{w_t} \in \{0,1\}^V \quad (\texttt{dim=None}), \qquad
        x_t = e_{w_t}^\top W = W_{w_t,:} \in \mathbb{R}^{\texttt{dim}} \quad \text{otherwise}.

    The second form is computed as a row lookup in ``W`` (the identity above), not as a
    product with a ``V``-wide vector. Padding positions give zero vectors.

    Args:
        vocab_size: ``V``, the number of word ids.
        dim: width of the linear map, or None for the raw one-hot vectors (``out_dim = V``;
            sensible only for small vocabularies).

    Shapes:
        - batch["tokens"]: ``(b, n)`` long
        - output: ``(b, n, out_dim)``
    """

    def __init__(self, vocab_size: int, *, dim: int | None = None) -> None:
        super().__init__()
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2 (<pad> and <unk>), got {vocab_size}")
        self.vocab_size = vocab_size
        self.out_dim = vocab_size if dim is None else dim
        # W of x W: (V, dim), stored as a Linear's weight (dim, V) so that
        # linear(one_hot(x)) == forward(x) is the textbook form.
        self.proj = None if dim is None else nn.Linear(vocab_size, dim, bias=False)

    def forward(self, batch: Mapping[str, Tensor]) -> Tensor:
        tokens = _tokens(batch)  # (b, n)
        keep = (tokens != PAD_ID).unsqueeze(-1)  # (b, n, 1)
        if self.proj is None:
            x = F.one_hot(tokens, self.vocab_size).to(torch.get_default_dtype())  # (b, n, V)
        else:
            x = F.embedding(tokens, self.proj.weight.t())  # (b, n, dim): row w of W
        return x * keep


@INPUTS.register("embedding")
class EmbeddingInput(nn.Module):
    r"""Learned word embeddings, with unknown-word handling.

    .. math::
        x_t = W^P \,[\,E_{w_t};\ \mathrm{CharCNN}(w_t);\ S_{\mathrm{shape}(w_t)}\,]

    (a plain lookup :math:`x_t = E_{w_t}` without character or shape features).

    Unknown words: (a) they map to ``<unk>``, whose embedding is trained by *word dropout*
    (during training each token becomes ``<unk>`` with probability ``word_dropout``); (b) with
    ``char_vocab_size``, a character CNN adds features from the spelling, so two different
    unseen words (``blorfing``, ``Blorfton``) still get different vectors; its input is kept
    when word dropout hides the word id, which teaches the model to rely on it; (c) with
    ``shape_dim``, an embedding of the word shape (:func:`~attnlab.lab.models.batch.word_shape`).

    Args:
        vocab_size: number of word ids (``0`` = ``<pad>``, ``1`` = ``<unk>``).
        dim: output width (and word embedding width).
        char_vocab_size: number of character ids; enables character features (needs
            ``batch["chars"]``).
        char_dim: character embedding width.
        char_channels: character CNN filters (default ``dim // 2``).
        char_kernel: character CNN width (odd).
        shape_dim: width of the word-shape embedding; 0 disables it (else needs
            ``batch["shapes"]``).
        word_dropout: probability of replacing a word id by ``<unk>`` during training.
        dropout: dropout on the output vectors during training.
        embed_init: draw the word embeddings from :math:`U[-a, a]` with this ``a`` (Kim 2014:
            0.25, the spread of pre-trained vectors); None: PyTorch's :math:`N(0, 1)`. Why it
            matters from scratch: Adam moves a weight by about ``lr`` per step whatever its
            scale, so rows of norm :math:`\sqrt{d}` barely change in a few epochs, and a
            rarely seen word keeps its random vector.

    Shapes:
        - batch["tokens"]: ``(b, n)``; batch["chars"]: ``(b, n, c)``; batch["shapes"]: ``(b, n)``
        - output: ``(b, n, dim)``; zeros at padded positions
    """

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        *,
        char_vocab_size: int | None = None,
        char_dim: int = 32,
        char_channels: int | None = None,
        char_kernel: int = 3,
        shape_dim: int = 0,
        word_dropout: float = 0.0,
        dropout: float = 0.0,
        embed_init: float | None = None,
    ) -> None:
        super().__init__()
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2 (<pad> and <unk>), got {vocab_size}")
        for name, p in (("word_dropout", word_dropout), ("dropout", dropout)):
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {p}")
        if char_vocab_size is None and char_channels is not None:
            raise ValueError("char_channels configures character features; pass char_vocab_size")
        self.out_dim = dim
        self.word_dropout = word_dropout
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=PAD_ID)
        if embed_init is not None:
            if not embed_init > 0:
                raise ValueError(f"embed_init must be > 0 (or None for N(0, 1)), got {embed_init}")
            with torch.no_grad():
                self.embed.weight.uniform_(-embed_init, embed_init)
                self.embed.weight[PAD_ID] = 0.0
        self.chars = None
        if char_vocab_size is not None:
            self.chars = CharCNN(
                char_vocab_size,
                char_dim=char_dim,
                channels=char_channels or max(dim // 2, 1),
                kernel=char_kernel,
            )
        self.shapes = (
            nn.Embedding(len(WORD_SHAPES), shape_dim, padding_idx=0) if shape_dim else None
        )
        width = dim + (self.chars.out_dim if self.chars else 0) + shape_dim
        self.proj = nn.Linear(width, dim) if width != dim else None
        self.drop = Dropout(dropout)

    def forward(self, batch: Mapping[str, Tensor]) -> Tensor:
        tokens = _tokens(batch)  # (b, n)
        if self.training:
            tokens = word_dropout(tokens, self.word_dropout)
        parts = [self.embed(tokens)]  # (b, n, dim)
        if self.chars is not None:
            if "chars" not in batch:
                raise ValueError(
                    "this input uses character features: the batch needs 'chars' (b, n, c); "
                    "encode it with a CharVocabulary (models.encode_batch(char_vocab=...))"
                )
            chars = batch["chars"]
            if chars.shape[:2] != tokens.shape:
                raise ValueError(
                    f"batch['chars'] {tuple(chars.shape)} does not match batch['tokens'] "
                    f"{tuple(tokens.shape)} in (batch, seq)"
                )
            parts.append(self.chars(chars))  # (b, n, f)
        if self.shapes is not None:
            if "shapes" not in batch:
                raise ValueError("this input uses word shapes: the batch needs 'shapes' (b, n)")
            parts.append(self.shapes(batch["shapes"]))  # (b, n, shape_dim)
        x = torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]
        if self.proj is not None:
            x = self.proj(x)  # (b, n, dim)
        keep = (batch["tokens"] != PAD_ID).unsqueeze(-1)  # (b, n, 1)
        return self.drop(x) * keep
