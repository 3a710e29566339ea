"""Performer attention (Choromanski et al. 2021): FAVOR+ positive orthogonal random features.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim, ``m`` random features.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .base import AttentionKernel, MaskParts
from .linear import linear_attention

__all__ = ["PerformerKernel", "orthogonal_gaussian"]


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
    and all keys' features of one sequence and head by the largest over its (real) keys; both
    constants cancel in the ratio, exactly, and keep :math:`\exp` from overflowing.

    The projection is a buffer. With ``redraw=True`` a new one is drawn at every forward in
    training mode (the paper's "feature redrawing", Sec. 4.2); :meth:`redraw_features` draws one
    on demand. In eval mode the projection is fixed.

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        features: number of random features ``m`` (default 256).
        redraw: redraw the projection at every training forward (default True).
        orthogonal: orthogonal random features (default True) or i.i.d. Gaussian rows.
        seed: seed of the initial projection (default None: the global RNG).
        chunk: chunk length of the causal prefix sums (default 64).

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
        chunk: int = 64,
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if not isinstance(features, int) or features <= 0:
            raise ValueError(f"features must be a positive int, got {features!r}")
        self.features, self.redraw, self.orthogonal = features, redraw, orthogonal
        self.chunk = chunk
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
        proj = x @ self.projection.to(x.dtype).T  # (b, h, n, m)
        return proj - 0.5 * (x * x).sum(-1, keepdim=True)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        if self.redraw and self.training:
            self.redraw_features()
        scale = 1.0 / math.sqrt(self.features)
        lq = self._log_features(q)  # (b, h, i, m)
        lk = self._log_features(k)  # (b, h, j, m)
        # Constants that cancel between numerator and denominator keep exp() in range:
        # per query (any constant per row cancels) and per (b, h) over real keys.
        phi_q = torch.exp(lq - lq.amax(-1, keepdim=True).detach()) * scale
        valid = None
        if parts.key_valid is not None:
            valid = parts.key_valid.transpose(-2, -1)  # (b, 1, j, 1)
            lk_max = lk.masked_fill(~valid, float("-inf")).amax((-2, -1), keepdim=True)
        else:
            lk_max = lk.amax((-2, -1), keepdim=True)
        lk_max = torch.where(torch.isfinite(lk_max), lk_max, torch.zeros_like(lk_max)).detach()
        phi_k = torch.exp(lk - lk_max) * scale
        if valid is not None:
            phi_k = phi_k.masked_fill(~valid, 0.0)  # padded keys add nothing
        out = linear_attention(
            phi_q, phi_k, v, causal=parts.causal, q_offset=q_offset, chunk=self.chunk
        )
        return out.to(v.dtype)

    def extra_repr(self) -> str:
        return (
            f"features={self.features}, redraw={self.redraw}, orthogonal={self.orthogonal}, "
            f"chunk={self.chunk}"
        )
