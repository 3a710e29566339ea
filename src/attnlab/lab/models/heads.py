r"""Task heads: from encoded sequences to logits.

* :class:`TokenHead`: one label per vector (N -> N), e.g. part-of-speech tagging.
* :class:`SequenceHead`: one label per sequence (N -> 1), e.g. sentiment; pools first.

Heads are called ``head(hidden, lengths) -> HeadOutput``. (N -> M models are encoder-decoders
of their own: :mod:`attnlab.lab.models.seq2seq`, on the :class:`~attnlab.lab.models.Seq2Seq` protocol.)

Legend: ``b`` batch, ``n`` positions, ``d`` width, ``L`` labels.
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor, nn

from attnlab.dropout import Dropout
from attnlab.lab.models.pooling import POOLINGS

__all__ = ["HeadOutput", "TokenHead", "SequenceHead"]


class HeadOutput(NamedTuple):
    logits: Tensor  # (b, n, L) token head, (b, L) sequence head
    weights: Tensor | None  # attention pooling (b, n); else None


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
        self.drop = Dropout(dropout)
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
            (:data:`~attnlab.lab.models.pooling.POOLINGS`), or a pooling module.
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
        self.drop = Dropout(dropout)
        self.proj = nn.Linear(dim, num_labels)

    def forward(self, hidden: Tensor, lengths: Tensor) -> HeadOutput:
        pooled, weights = self.pool(hidden, lengths)  # (b, d), (b, n) | None
        return HeadOutput(self.proj(self.drop(pooled)), weights)  # (b, L)
