"""Linformer attention (Wang et al. 2020): keys and values projected along the sequence.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim, ``k`` projected length, ``L`` max_len.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..numerics import masked_softmax
from .base import AttentionKernel, MaskParts

__all__ = ["LinformerKernel"]


class LinformerKernel(AttentionKernel):
    r"""Linformer attention (Wang et al. 2020, "Linformer: Self-Attention with Linear
    Complexity", Eq. 7): learned projections :math:`E, F \in \mathbb{R}^{k \times L}` compress
    the ``n`` keys and values to ``k`` rows before exact softmax attention,

    .. math::
        o = \mathrm{softmax}\Big(\frac{Q (E_{:, :n} K)^\top}{\sqrt d}\Big) (F_{:, :n} V).

    A sequence shorter than ``max_len`` uses the first ``n`` columns of ``E`` and ``F``; a longer
    one raises. ``E`` and ``F`` are shared by all heads ("headwise sharing", Sec. 4), and
    ``share_kv=True`` also sets ``F = E`` ("key-value sharing"). Padded keys and values are
    zeroed before the projection, so they contribute nothing to any compressed row, and a
    compressed row that draws on no real key is masked; a sequence with no real key gives
    zeros. The projection mixes every position into every compressed key,
    so a causal (or any other structured) mask cannot be applied: those raise.

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        k: projected length (default 256; the paper uses 128-256).
        max_len: the longest key sequence (default 1024).
        share_kv: use one projection for keys and values (default False).

    Complexity: time ``O(n k d)``, memory ``O(n k)``; parameters ``2 k L`` (``k L`` shared).
    """

    name = "linformer"
    causal_reason = "its sequence projection mixes future keys into every compressed key"

    def __init__(
        self, *, dim: int, heads: int, k: int = 256, max_len: int = 1024, share_kv: bool = False
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if not isinstance(k, int) or k <= 0:
            raise ValueError(f"k must be a positive int, got {k!r}")
        if not isinstance(max_len, int) or max_len <= 0:
            raise ValueError(f"max_len must be a positive int, got {max_len!r}")
        self.k, self.max_len, self.share_kv = k, max_len, share_kv
        # N(0, 1/k) as the paper's reference code: each compressed row a random mix of tokens.
        self.e_proj = nn.Parameter(torch.randn(k, max_len) / math.sqrt(k))  # (k, L)
        self.f_proj = None if share_kv else nn.Parameter(torch.randn(k, max_len) / math.sqrt(k))

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        j = k.shape[2]
        self.check_length(j, self.max_len, "key sequence")
        e = self.e_proj[:, :j].to(k.dtype)  # (k, j)
        f = e if self.f_proj is None else self.f_proj[:, :j].to(v.dtype)
        allowed = None
        if parts.key_valid is not None:  # padded keys and values are already zero
            valid = parts.key_valid.transpose(-2, -1)  # (b, 1, j, 1)
            # A compressed key that draws on no real key is no key at all: mask it (with E = I
            # this is exactly key padding).
            real = (e.abs() @ valid[:, 0].to(e.dtype)).squeeze(-1) > 0  # (b, k)
            allowed = real[:, None, None, :]  # (b, 1, 1, k)
        k_c = torch.einsum("kj,bhjd->bhkd", e, k)  # (b, h, k, d)
        v_c = torch.einsum("kj,bhje->bhke", f, v)  # (b, h, k, e)
        s = q @ k_c.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (b, h, i, k)
        return masked_softmax(s, allowed).to(v.dtype) @ v_c  # (b, h, i, e)

    def extra_repr(self) -> str:
        return f"k={self.k}, max_len={self.max_len}, share_kv={self.share_kv}"
