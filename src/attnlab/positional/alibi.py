r"""Attention with linear biases, ALiBi (Press et al. 2022, "Train Short, Test Long: Attention
with Linear Biases Enables Input Length Extrapolation").

Legend: ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .base import PositionalEncoding
from .relative import relative_positions

__all__ = ["ALiBi", "alibi_slopes"]


def alibi_slopes(heads: int) -> list[float]:
    """The paper's per-head slopes: the geometric sequence :math:`2^{-8/H}, 2^{-16/H}, \\dots`.

    For ``H`` not a power of two, as in the paper's code: the slopes of the nearest smaller
    power of two ``P``, then every other slope of ``2P`` heads for the remaining ``H - P``.
    """
    if heads <= 0:
        raise ValueError(f"heads must be positive, got {heads}")

    def power_of_2(n: int) -> list[float]:
        start = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))  # 2^(-8/n)
        return [start ** (k + 1) for k in range(n)]

    if math.log2(heads).is_integer():
        return power_of_2(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][: heads - closest]


class ALiBi(PositionalEncoding):
    r"""A fixed, head-specific linear penalty on the distance between query and key
    (Press et al. 2022).

    .. math::
        \alpha_{ij} \mathrel{+}= -m_h\, |i - j| \quad \text{(bidirectional, default)}, \qquad
        \alpha_{ij} \mathrel{+}= -m_h\, \max(i - j, 0) \quad (\text{causal=True}),

    with slopes :math:`m_h` from :func:`alibi_slopes` (for 8 heads :math:`2^{-1}, \dots,
    2^{-8}`). The paper defines ALiBi for causal language models, where keys after the query are
    masked; there the two forms agree on every allowed pair. ``causal=True`` gives keys after the
    query a bias of 0 instead of a penalty: it does *not* mask them, so pass a causal mask (e.g.
    ``masks.causal()``) as well. The symmetric :math:`|i - j|` is the common extension to
    bidirectional encoders.

    Extrapolates: the bias is a closed-form function of ``i - j`` (the paper's point is that it
    also *works* beyond the training length). No parameters.

    Args:
        heads: number of heads ``H``.
        causal: use the causal form above (default False: symmetric :math:`|i - j|`).

    Shapes:
        - output of :meth:`score_bias`: ``(1, H, q_len, kv_len)`` float32, queries at positions
          ``q_offset .. q_offset + q_len - 1``, keys at ``0 .. kv_len - 1``.
    """

    acts_on = "scores"

    def __init__(self, heads: int, *, causal: bool = False) -> None:
        super().__init__()
        if not isinstance(heads, int) or heads <= 0:
            raise ValueError(f"heads must be a positive int, got {heads!r}")
        self.heads, self.causal = heads, causal
        slopes = torch.tensor(alibi_slopes(heads), dtype=torch.float32)
        self.register_buffer("slopes", slopes, persistent=False)  # (H,)

    def score_bias(self, q_len: int, kv_len: int, *, q_offset: int = 0) -> Tensor:
        rel = relative_positions(q_len, kv_len, q_offset=q_offset, device=self.slopes.device)
        dist = (-rel).clamp_min(0) if self.causal else rel.abs()  # (i, j): i - j or |i - j|
        bias = -self.slopes[:, None, None] * dist.to(self.slopes.dtype)  # (H, i, j)
        return bias.unsqueeze(0)  # (1, H, i, j)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, causal={self.causal}"
