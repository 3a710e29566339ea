r"""Rotary position embedding, RoPE (Su et al. 2021, "RoFormer: Enhanced Transformer with
Rotary Position Embedding").

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``n`` positions.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .base import PositionalEncoding

__all__ = ["Rotary", "rotate_half"]


def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [-x2, x1]`` on the last dimension (the GPT-NeoX / LLaMA convention)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Rotary(PositionalEncoding):
    r"""Rotary position embedding: rotate queries and keys by an angle proportional to their
    position (Su et al. 2021).

    Channel ``k`` of the first half and channel ``k`` of the second half form a plane rotated at
    frequency :math:`\theta_k = \beta^{-2k/d}`:

    .. math::
        R_t x = x \odot \cos(t\theta) + \mathrm{rotate\_half}(x) \odot \sin(t\theta),
        \qquad (R_i q)^\top (R_j k) = q^\top R_{j - i}\, k ,

    so after rotation the score of query ``i`` and key ``j`` depends on the positions only
    through ``i - j`` (``R`` is orthogonal and :math:`R_i^\top R_j = R_{j-i}`). This is the
    "rotate half" layout of GPT-NeoX / LLaMA; the paper pairs adjacent channels instead, which
    is the same map up to a fixed permutation of the channels.

    Extrapolates: the angles are defined for every position (quality beyond the trained length
    is another matter). The ``cos`` / ``sin`` table is cached per device (float32 or float64 to
    match the input) and regrown, at least doubling, when longer sequences come. The cache is a
    plain attribute, not a buffer: it is not in the state dict, and DDP, which broadcasts
    buffers from rank 0 every forward, never meets tables that grew to different lengths on
    different ranks. The rotation runs in at least float32 and is cast back to the input's
    dtype.

    Args:
        head_dim: size ``d`` of each head's queries and keys; must be even.
        base: :math:`\beta`, the wavelength scale (default 10000).

    Shapes:
        - q: ``(b, h, i, d)`` at positions ``q_offset .. q_offset + i - 1``;
          k: ``(b, h, j, d)`` at positions ``k_offset .. k_offset + j - 1``.
        - output of :meth:`rotate`: rotated ``q`` and ``k``, same shapes and dtypes.
    """

    acts_on = "qk"

    def __init__(self, head_dim: int, *, base: float = 10000.0) -> None:
        super().__init__()
        if not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
            raise ValueError(
                f"Rotary rotates channel pairs: head_dim must be a positive even int, "
                f"got {head_dim!r}"
            )
        if not base > 1.0:
            raise ValueError(f"base must be > 1, got {base!r}")
        self.head_dim, self.base = head_dim, float(base)
        self._cache: tuple[Tensor, Tensor] | None = None  # (cos, sin), each (n, d); see above

    def cos_sin(
        self,
        n: int,
        *,
        offset: int = 0,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``cos`` and ``sin`` of positions ``offset .. offset + n - 1``, each ``(n, d)``, in
        float32 (float64 for a float64 ``dtype``) on ``device`` (default: the cached table's
        device, else the CPU)."""
        wide = torch.promote_types(dtype, torch.float32)
        cache = self._cache
        if device is None:
            device = cache[0].device if cache is not None else torch.device("cpu")
        device = torch.device(device)
        need = offset + n
        if cache is None or cache[0].dtype != wide or cache[0].device != device:
            cache, have = None, 0
        else:
            have = cache[0].shape[0]
        if cache is None or have < need:
            grow = max(need, 2 * have)
            half = torch.arange(self.head_dim // 2, dtype=torch.float64, device=device)
            inv_freq = self.base ** (-2 * half / self.head_dim)  # (d/2,)
            pos = torch.arange(grow, dtype=torch.float64, device=device)
            angle = torch.outer(pos, inv_freq).repeat(1, 2)  # (n, d): both halves share angles
            cache = self._cache = (angle.cos().to(wide), angle.sin().to(wide))
        return cache[0][offset:need], cache[1][offset:need]

    def rotate_one(self, x: Tensor, *, offset: int = 0) -> Tensor:
        """Rotate ``x (..., n, d)`` as positions ``offset .. offset + n - 1``."""
        if x.shape[-1] != self.head_dim:
            raise ValueError(
                f"Rotary was built for head_dim={self.head_dim}, got input {tuple(x.shape)}"
            )
        cos, sin = self.cos_sin(
            x.shape[-2], offset=offset, dtype=x.dtype, device=x.device
        )  # (n, d)
        xw = x.to(cos.dtype)
        return (xw * cos + rotate_half(xw) * sin).to(x.dtype)

    def rotate(
        self, q: Tensor, k: Tensor, *, q_offset: int = 0, k_offset: int = 0
    ) -> tuple[Tensor, Tensor]:
        return self.rotate_one(q, offset=q_offset), self.rotate_one(k, offset=k_offset)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base:g}"
