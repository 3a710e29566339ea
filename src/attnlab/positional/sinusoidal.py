r"""Fixed sinusoidal absolute positions (Vaswani et al. 2017, "Attention Is All You Need").

Legend: ``b`` batch, ``n`` positions, ``c`` model width (``dim``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .base import PositionalEncoding

__all__ = ["Sinusoidal", "sinusoidal_table"]


def sinusoidal_table(
    n: int, dim: int, *, base: float = 10000.0, offset: int = 0, device=None
) -> Tensor:
    """The ``(n, dim)`` float64 table of positions ``offset .. offset + n - 1`` (see Sinusoidal)."""
    half = (dim + 1) // 2  # an odd dim keeps the last sine, drops its cosine
    inv_freq = base ** (-torch.arange(half, dtype=torch.float64, device=device) * 2 / dim)
    pos = torch.arange(offset, offset + n, dtype=torch.float64, device=device)
    angle = torch.outer(pos, inv_freq)  # (n, half)
    table = torch.stack([angle.sin(), angle.cos()], dim=-1)  # (n, half, 2): sin, cos interleaved
    return table.flatten(1)[:, :dim]  # (n, dim)


class Sinusoidal(PositionalEncoding):
    r"""Sinusoidal positions added to the input (Vaswani et al. 2017, section 3.5).

    .. math::
        PE_{t, 2k} = \sin(t / \beta^{2k/c}), \qquad PE_{t, 2k+1} = \cos(t / \beta^{2k/c}),
        \qquad x_t \leftarrow x_t + PE_t ,

    for ``c = dim`` and ``beta = base``. Each pair of channels is a rotation at its own
    frequency, so :math:`PE_{t+s}` is a fixed linear function of :math:`PE_t` for every offset
    ``s``: the model can learn to attend by relative position. An odd ``dim`` keeps the last
    sine channel and drops its cosine.

    Extrapolates: the table is a function of the position, computed for any length. It is
    cached per device (in float32 or float64 to match the input) and regrown, at least
    doubling, when a longer sequence comes. The cache is a plain attribute, not a buffer: it is
    not in the state dict, and DDP, which broadcasts buffers from rank 0 every forward, never
    meets tables that grew to different lengths on different ranks.

    Args:
        dim: model width ``c``.
        base: the wavelength scale :math:`\beta`; wavelengths run from :math:`2\pi` to
            :math:`2\pi\beta`. Default 10000.

    Shapes:
        - x: ``(b, n, dim)``; output ``(b, n, dim)``, positions ``offset .. offset + n - 1``.
    """

    acts_on = "input"

    def __init__(self, dim: int, *, base: float = 10000.0) -> None:
        super().__init__()
        if not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if not base > 1.0:
            raise ValueError(f"base must be > 1, got {base!r}")
        self.dim, self.base = dim, float(base)
        self._cache: Tensor | None = None  # (n, dim) table; see above

    def table(
        self,
        n: int,
        *,
        offset: int = 0,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> Tensor:
        """Positions ``offset .. offset + n - 1`` as an ``(n, dim)`` tensor of ``dtype`` on
        ``device`` (default: the cached table's device, else the CPU), from the cache."""
        wide = torch.promote_types(dtype, torch.float32)
        cache = self._cache
        if device is None:
            device = cache.device if cache is not None else torch.device("cpu")
        device = torch.device(device)
        need = offset + n
        if cache is None or cache.dtype != wide or cache.device != device:
            cache, have = None, 0
        else:
            have = cache.shape[0]
        if cache is None or have < need:
            grow = max(need, 2 * have)
            cache = self._cache = sinusoidal_table(
                grow, self.dim, base=self.base, device=device
            ).to(wide)
        return cache[offset:need].to(dtype)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(f"Sinusoidal: expected x (..., {self.dim}), got {tuple(x.shape)}")
        return x + self.table(x.shape[-2], offset=offset, dtype=x.dtype, device=x.device)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base:g}"
