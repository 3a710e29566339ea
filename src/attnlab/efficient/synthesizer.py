"""Synthesizer attention (Tay et al. 2021): attention weights synthesised without q.k.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim, ``L`` max_len.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..numerics import masked_softmax
from .base import AttentionKernel, MaskParts

__all__ = ["SynthesizerKernel"]


class SynthesizerKernel(AttentionKernel):
    r"""Synthesizer attention (Tay et al. 2021, "Synthesizer: Rethinking Self-Attention for
    Transformer Models", Sec. 3): the logits come from each token alone, or from nothing.

    * ``mode="dense"`` (Eq. 1-2): per head, a two-layer MLP of each query maps it to a row of
      logits over positions, :math:`B_i = W_2\,\mathrm{relu}(W_1 q_i + b_1) + b_2 \in
      \mathbb{R}^{L}`, cut to the ``j`` keys.
    * ``mode="random"`` (Eq. 3): a learned matrix :math:`R \in \mathbb{R}^{h \times L \times L}`,
      independent of the input; rows are query positions (``q_offset`` shifts them).

    .. math::
        o_i = \sum_j \mathrm{softmax}_j(B_{ij} \mid M_{ij}) \, v_j .

    The mask ``M`` is applied to the logits before the softmax, so padding, causality and every
    other mask work. The keys are never read (dense mode reads q and v; random mode only v), so
    the layer's unused projections get no gradient. Both modes size parameters by ``max_len``;
    longer sequences raise.

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        mode: ``"dense"`` (default) or ``"random"``.
        max_len: the longest sequence (default 1024).
        hidden: hidden width of the dense MLP (default ``d``).

    Complexity: time ``O(n L d)`` (dense) and ``O(n^2 e)``, memory ``O(n^2)``; parameters
    ``h (d (hidden + 1) + hidden (L + 1))`` (dense) or ``h L^2`` (random).
    """

    name = "synthesizer"
    supports_causal = True
    supports_structured = True

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        mode: str = "dense",
        max_len: int = 1024,
        hidden: int | None = None,
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if mode not in ("dense", "random"):
            raise ValueError(f"mode must be 'dense' or 'random', got {mode!r}")
        if not isinstance(max_len, int) or max_len <= 0:
            raise ValueError(f"max_len must be a positive int, got {max_len!r}")
        self.mode, self.max_len = mode, max_len
        self.reads = "qv" if mode == "dense" else "v"
        d, hid = self.head_dim, hidden or self.head_dim
        self.hidden = hid
        if mode == "dense":
            # Per-head MLP weights, initialised like nn.Linear (uniform, 1/sqrt(fan_in)).
            self.w1 = nn.Parameter(torch.empty(heads, d, hid).uniform_(-1, 1) / math.sqrt(d))
            self.b1 = nn.Parameter(torch.zeros(heads, hid))
            w2 = torch.empty(heads, hid, max_len).uniform_(-1, 1) / math.sqrt(hid)
            self.w2 = nn.Parameter(w2)
            self.b2 = nn.Parameter(torch.zeros(heads, max_len))
        else:
            # Unit-variance logits, like scaled dot products of unit-variance q and k at init.
            self.random = nn.Parameter(torch.randn(heads, max_len, max_len))

    def logits(self, q: Tensor, j: int, q_offset: int = 0) -> Tensor:
        """The synthesised logits ``(b or 1, h, i, j)``."""
        i = q.shape[2]
        if self.mode == "dense":
            x = torch.einsum("bhid,hdk->bhik", q, self.w1.to(q.dtype))  # (b, h, i, hidden)
            x = x + self.b1[:, None].to(q.dtype)
            w2, b2 = self.w2[:, :, :j].to(q.dtype), self.b2[:, None, :j].to(q.dtype)
            return torch.einsum("bhik,hkj->bhij", torch.relu(x), w2) + b2  # (b, h, i, j)
        return self.random[None, :, q_offset : q_offset + i, :j]  # (1, h, i, j)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        b, h, i, _ = q.shape
        j = k.shape[2]
        self.check_length(j, self.max_len, "key sequence")
        if self.mode == "random":
            self.check_length(q_offset + i, self.max_len, "query position range")
        allowed = None
        if parts.mask is not None:
            allowed = parts.mask.dense(b, h, i, j, q_offset=q_offset, device=q.device)
        w = masked_softmax(self.logits(q, j, q_offset), allowed)  # (b, h, i, j)
        return w.to(v.dtype) @ v  # (b, h, i, e)

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}, max_len={self.max_len}, hidden={self.hidden}"
