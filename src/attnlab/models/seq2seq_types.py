"""What every encoder-decoder of :mod:`attnlab.models.seq2seq` returns (its own module, so the
model files and :mod:`attnlab.models.decoding` share it without importing each other).

Legend: ``b`` batch, ``m`` source positions, ``n`` target positions, ``h`` heads, ``V`` target
vocabulary size.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from torch import Tensor

__all__ = ["DecodeOutput", "Memory"]


class Memory(NamedTuple):
    """The encoded source."""

    out: Tensor  # (b, m, dim), zeros at padded positions
    lengths: Tensor  # (b,) long


class DecodeOutput(NamedTuple):
    logits: Tensor  # (b, n, V): the next token after each input position
    state: Any  # what the next call continues from (None when use_cache=False)
    cross_weights: list[Tensor] | None  # per layer (b, h, n, m) when need_weights
