"""Performer attention (Choromanski et al. 2021): FAVOR+ positive orthogonal random features.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim, ``m`` random features.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..numerics import safe_max
from .base import AttentionKernel, MaskParts
from .linear import linear_attention

__all__ = ["PerformerKernel", "orthogonal_gaussian", "causal_favor"]


def orthogonal_gaussian(
    m: int, d: int, *, generator: torch.Generator | None = None, orthogonal: bool = True
) -> Tensor:
    """``(m, d)`` random projection: rows of blocks of orthogonal directions, each row scaled to
    the norm of a ``N(0, I_d)`` vector (Choromanski et al. 2021, Sec. 2.4, "ORF"), so every row
    is marginally Gaussian while rows within a block are exactly orthogonal."""
    if not orthogonal:
        return torch.randn(m, d, generator=generator)
    g = torch.randn(-(-m // d), d, d, generator=generator)  # (blocks, d, d)
    qmat, rmat = torch.linalg.qr(g)  # orthonormal columns
    # Householder QR fixes the signs of diag(R), which biases the columns' directions;
    # flipping columns to make diag(R) > 0 makes Q Haar-distributed (Mezzadri 2007).
    qmat = qmat * torch.sign(torch.diagonal(rmat, dim1=-2, dim2=-1)).unsqueeze(-2)
    w = qmat.transpose(-2, -1).reshape(-1, d)[:m]  # (m, d) unit rows, orthogonal per block
    norms = torch.randn(m, d, generator=generator).norm(dim=1, keepdim=True)  # chi_d lengths
    return w * norms


def causal_favor(
    phi_q: Tensor,
    log_k: Tensor,
    v: Tensor,
    *,
    q_offset: int = 0,
    block: int = 64,
) -> Tensor:
    r"""Causal linear attention over key features :math:`\exp(\ell_j)` whose stabilising
    shift only looks back, so no output depends on a later token, not even through rounding.

    Query ``t`` (position :math:`p = q_{\mathrm{offset}} + t`) computes

    .. math::
        o_t = \frac{\sum_{j \le p} \phi(q_t)^\top e^{\ell_j - M_p}\, v_j}
                   {\sum_{j \le p} \phi(q_t)^\top e^{\ell_j - M_p}}, \qquad
        M_p = \max_{j \le p,\, f} \ell_{jf},

    where :math:`M_p` cancels exactly and only keeps :math:`\exp` in range. It is evaluated as
    :math:`e^{\ell_j - c_j} \cdot e^{c_j - M_p}` with :math:`c_j = \max_f \ell_{jf}` (every
    factor <= 1). Blocks of ``c`` queries: within a block, a masked ``c x c`` product; across
    blocks, the prefix-sum state :math:`S = \sum_j e^{\ell_j - E} v_j^\top`, kept relative to
    the running max :math:`E` at its last key and rescaled by :math:`e^{E - E'} \le 1` when the
    max grows (:func:`_rescaled_cumsum`). Keys before the first query (a KV cache) form the
    initial state.

    Args:
        phi_q: ``(b, h, i, m)`` non-negative query features (float32 or wider).
        log_k: ``(b, h, j, m)`` key log-features :math:`\ell_j`; ``-inf`` rows for keys that
            must not be attended to (padding).
        v: ``(b, h, j, e)``.
        q_offset: position of the first query (incremental decoding).
        block: block length ``c``.

    Returns:
        ``(b, h, i, e)`` in ``phi_q``'s dtype; zeros for queries that see no key.
    """
    dtype = phi_q.dtype
    b, h, i, m = phi_q.shape
    j, e = log_k.shape[2], v.shape[-1]
    low = torch.finfo(dtype).min  # stands for "no key yet" (-inf) without inf - inf = nan
    # The shifts cancel exactly, so they are constants for autograd.
    shift = safe_max(log_k)  # (b, h, j, 1) each key's largest log-feature; 0 for padded keys
    psi = torch.exp(log_k - shift)  # <= 1; padded keys: exp(-inf) = 0
    # c_j enters maxima over the past, where a padded key (a row of -inf) counts as -inf.
    c = shift.squeeze(-1).masked_fill(log_k[..., 0].detach() == -math.inf, -math.inf)  # (b,h,j)
    v1 = torch.cat([v.to(dtype), v.new_ones(b, h, j, 1, dtype=dtype)], -1)  # (b, h, j, e + 1)
    # Keys before the first query: the initial state, relative to their own max c0.
    start = min(q_offset, j)
    c0 = F.pad(c[:, :, :start], (1, 0), value=-math.inf).amax(-1).clamp_min(low)  # (b, h)
    u0 = torch.exp(c[:, :, :start] - c0.unsqueeze(-1)).unsqueeze(-1)  # (b, h, start, 1)
    s0 = (psi[:, :, :start] * u0).transpose(-2, -1) @ v1[:, :, :start]  # (b, h, m, e + 1)
    # Key start + t is the key at query t's position; block both.
    r = -(-i // block)
    psi, v1, c = (x[:, :, start : start + i] for x in (psi, v1, c))
    pad_q, pad_k = r * block - i, r * block - c.shape[-1]
    qc = F.pad(phi_q, (0, 0, 0, pad_q)).view(b, h, r, block, m)  # (b, h, r, c, m)
    kc = F.pad(psi, (0, 0, 0, pad_k)).view(b, h, r, block, m)  # zero features: no key
    vc = F.pad(v1, (0, 0, 0, pad_k)).view(b, h, r, block, e + 1)
    cc = F.pad(c, (0, pad_k), value=-math.inf).view(b, h, r, block)  # (b, h, r, c)
    run = torch.maximum(cc.flatten(2).cummax(-1).values.view_as(cc), c0[..., None, None])
    run = run.clamp_min(low)  # M at each query position: the running max, (b, h, r, c)
    # Within a block: phi(q_t) . psi_j e^{c_j - M_t} for j <= t.
    tri = torch.ones(block, block, dtype=torch.bool, device=qc.device).tril()
    w = (cc.unsqueeze(-2) - run.unsqueeze(-1)).masked_fill(~tri, -math.inf).exp()
    a = (qc @ kc.transpose(-2, -1)) * w  # (b, h, r, c, c)
    # Across blocks: each block's sum relative to E, the running max at its last key ...
    end = run[..., -1]  # (b, h, r)
    kv = (kc * torch.exp(cc - end.unsqueeze(-1)).unsqueeze(-1)).transpose(-2, -1) @ vc
    # ... and the state before block r: the initial state and blocks < r, relative to E_{r-1}.
    before = torch.cat([c0.unsqueeze(-1), end[:, :, :-1]], -1)  # (b, h, r)
    state = _rescaled_cumsum(torch.cat([s0.unsqueeze(2), kv[:, :, :-1]], 2), before)
    out = a @ vc + (qc @ state) * torch.exp(before.unsqueeze(-1) - run).unsqueeze(-1)
    out = out.reshape(b, h, r * block, e + 1)[:, :, :i]  # (b, h, i, e + 1): numerator, denominator
    num, den = out[..., :e], out[..., e]
    return num / den.clamp_min(torch.finfo(dtype).tiny).unsqueeze(-1)


def _rescaled_cumsum(x: Tensor, ref: Tensor, group: int = 32) -> Tensor:
    r"""``P_s = sum_{s' <= s} x_{s'} exp(ref_{s'} - ref_s)`` along dim 2, for ``ref``
    non-decreasing along it (every weight <= 1): a prefix sum whose terms are each kept
    relative to its own reference and rescaled to the latest one.

    Vectorised per group of ``group`` steps (a lower-triangular weight matrix, ``O(group)``
    times the work of a plain prefix sum), with the sum carried from group to group: a plain
    cumulative sum relative to one shared reference would need a reference from the future
    (the last step's) to stay in range.

    Shapes: ``x (b, h, r, m, f)``, ``ref (b, h, r)`` -> ``(b, h, r, m, f)``.
    """
    outs, carry, carry_ref = [], None, None
    tri = torch.ones(group, group, dtype=torch.bool, device=x.device).tril()
    for g in range(0, x.shape[2], group):
        xs, rs = x[:, :, g : g + group], ref[:, :, g : g + group]  # (b, h, s, m, f), (b, h, s)
        s = rs.shape[-1]
        w = (rs.unsqueeze(-2) - rs.unsqueeze(-1)).masked_fill(~tri[:s, :s], -math.inf).exp()
        p = (w @ xs.flatten(3)).view_as(xs)  # w[s, s'] = exp(ref_s' - ref_s), s' <= s
        if carry is not None:
            p = p + carry.unsqueeze(2) * torch.exp(carry_ref.unsqueeze(-1) - rs)[..., None, None]
        outs.append(p)
        carry, carry_ref = p[:, :, -1], rs[:, :, -1]
    return torch.cat(outs, 2)


class PerformerKernel(AttentionKernel):
    r"""Performer attention with FAVOR+ (Choromanski et al. 2021, "Rethinking Attention with
    Performers"): an unbiased, positive random-feature estimate of the softmax kernel.

    With :math:`x = q / d^{1/4}` (so that :math:`\exp(x \cdot y) = \exp(q \cdot k/\sqrt d)`)
    and ``m`` positive random features (Lemma 1, Eq. 7)

    .. math::
        \phi(x) = \frac{1}{\sqrt m}\exp\!\Big(W x - \frac{\lVert x\rVert^2}{2}\Big), \qquad
        \mathbb{E}\big[\phi(x)^\top \phi(y)\big] = \exp(x \cdot y),

    where the rows of :math:`W \in \mathbb{R}^{m \times d}` are orthogonal Gaussian directions
    (Sec. 2.4), attention is linear attention with these features (Eq. 4-5; causal: prefix sums,
    Sec. 2.6). Numerical stabilisation: each query's features are divided by their largest entry
    and the keys' features by :math:`e^{M}`, where :math:`M` is the largest log-feature over the
    (real) keys the query may see; the constants cancel in the ratio, exactly, and keep
    :math:`\exp` from overflowing. Non-causal, :math:`M` is one max over all keys of a sequence
    and head. Causal, it must not look ahead: a max over all keys lets a large future key
    underflow the features of earlier ones in floating point, so a later token would change
    earlier outputs. There :math:`M_i` is the running max over keys :math:`j \le i` and the
    prefix-sum state is rescaled as it grows (:func:`causal_favor`).

    The projection is a buffer. With ``redraw=True`` a new one is drawn at every forward in
    training mode (the paper's "feature redrawing", Sec. 4.2); :meth:`redraw_features` draws one
    on demand. In eval mode the projection is fixed.

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        features: number of random features ``m`` (default 256).
        redraw: redraw the projection at every training forward (default True).
        orthogonal: orthogonal random features (default True) or i.i.d. Gaussian rows.
        seed: seed of the initial projection (default None: the global RNG).
        block: block length of the causal prefix sums (default 64); it changes the speed,
            not the result.

    Complexity: time ``O(n m (d + e))``, memory ``O(n m)``; the estimate's error falls as
    ``O(1/sqrt(m))``.
    """

    name = "performer"
    supports_causal = True

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        features: int = 256,
        redraw: bool = True,
        orthogonal: bool = True,
        seed: int | None = None,
        block: int = 64,
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if not isinstance(features, int) or features <= 0:
            raise ValueError(f"features must be a positive int, got {features!r}")
        if not isinstance(block, int) or block <= 0:
            raise ValueError(f"block must be a positive int, got {block!r}")
        self.features, self.redraw, self.orthogonal = features, redraw, orthogonal
        self.block = block
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        self.register_buffer("projection", self._draw(gen))  # (m, d)

    def _draw(self, generator: torch.Generator | None = None) -> Tensor:
        return orthogonal_gaussian(
            self.features, self.head_dim, generator=generator, orthogonal=self.orthogonal
        )

    @torch.no_grad()
    def redraw_features(self, generator: torch.Generator | None = None) -> None:
        """Draw a new random projection (in place, on the buffer's device and dtype)."""
        self.projection.copy_(self._draw(generator))

    def _log_features(self, x: Tensor) -> Tensor:
        """``W x - |x|^2 / 2`` for ``x = t / d^{1/4}``: ``(b, h, n, m)`` in float32 or wider."""
        x = x.to(torch.promote_types(x.dtype, torch.float32)) * self.head_dim**-0.25
        # one product, [x, |x|^2] @ [W, -1/2]^T, instead of W x and a pass over its (b, h, n, m)
        # result to subtract the norms (and another in backward)
        half = torch.full_like(self.projection[:, :1], -0.5, dtype=x.dtype)
        w = torch.cat([self.projection.to(x.dtype), half], dim=-1)  # (m, d + 1)
        return torch.cat([x, (x * x).sum(-1, keepdim=True)], dim=-1) @ w.T  # (b, h, n, m)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        if self.redraw and self.training:
            self.redraw_features()
        lq = self._log_features(q)  # (b, h, i, m)
        lk = self._log_features(k)  # (b, h, j, m)
        # Any positive constant per query row cancels between numerator and denominator, so
        # phi(q) / sum_f phi(q)_f, a softmax over the features, is as good as phi(q) and is one
        # fused kernel (max, exp and sum) instead of three passes; the paper's 1 / sqrt(m),
        # shared by queries and keys, cancels the same way and is left out.
        phi_q = torch.softmax(lq, dim=-1)
        if parts.key_valid is not None:
            lk = lk.masked_fill(~parts.key_valid.transpose(-2, -1), -math.inf)  # (b, 1, j, 1)
        if parts.causal:
            out = causal_favor(phi_q, lk, v, q_offset=q_offset, block=self.block)
            return out.to(v.dtype)
        # Non-causal: one constant per (b, h), the max over real keys (padded keys: exp = 0).
        phi_k = torch.exp(lk - safe_max(lk, (-2, -1)))
        return linear_attention(phi_q, phi_k, v, causal=False).to(v.dtype)

    def extra_repr(self) -> str:
        return (
            f"features={self.features}, redraw={self.redraw}, orthogonal={self.orthogonal}, "
            f"block={self.block}"
        )
