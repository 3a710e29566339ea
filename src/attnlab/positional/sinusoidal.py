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
    cached (a non-persistent buffer, in float32 or float64 to match the input) and regrown, at
    least doubling, when a longer sequence comes.

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
        self.register_buffer("_table", torch.empty(0, dim), persistent=False)

    def table(self, n: int, *, offset: int = 0, dtype: torch.dtype = torch.float32) -> Tensor:
        """Positions ``offset .. offset + n - 1`` as an ``(n, dim)`` tensor, from the cache."""
        wide = torch.promote_types(dtype, torch.float32)
        need = offset + n
        if self._table.shape[0] < need or self._table.dtype != wide:
            grow = max(need, 2 * self._table.shape[0])
            self._table = sinusoidal_table(
                grow, self.dim, base=self.base, device=self._table.device
            ).to(wide)
        return self._table[offset:need].to(dtype)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(f"Sinusoidal: expected x (..., {self.dim}), got {tuple(x.shape)}")
        return x + self.table(x.shape[-2], offset=offset, dtype=x.dtype)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base:g}"
