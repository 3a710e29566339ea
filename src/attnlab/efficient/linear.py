"""Linear attention (Katharopoulos et al. 2020): a feature map instead of the softmax, and the
causal form as an RNN.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` feature
(head) dim, ``e`` value head dim, ``r`` blocks, ``c`` block length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ..kernels.base import KernelOutput
from ..masks import Mask
from .base import AttentionKernel, MaskParts, split_mask

__all__ = [
    "LinearKernel",
    "LinearState",
    "RecurrentCache",
    "linear_attention",
    "elu_feature_map",
]


def elu_feature_map(x: Tensor) -> Tensor:
    """:math:`\\phi(x) = \\mathrm{elu}(x) + 1 > 0` (Katharopoulos et al. 2020, Eq. 7)."""
    return F.elu(x) + 1.0


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """``num / den`` with 0 where no key contributed (``den == 0``: zeros, not NaN)."""
    return num / den.clamp_min(torch.finfo(den.dtype).tiny).unsqueeze(-1)


def linear_attention(
    phi_q: Tensor,
    phi_k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    q_offset: int = 0,
    block: int = 64,
) -> Tensor:
    r"""Kernelised attention :math:`o_i = \phi(q_i)^\top S / \phi(q_i)^\top z` with
    :math:`S = \sum_j \phi(k_j) v_j^\top` and :math:`z = \sum_j \phi(k_j)`, the sums running over
    all keys, or over :math:`j \le p_i` (the query's position) when ``causal``.

    Keys that must not be attended to (padding) should come with :math:`\phi(k_j) = 0`.

    The causal form is computed block by block (a vectorised prefix sum): within a block of
    ``c`` queries, a masked ``c x c`` product; across blocks, the running state ``S`` (exclusive
    cumulative sum of per-block ``phi(K)^T V``). Time ``O(n c d + n d e)``, memory
    ``O(n d e / c)``, instead of the ``O(n d e)`` of a cumulative sum of outer products. No
    output depends on a later key, not even through rounding.

    Args:
        phi_q: ``(b, h, i, d)`` non-negative query features.
        phi_k: ``(b, h, j, d)`` non-negative key features.
        v: ``(b, h, j, e)``.
        causal: query ``t`` (position ``q_offset + t``) sees keys ``j <= q_offset + t`` only.
        q_offset: position of the first query (incremental decoding).
        block: block length ``c`` of the causal form.

    Returns:
        ``(b, h, i, e)`` in float32 or wider.
    """
    dtype = torch.promote_types(torch.promote_types(phi_q.dtype, v.dtype), torch.float32)
    phi_q, phi_k, v = phi_q.to(dtype), phi_k.to(dtype), v.to(dtype)
    if not causal:
        # S and z in one product (z = phi(K)^T 1: v with a column of ones), then numerator and
        # denominator in one more: each feature map is read once, forward and backward
        ones = torch.ones_like(v[..., :1])
        kvz = phi_k.transpose(-2, -1) @ torch.cat([v, ones], dim=-1)  # (b, h, d, e + 1)
        out = phi_q @ kvz  # (b, h, i, e + 1)
        return _ratio(out[..., :-1], out[..., -1])
    b, h, i, d = phi_q.shape
    j, e = phi_k.shape[2], v.shape[-1]
    # Keys before the first query form the initial state; key t of the rest aligns with query t.
    start = min(q_offset, j)
    s0 = torch.einsum("bhjd,bhje->bhde", phi_k[:, :, :start], v[:, :, :start])  # (b, h, d, e)
    z0 = phi_k[:, :, :start].sum(2)  # (b, h, d)
    phi_k, v = phi_k[:, :, start : start + i], v[:, :, start : start + i]
    r = -(-i // block)
    pad_q, pad_k = r * block - i, r * block - phi_k.shape[2]
    qc = F.pad(phi_q, (0, 0, 0, pad_q)).view(b, h, r, block, d)  # (b, h, r, c, d)
    kc = F.pad(phi_k, (0, 0, 0, pad_k)).view(b, h, r, block, d)  # zero features: no key
    vc = F.pad(v, (0, 0, 0, pad_k)).view(b, h, r, block, e)  # (b, h, r, c, e)
    tri = torch.ones(block, block, dtype=torch.bool, device=qc.device).tril()
    a = (qc @ kc.transpose(-2, -1)).masked_fill(~tri, 0.0)  # (b, h, r, c, c) within block
    kv = kc.transpose(-2, -1) @ vc  # (b, h, r, d, e) per block
    # Exclusive prefix sums by shifting, not "cumsum - own term": a large block would cancel
    # the earlier ones' rounding away and so reach back into its own earlier queries.
    state = F.pad(kv.cumsum(2), (0, 0, 0, 0, 1, 0))[:, :, :r] + s0.unsqueeze(2)  # before block
    z = kc.sum(3)  # (b, h, r, d)
    z_before = F.pad(z.cumsum(2), (0, 0, 1, 0))[:, :, :r] + z0.unsqueeze(2)
    num = a @ vc + qc @ state  # (b, h, r, c, e)
    den = a.sum(-1) + torch.einsum("bhrcd,bhrd->bhrc", qc, z_before)
    return _ratio(num, den).reshape(b, h, r * block, e)[:, :, :i]


class LinearState(NamedTuple):
    """The RNN state of causal linear attention, of constant size whatever the length."""

    s: Tensor  # (b, h, d, e): sum of phi(k_j) v_j^T so far
    z: Tensor  # (b, h, d): sum of phi(k_j) so far


@dataclass
class RecurrentCache:
    """Incremental-decoding state of causal linear attention: the
    :class:`~attnlab.attention.KVCache` of an RNN.

    Pass it as ``cache=`` to a ``MultiHeadAttention(kernel="linear")`` self-attention (or let
    :class:`~attnlab.blocks.TransformerDecoder` make one per layer): each call folds its new
    positions into ``S = sum_j phi(k_j) v_j^T`` and ``z = sum_j phi(k_j)``, so the cache has
    the same size, ``(b, h, d, e)`` + ``(b, h, d)``, at position 10 or 10,000, where a KV
    cache grows by ``2 h d`` numbers per position.
    """

    s: Tensor | None = None  # (b, h, d, e): sum of phi(k_j) v_j^T so far
    z: Tensor | None = None  # (b, h, d): sum of phi(k_j) so far
    length: int = 0  # positions folded in so far

    @property
    def state(self) -> LinearState | None:
        """``(S, z)`` as a :class:`LinearState`, or None before the first call."""
        return None if self.s is None else LinearState(self.s, self.z)

    @state.setter
    def state(self, state: LinearState) -> None:
        self.s, self.z = state

    def reorder(self, index: Tensor) -> None:
        """Keep the batch rows ``index`` (beam search: each hypothesis's parent)."""
        if self.s is not None:
            self.s, self.z = self.s.index_select(0, index), self.z.index_select(0, index)


class LinearKernel(AttentionKernel):
    r"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs").

    The softmax similarity is replaced by a kernel :math:`\phi(q)^\top \phi(k)` with
    :math:`\phi(x) = \mathrm{elu}(x) + 1` (Eq. 7), and associativity gives (Eq. 5-6)

    .. math::
        o_i = \frac{\phi(q_i)^\top \sum_j \phi(k_j) v_j^\top}{\phi(q_i)^\top \sum_j \phi(k_j)} .

    Causal attention restricts both sums to :math:`j \le i` (Eq. 8-9), which is an RNN with
    state :math:`S_i = S_{i-1} + \phi(k_i) v_i^\top`, :math:`z_i = z_{i-1} + \phi(k_i)`
    (Eq. 16-20): :meth:`rnn_step` decodes one token in ``O(d e)`` time and memory, with the same
    outputs as the parallel form. Padded keys get :math:`\phi(k_j) = 0` (they add nothing to
    either sum). The softmax's scale :math:`1/\sqrt d` has no counterpart here (the paper
    uses none).

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        block: block length of the parallel causal form (default 64); it changes the speed,
            not the result.

    Complexity: time ``O(n d e)``, memory ``O(n (d + e))`` (non-causal) or
    ``O(n c + n d e / c)`` (causal, in blocks); a decoding step ``O(d e)``.
    """

    name = "linear"
    supports_causal = True

    def __init__(self, *, dim: int, heads: int, block: int = 64) -> None:
        super().__init__(dim=dim, heads=heads)
        if not isinstance(block, int) or block <= 0:
            raise ValueError(f"block must be a positive int, got {block!r}")
        self.block = block

    def feature_map(self, x: Tensor) -> Tensor:
        return elu_feature_map(x)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        phi_q, phi_k = self.feature_map(q), self.feature_map(k)
        if parts.key_valid is not None:
            # phi(k) = 0 for padded keys (phi(0) = 1 is not): they add nothing to either sum.
            phi_k = phi_k.masked_fill(~parts.key_valid.transpose(-2, -1), 0.0)  # (b, 1, j, 1)
        out = linear_attention(
            phi_q, phi_k, v, causal=parts.causal, q_offset=q_offset, block=self.block
        )
        return out.to(v.dtype)

    # ---- the RNN form -------------------------------------------------------------------------
    def initial_state(
        self, b: int, h: int, d: int, e: int, *, dtype: torch.dtype = torch.float32, device=None
    ) -> LinearState:
        """The empty state: ``S = 0 (b, h, d, e)``, ``z = 0 (b, h, d)``."""
        return LinearState(
            torch.zeros(b, h, d, e, dtype=dtype, device=device),
            torch.zeros(b, h, d, dtype=dtype, device=device),
        )

    def rnn_step(
        self, q_t: Tensor, k_t: Tensor, v_t: Tensor, state: LinearState
    ) -> tuple[Tensor, LinearState]:
        """One causal decoding step (Eq. 18-20): ``(y_t, new_state)``.

        Args:
            q_t, k_t: ``(b, h, d)`` the new token's query and key.
            v_t: ``(b, h, e)`` its value.
            state: :meth:`initial_state` or the previous step's state.

        Returns:
            ``y_t (b, h, e)``, equal to the parallel causal form's output at this position.
        """
        phi_q, phi_k = self.feature_map(q_t), self.feature_map(k_t)
        s = state.s + phi_k.unsqueeze(-1) * v_t.unsqueeze(-2).to(state.s.dtype)  # (b, h, d, e)
        z = state.z + phi_k  # (b, h, d)
        num = torch.einsum("bhd,bhde->bhe", phi_q.to(s.dtype), s)
        den = torch.einsum("bhd,bhd->bh", phi_q.to(z.dtype), z)
        return _ratio(num, den).to(v_t.dtype), LinearState(s, z)

    def new_cache(self) -> RecurrentCache:
        """The RNN state of causal linear attention (constant size): its cache."""
        return RecurrentCache()

    def step(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        cache: Any,
        *,
        mask: Tensor | Mask | None = None,
        bias: Tensor | None = None,
        need_weights: bool = False,
    ) -> KernelOutput:
        """Causal self-attention of the new positions ``q, k, v`` ``(b, h, n, d)`` after the
        ``cache.length`` earlier ones, by the RNN form when ``cache`` is a
        :class:`RecurrentCache` (updated in place; equal, up to rounding, to the parallel
        causal form over all positions), else by the parallel form over a KV cache.

        Raises:
            ValueError: with a :class:`RecurrentCache`, a mask that is not causal (a recurrent
                state cannot let a query see later keys), a structured mask, a score bias, or
                ``need_weights``.
        """
        if not isinstance(cache, RecurrentCache):
            return super().step(q, k, v, cache, mask=mask, bias=bias, need_weights=need_weights)
        self.check_inputs(q, k, v)
        b, _, n, _ = q.shape
        offset = cache.length
        parts = split_mask(mask, batch=b, q_len=n, kv_len=offset + n, q_offset=offset,
                           device=q.device)  # fmt: skip
        reason = self.unsupported(parts, bias=bias is not None, need_weights=need_weights)
        if reason is None and not parts.causal:
            reason = "mask: a RecurrentCache decodes causal attention only; pass masks.causal()"
        if reason is not None:
            raise ValueError(reason)
        key_valid = None if parts.key_valid is None else parts.key_valid[..., offset:]
        out, cache.state = self.decode(q, k, v, cache.state, key_valid=key_valid)
        cache.length = offset + n
        return KernelOutput(out, None, f"{self.name}-recurrent")

    def decode(
        self, q: Tensor, k: Tensor, v: Tensor, state: LinearState | None, *, key_valid=None
    ) -> tuple[Tensor, LinearState]:
        r""":meth:`rnn_step` over the ``n`` new positions of ``q, k, v`` ``(b, h, n, d|e)``.

        ``key_valid`` ``(b, 1, 1, n)`` (True = a real key) gives padded new keys
        :math:`\phi(k) = 0`, as the parallel form does. Returns ``(out (b, h, n, e), state)``.
        """
        b, h, n, d = q.shape
        dtype = torch.promote_types(v.dtype, torch.float32)  # the sums in float32 or wider
        if state is None:
            state = self.initial_state(b, h, d, v.shape[-1], dtype=dtype, device=q.device)
        phi_q, phi_k = self.feature_map(q).to(dtype), self.feature_map(k).to(dtype)
        if key_valid is not None:
            phi_k = phi_k.masked_fill(~key_valid.transpose(-2, -1), 0.0)  # (b, 1, n, 1)
        s, z, outs = state.s, state.z, []
        for t in range(n):  # Eq. 18-20, one position at a time
            s = s + phi_k[:, :, t].unsqueeze(-1) * v[:, :, t].unsqueeze(-2).to(dtype)
            z = z + phi_k[:, :, t]
            num = torch.einsum("bhd,bhde->bhe", phi_q[:, :, t], s)
            outs.append(_ratio(num, torch.einsum("bhd,bhd->bh", phi_q[:, :, t], z)))
        return torch.stack(outs, 2).to(v.dtype), LinearState(s, z)  # (b, h, n, e)

    def extra_repr(self) -> str:
        return f"block={self.block}"
