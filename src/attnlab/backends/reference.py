"""The ``reference`` backend: :func:`~attnlab.functional.attend`, every score and
normalisation, and the only one that returns the attention weights; ``O(i * j)`` memory.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

from torch import Tensor

from ..functional import attend
from .base import BACKENDS, Backend, Problem

__all__ = ["ReferenceBackend"]


@BACKENDS.register("reference")
class ReferenceBackend(Backend):
    name = "reference"

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        out, w = attend(
            p.q, p.k, p.v, score=p.score, normalize=p.normalize, mask=p.mask, bias=p.bias,
            dropout=p.dropout, training=p.dropout > 0, q_offset=p.q_offset,
        )  # fmt: skip
        return out, (w if p.need_weights else None)
