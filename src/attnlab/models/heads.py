r"""Task heads: from encoded sequences to logits.

* :class:`TokenHead`: one label per vector (N -> N), e.g. part-of-speech tagging.
* :class:`SequenceHead`: one label per sequence (N -> 1), e.g. sentiment; pools first.
* :class:`Seq2SeqHead`: the interface of a decoder (N -> M), e.g. translation; implemented by a
  later decoder head, plugged into :class:`~attnlab.models.SequenceModel` unchanged.

Token and sequence heads are called ``head(hidden, lengths) -> HeadOutput``.

Legend: ``b`` batch, ``n`` source positions, ``m`` target positions, ``d`` width,
``L`` labels, ``V`` target vocabulary.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import NamedTuple

from torch import Tensor, nn

from .pooling import POOLINGS

__all__ = ["HeadOutput", "TokenHead", "SequenceHead", "Seq2SeqHead"]


class HeadOutput(NamedTuple):
    logits: Tensor  # (b, n, L) token head, (b, L) sequence head, (b, m, V) seq2seq head
    weights: Tensor | None  # attention pooling (b, n); a decoder's cross-attention; else None


class TokenHead(nn.Module):
    r"""A label distribution for every position: :math:`\mathrm{logits}_t = W h_t + c`.

    Args:
        dim: width of the encoded vectors.
        num_labels: number of labels ``L``.
        dropout: dropout on the vectors before the linear map, during training.

    Shapes:
        - hidden: ``(b, n, dim)``; lengths: ``(b,)`` (unused: each position is independent;
          the loss ignores padded positions)
        - logits: ``(b, n, L)``
    """

    def __init__(self, dim: int, num_labels: int, *, dropout: float = 0.0) -> None:
        super().__init__()
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        self.dim, self.num_labels = dim, num_labels
        self.drop = nn.Dropout(dropout)
        self.proj = nn.Linear(dim, num_labels)

    def forward(self, hidden: Tensor, lengths: Tensor) -> HeadOutput:
        return HeadOutput(self.proj(self.drop(hidden)), None)  # (b, n, L)


class SequenceHead(nn.Module):
    r"""One label distribution per sequence: pool the valid positions, then a linear map.

    .. math::
        \mathrm{logits} = W\, \mathrm{pool}(h_0, \dots, h_{L-1}) + c

    Args:
        dim: width of the encoded vectors.
        num_labels: number of labels ``L``.
        pooling: ``"mean"`` (default), ``"max"``, ``"first"`` or ``"attention"``
            (:data:`~attnlab.models.pooling.POOLINGS`), or a pooling module.
        dropout: dropout on the pooled vector before the linear map, during training.

    Shapes:
        - hidden: ``(b, n, dim)``; lengths: ``(b,)``
        - logits: ``(b, L)``; weights: ``(b, n)`` for attention pooling, else None
    """

    def __init__(
        self,
        dim: int,
        num_labels: int,
        *,
        pooling: str | nn.Module = "mean",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}")
        self.dim, self.num_labels = dim, num_labels
        self.pool = POOLINGS.get(pooling)(dim) if isinstance(pooling, str) else pooling
        self.drop = nn.Dropout(dropout)
        self.proj = nn.Linear(dim, num_labels)

    def forward(self, hidden: Tensor, lengths: Tensor) -> HeadOutput:
        pooled, weights = self.pool(hidden, lengths)  # (b, d), (b, n) | None
        return HeadOutput(self.proj(self.drop(pooled)), weights)  # (b, L)


class Seq2SeqHead(nn.Module, ABC):
    r"""The interface of a decoder head (N -> M); a later issue implements it.

    The encoder's output is the decoder's *memory*; the head attends to it (cross-attention
    with ``masks.padding(memory_lengths)``) while it produces the target sequence.
    :class:`~attnlab.models.SequenceModel` calls :meth:`forward` with ``batch["targets"]``
    when its head is a ``Seq2SeqHead``, and :meth:`generate` from
    :meth:`SequenceModel.generate <attnlab.models.SequenceModel.generate>`; encoders, input
    encoders and the trainer (cross-entropy over ``logits`` against the next tokens) need no
    change.

    Implementations set ``dim`` (the memory width they expect) and ``num_labels`` (``V``).

    Shapes:
        - memory: ``(b, n, dim)``, zeros at padded positions; memory_lengths: ``(b,)``
        - targets: ``(b, m)`` long, the decoder input under teacher forcing (starting with
          ``<bos>``, padded with ``<pad>`` = 0)
        - logits: ``(b, m, V)``, position ``t`` predicts target token ``t + 1``
        - generate: ``(b, m')`` long token ids, ``m' <= max_len``
    """

    dim: int
    num_labels: int

    @abstractmethod
    def forward(self, memory: Tensor, memory_lengths: Tensor, targets: Tensor) -> HeadOutput:
        """Teacher-forced logits for every target position (causal: ``t`` sees ``<= t``)."""

    @abstractmethod
    def generate(self, memory: Tensor, memory_lengths: Tensor, *, max_len: int) -> Tensor:
        """Decode token ids (e.g. greedily) until ``<eos>`` or ``max_len`` tokens."""
