r"""Padding-aware pooling: one vector per sequence from ``(b, n, d)`` and the lengths.

Each pooling is ``forward(hidden, lengths) -> Pooled(pooled (b, d), weights (b, n) | None)``
and ignores positions ``t >= lengths[b]``; an empty sequence (length 0) pools to zeros.

* ``"mean"``: :math:`\frac{1}{L}\sum_{t<L} h_t`
* ``"max"``: :math:`\max_{t<L} h_t` per feature
* ``"first"``: :math:`h_0` (a ``[CLS]``-style first token)
* ``"last"``: :math:`h_{L-1}`, the last valid position (the readout of a causal encoder or a
  forward RNN, which only there has read the whole sequence)
* ``"attention"``: :math:`\sum_t a_t h_t` with :math:`a = \mathrm{softmax}_t(q \cdot h_t /
  \sqrt{d})` for a learned query :math:`q` (Lin et al. 2017, self-attentive sentence
  embedding, with one head); returns :math:`a` for visualisation.

Legend: ``b`` batch, ``n`` positions, ``d`` width.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnlab.lab.models.encoders import valid_positions
from attnlab.registry import Registry

__all__ = ["POOLINGS", "Pooled", "MeanPool", "MaxPool", "FirstPool", "LastPool", "AttentionPool"]

POOLINGS: Registry = Registry("pooling")


class Pooled(NamedTuple):
    pooled: Tensor  # (b, d)
    weights: Tensor | None  # (b, n) pooling weights (attention pooling, float32 at least)


@POOLINGS.register("mean")
class MeanPool(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()

    def forward(self, hidden: Tensor, lengths: Tensor) -> Pooled:
        valid = valid_positions(lengths, hidden.shape[1]).unsqueeze(-1)  # (b, n, 1)
        total = (hidden * valid).sum(dim=1)  # (b, d)
        return Pooled(total / lengths.clamp(min=1).unsqueeze(-1).to(hidden.dtype), None)


@POOLINGS.register("max")
class MaxPool(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()

    def forward(self, hidden: Tensor, lengths: Tensor) -> Pooled:
        valid = valid_positions(lengths, hidden.shape[1]).unsqueeze(-1)  # (b, n, 1)
        pooled = hidden.masked_fill(~valid, float("-inf")).amax(dim=1)  # (b, d)
        nonempty = (lengths > 0).unsqueeze(-1)  # (b, 1)
        return Pooled(torch.where(nonempty, pooled, torch.zeros_like(pooled)), None)


@POOLINGS.register("first")
class FirstPool(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()

    def forward(self, hidden: Tensor, lengths: Tensor) -> Pooled:
        nonempty = (lengths > 0).unsqueeze(-1)  # (b, 1)
        return Pooled(hidden[:, 0] * nonempty, None)  # (b, d)


@POOLINGS.register("last")
class LastPool(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()

    def forward(self, hidden: Tensor, lengths: Tensor) -> Pooled:
        last = (lengths - 1).clamp(min=0)  # (b,)
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        nonempty = (lengths > 0).unsqueeze(-1)  # (b, 1)
        return Pooled(hidden[rows, last] * nonempty, None)  # (b, d)


@POOLINGS.register("attention")
class AttentionPool(nn.Module):
    """Attention with one learned query over the valid positions.

    Args:
        dim: width ``d`` of the hidden vectors (keys and values are the vectors themselves).
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.query = nn.Parameter(torch.randn(dim) / dim**0.5)

    def forward(self, hidden: Tensor, lengths: Tensor) -> Pooled:
        # One query: two matrix-vector products, in float32 at least (attend()'s general path
        # would also cast the (b, n, d) keys and values to autocast's dtype, a pass each).
        b, n, d = hidden.shape
        valid = valid_positions(lengths, n)  # (b, n)
        dtype = torch.promote_types(hidden.dtype, torch.float32)
        with _no_autocast(hidden.device.type):
            # zeros at padded positions: weight 0 times a NaN there would still be NaN
            h = hidden.to(dtype).masked_fill(~valid.unsqueeze(-1), 0.0)
            scores = (h @ self.query.to(dtype)) * d**-0.5  # (b, n)
            scores = scores.masked_fill(~valid, torch.finfo(dtype).min)
            weights = scores.softmax(-1) * valid  # an empty sequence: all zero
            pooled = (weights.unsqueeze(1) @ h).squeeze(1)  # (b, d)
        return Pooled(pooled.to(hidden.dtype), weights)


def _no_autocast(device_type: str):
    """A context without autocast on ``device_type`` (a null one where it has none)."""
    if torch.amp.is_autocast_available(device_type):
        return torch.autocast(device_type, enabled=False)
    return contextlib.nullcontext()
