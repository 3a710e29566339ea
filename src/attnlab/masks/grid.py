"""2-D neighbourhoods: local attention on an image's grid of pixels or patches.

The tokens are the ``height x width`` grid cells in row-major order (token ``t`` is row
``t // width``, column ``t % width``), optionally after ``prefix`` extra tokens (a CLS token)
that see, and are seen by, every token.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

from typing import Literal

import torch

from .base import Mask

__all__ = ["GridLocal", "grid_local"]


class GridLocal(Mask):
    """Grid cells within ``radius`` rows and columns of the query (a ``(2r+1) x (2r+1)``
    square, or the diamond ``|dr| + |dc| <= r`` with ``metric="manhattan"``); built by
    :func:`grid_local`."""

    key_fields = ("height", "width", "radius", "prefix", "metric")

    def __init__(
        self, height: int, width: int, radius: int, *, prefix: int = 0,
        metric: Literal["chebyshev", "manhattan"] = "chebyshev",
    ) -> None:  # fmt: skip
        for name, value, low in (("height", height, 1), ("width", width, 1),
                                 ("radius", radius, 0), ("prefix", prefix, 0)):  # fmt: skip
            if not isinstance(value, int) or value < low:
                raise ValueError(f"grid_local: {name} must be an int >= {low}, got {value!r}")
        if metric not in ("chebyshev", "manhattan"):
            raise ValueError(
                f"grid_local: metric must be 'chebyshev' or 'manhattan', got {metric!r}"
            )
        self.height, self.width, self.radius = height, width, radius
        self.prefix, self.metric = prefix, metric

    @property
    def length(self) -> int:
        """The number of tokens: ``prefix + height * width``."""
        return self.prefix + self.height * self.width

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        if q_len != self.length or kv_len != self.length:
            raise ValueError(
                f"grid_local: built for {self.prefix} + {self.height} x {self.width} = "
                f"{self.length} tokens, got {q_len} queries and {kv_len} keys"
            )

    def mask_mod(self, b, h, q_idx, kv_idx):
        q, k = q_idx - self.prefix, kv_idx - self.prefix
        dr = torch.abs(torch.div(q, self.width, rounding_mode="floor") -
                       torch.div(k, self.width, rounding_mode="floor"))  # fmt: skip
        dc = torch.abs(q % self.width - k % self.width)
        near = (dr + dc <= self.radius) if self.metric == "manhattan" else (
            (dr <= self.radius) & (dc <= self.radius))  # fmt: skip
        return near | (q < 0) | (k < 0)  # prefix tokens: global

    def __repr__(self) -> str:
        return (f"grid_local({self.height}, {self.width}, {self.radius}, prefix={self.prefix}, "
                f"metric={self.metric!r})")  # fmt: skip


def grid_local(
    height: int, width: int, radius: int, *, prefix: int = 0,
    metric: Literal["chebyshev", "manhattan"] = "chebyshev",
) -> Mask:  # fmt: skip
    """Local self-attention on a ``height x width`` grid: a cell sees the cells within
    ``radius`` rows and columns (a ``(2 radius + 1)^2`` square; ``metric="manhattan"``: the
    diamond ``|dr| + |dc| <= radius``). The ``prefix`` first tokens (e.g. a CLS token) are
    global. A radius ``>= max(height, width) - 1`` is full attention.

    A 3x3 convolution sees the same square as ``grid_local(h, w, 1)``; attention then weights
    the neighbours by content, which a convolution cannot (:func:`attnlab.conv_as_attention`).
    """
    return GridLocal(height, width, radius, prefix=prefix, metric=metric)
