r"""Learned relative-position score biases: T5's buckets and Shaw et al.'s clipped distances.

Both add a learned scalar per head and relative distance to the attention scores, so the bias
depends only on ``j - i`` (a Toeplitz matrix per head) and is defined at any length.

Legend: ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .base import PositionalEncoding

__all__ = ["RelativeBias", "ShawRelative", "relative_positions", "t5_bucket"]


def relative_positions(q_len: int, kv_len: int, *, q_offset: int = 0, device=None) -> Tensor:
    """``(q_len, kv_len)`` long tensor of ``j - i`` for queries at ``q_offset + arange(q_len)``."""
    i = torch.arange(q_offset, q_offset + q_len, device=device)
    j = torch.arange(kv_len, device=device)
    return j[None, :] - i[:, None]  # (i, j)


def t5_bucket(
    rel: Tensor, *, num_buckets: int = 32, max_distance: int = 128, bidirectional: bool = True
) -> Tensor:
    """T5's bucket of each relative position ``rel = j - i`` (Raffel et al. 2020, section 2.1).

    With ``bidirectional``, half of the buckets are for keys after the query (``j > i``). Within
    a direction, the first half of the buckets hold the exact distances ``0 .. e - 1``; the rest
    cover ``e .. max_distance`` in logarithmically growing ranges; every longer distance shares
    the last bucket. Without ``bidirectional``, keys after the query share bucket 0.
    """
    n = -rel  # i - j: positive for keys before the query
    ret = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        ret = ret + (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp_min(0)
    exact = num_buckets // 2
    # log(n / exact) / log(max_distance / exact) in [0, 1) for exact <= n < max_distance
    frac = torch.log(n.clamp_min(1).double() / exact) / math.log(max_distance / exact)
    large = exact + (frac * (num_buckets - exact)).long()
    large = large.clamp_max(num_buckets - 1)
    return ret + torch.where(n < exact, n, large)


class RelativeBias(PositionalEncoding):
    r"""T5's bucketed relative position bias (Raffel et al. 2020, "Exploring the Limits of
    Transfer Learning with a Unified Text-to-Text Transformer").

    .. math::
        \alpha_{ij} \mathrel{+}= B_{h,\ \mathrm{bucket}(j - i)}, \qquad
        B \in \mathbb{R}^{H \times \text{num\_buckets}}\ \text{learned},

    with :func:`t5_bucket`: exact buckets for small distances, logarithmically wider ones up to
    ``max_distance``. ``B`` starts normal with standard deviation ``init_std``.

    Extrapolates: every distance at or beyond ``max_distance`` falls in the last bucket of its
    direction, so any length has a bias (long distances are not told apart).

    Args:
        heads: number of heads ``H``.
        num_buckets: buckets in all (split between the two directions when bidirectional).
        max_distance: distance from which all keys share the last bucket.
        bidirectional: distinguish keys before and after the query (False for causal models:
            keys after the query share bucket 0, and a causal mask removes them anyway).
        init_std: standard deviation of the initial biases (default 0.02).

    Shapes:
        - output of :meth:`score_bias`: ``(1, H, q_len, kv_len)``, queries at positions
          ``q_offset .. q_offset + q_len - 1``, keys at ``0 .. kv_len - 1``.
    """

    acts_on = "scores"

    def __init__(
        self,
        heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        if not isinstance(heads, int) or heads <= 0:
            raise ValueError(f"heads must be a positive int, got {heads!r}")
        per_side = num_buckets // 2 if bidirectional else num_buckets
        if per_side < 2:
            raise ValueError(
                f"num_buckets={num_buckets} leaves {per_side} bucket(s) per direction; "
                "need at least 2 (4 when bidirectional)"
            )
        if max_distance <= per_side // 2:
            raise ValueError(
                f"max_distance={max_distance} must exceed the {per_side // 2} exact buckets; "
                "raise max_distance or lower num_buckets"
            )
        self.heads, self.num_buckets = heads, num_buckets
        self.max_distance, self.bidirectional = max_distance, bidirectional
        self.bias = nn.Parameter(torch.randn(num_buckets, heads) * init_std)  # (buckets, H)

    def score_bias(self, q_len: int, kv_len: int, *, q_offset: int = 0) -> Tensor:
        rel = relative_positions(q_len, kv_len, q_offset=q_offset, device=self.bias.device)
        bucket = t5_bucket(
            rel,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
            bidirectional=self.bidirectional,
        )  # (i, j)
        return self.bias[bucket].permute(2, 0, 1).unsqueeze(0)  # (i, j, H) -> (1, H, i, j)

    def extra_repr(self) -> str:
        return (
            f"heads={self.heads}, num_buckets={self.num_buckets}, "
            f"max_distance={self.max_distance}, bidirectional={self.bidirectional}"
        )


class ShawRelative(PositionalEncoding):
    r"""Clipped relative positions (Shaw et al. 2018, "Self-Attention with Relative Position
    Representations"), as a learned scalar bias per head.

    .. math::
        \alpha_{ij} \mathrel{+}= w_{h,\ \mathrm{clip}(j - i,\ -K,\ K)}, \qquad
        w \in \mathbb{R}^{H \times (2K + 1)}\ \text{learned}.

    Shaw et al. learn *vectors* :math:`a^K_{ij}` (and :math:`a^V_{ij}`) per clipped distance and
    add them to the keys (and values): :math:`e_{ij} = q_i (k_j + a^K_{ij})^\top / \sqrt{d}`.
    A :class:`PositionalEncoding` may only bias the scores, so this is the scalar-bias
    simplification: the term :math:`q_i \cdot a^K_{ij}` becomes a per-head constant
    :math:`w_{h, j - i}` that does not depend on the query, and there is no value term.
    ``w`` starts normal with standard deviation ``init_std``.

    Extrapolates by clipping: every distance beyond ``K`` shares the bias of distance ``K``.

    Args:
        heads: number of heads ``H``.
        max_distance: the clipping distance ``K`` (Shaw et al. found ``K >= 2`` enough for
            translation; default 16).
        init_std: standard deviation of the initial biases (default 0.02).

    Shapes:
        - output of :meth:`score_bias`: ``(1, H, q_len, kv_len)``, queries at positions
          ``q_offset .. q_offset + q_len - 1``, keys at ``0 .. kv_len - 1``.
    """

    acts_on = "scores"

    def __init__(self, heads: int, *, max_distance: int = 16, init_std: float = 0.02) -> None:
        super().__init__()
        if not isinstance(heads, int) or heads <= 0:
            raise ValueError(f"heads must be a positive int, got {heads!r}")
        if not isinstance(max_distance, int) or max_distance < 1:
            raise ValueError(f"max_distance must be a positive int, got {max_distance!r}")
        self.heads, self.max_distance = heads, max_distance
        self.bias = nn.Parameter(torch.randn(2 * max_distance + 1, heads) * init_std)  # (2K+1, H)

    def score_bias(self, q_len: int, kv_len: int, *, q_offset: int = 0) -> Tensor:
        k = self.max_distance
        rel = relative_positions(q_len, kv_len, q_offset=q_offset, device=self.bias.device)
        index = rel.clamp(-k, k) + k  # (i, j) in [0, 2K]
        return self.bias[index].permute(2, 0, 1).unsqueeze(0)  # (i, j, H) -> (1, H, i, j)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, max_distance={self.max_distance}"
