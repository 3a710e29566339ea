"""The one protocol of encoder-decoders (N -> M), :class:`Seq2Seq`, and what it returns (its own
module, so the model files, :mod:`attnlab.lab.models.decoding` and the ``g2p`` task share it
without importing each other).

Legend: ``b`` batch, ``m`` source positions, ``n`` target positions, ``h`` heads, ``V`` target
vocabulary size.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

from torch import Tensor

__all__ = ["DecodeOutput", "Memory", "Seq2Seq"]


class Memory(NamedTuple):
    """The encoded source."""

    out: Tensor  # (b, m, dim), zeros at padded positions
    lengths: Tensor  # (b,) long


class DecodeOutput(NamedTuple):
    logits: Tensor  # (b, n, V): the next token after each input position
    state: Any  # what the next call continues from (None when use_cache=False)
    cross_weights: list[Tensor] | None  # per layer (b, h, n, m) when need_weights


@runtime_checkable
class Seq2Seq(Protocol):
    """What greedy and beam decoding (:mod:`attnlab.lab.models.decoding`) and the ``g2p`` task need
    of an encoder-decoder: :class:`~attnlab.lab.models.seq2seq.TransformerSeq2Seq` and
    :class:`~attnlab.lab.models.seq2seq_rnn.LSTMSeq2Seq` are two.

    Shapes: src ``(b, m)`` long, src_lengths ``(b,)``, tokens / tgt_in ``(b, n)`` long
    (starting with ``<bos>``; id 0 = padding), logits ``(b, n, V)``.
    """

    def encode(self, src: Tensor, src_lengths: Tensor) -> Memory:
        """The source read once; padded positions of ``out`` are zero."""
        ...

    def decode(
        self,
        memory: Memory,
        tokens: Tensor,
        *,
        state: Any = None,
        use_cache: bool = True,
        need_weights: bool = False,
    ) -> DecodeOutput:
        """The logits of the next token after each of ``tokens``: with ``state=None`` a whole
        prefix, with an earlier call's state the positions that follow it; ``use_cache=False``
        keeps no state (each step recomputes the prefix)."""
        ...

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        """The state of the batch rows ``index`` (beam search keeps the surviving beams)."""
        ...

    def __call__(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits ``(b, n, V)`` (training)."""
        ...
