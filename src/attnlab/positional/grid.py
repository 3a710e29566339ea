r"""Positions on a 2-D grid (image pixels or patches): 2-D sinusoidal, learned row + column,
and a learned 2-D relative bias.

The tokens are ``prefix`` extra tokens (a CLS token: no position) followed by the
``height x width`` grid cells in row-major order (token ``prefix + r * width + c`` is row ``r``,
column ``c``). None extrapolates: the grid is fixed when the encoding is built.

Legend: ``b`` batch, ``n`` tokens, ``H`` heads, ``i`` / ``j`` query / key tokens.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import PositionalEncoding
from .sinusoidal import sinusoidal_table

__all__ = ["GridSinusoidal", "GridLearned", "GridRelativeBias", "grid_coordinates"]


def grid_coordinates(height: int, width: int, device=None) -> tuple[Tensor, Tensor]:
    """Row and column ``(height * width,)`` of each grid cell, row-major."""
    t = torch.arange(height * width, device=device)
    return t // width, t % width


def _check_grid(name: str, height: int, width: int, prefix: int) -> None:
    for what, value, low in (("height", height, 1), ("width", width, 1), ("prefix", prefix, 0)):
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name}: {what} must be an int >= {low}, got {value!r}")


class _Grid(PositionalEncoding):
    height: int
    width: int
    prefix: int

    @property
    def max_len(self) -> int:  # type: ignore[override]
        return self.prefix + self.height * self.width

    def _check_tokens(self, n: int, offset: int = 0) -> None:
        if offset or n != self.max_len:
            raise ValueError(
                f"{type(self).__name__}: built for {self.prefix} + {self.height} x {self.width} "
                f"= {self.max_len} tokens, got {n} (offset {offset}); a grid has a fixed size"
            )


class GridSinusoidal(_Grid):
    r"""2-D sinusoidal positions added to the input: half of the channels encode the row, half
    the column, each with the 1-D table of :class:`~attnlab.positional.Sinusoidal`
    (as MAE / Dosovitskiy et al.'s 2-D variant):

    .. math:: PE_{(r, c)} = [\,PE^{1D}_r \in \mathbb{R}^{D/2};\ PE^{1D}_c \in \mathbb{R}^{D/2}\,].

    Args:
        dim: model width ``D`` (even).
        height: rows of the grid.
        width: columns of the grid.
        prefix: leading tokens without a position (CLS), left unchanged.
        base: the wavelength scale (default 10000).

    Shapes: x ``(b, prefix + height * width, dim)`` -> the same.
    """

    acts_on = "input"

    def __init__(
        self, dim: int, *, height: int, width: int, prefix: int = 0, base: float = 10000.0
    ) -> None:
        super().__init__()
        _check_grid("GridSinusoidal", height, width, prefix)
        if not isinstance(dim, int) or dim <= 0 or dim % 2:
            raise ValueError(f"GridSinusoidal: dim must be a positive even int, got {dim!r}")
        self.dim, self.height, self.width, self.prefix, self.base = dim, height, width, prefix, base

    def table(self, device=None) -> Tensor:
        """The ``(height * width, dim)`` float64 table of the grid cells."""
        rows, cols = grid_coordinates(self.height, self.width, device)
        half = self.dim // 2
        t_r = sinusoidal_table(self.height, half, base=self.base, device=device)[rows]
        t_c = sinusoidal_table(self.width, half, base=self.base, device=device)[cols]
        return torch.cat([t_r, t_c], dim=-1)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        self._check_tokens(x.shape[-2], offset)
        pe = self.table(x.device).to(x.dtype)
        return torch.cat([x[..., : self.prefix, :], x[..., self.prefix :, :] + pe], dim=-2)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, grid={self.height}x{self.width}, prefix={self.prefix}"


class GridLearned(_Grid):
    r"""Learned row and column embeddings added to the input: :math:`x_{(r, c)} \mathrel{+}=
    R_r + C_c` (``height + width`` vectors, not one per cell), and one learned vector per
    prefix token. Initialised normal with standard deviation ``init_std``.

    Args:
        dim: model width.
        height: rows of the grid.
        width: columns of the grid.
        prefix: leading tokens (CLS), each with its own learned vector.
        init_std: standard deviation of the initial embeddings (default 0.02).

    Shapes: x ``(b, prefix + height * width, dim)`` -> the same.
    """

    acts_on = "input"

    def __init__(
        self, dim: int, *, height: int, width: int, prefix: int = 0, init_std: float = 0.02
    ) -> None:
        super().__init__()
        _check_grid("GridLearned", height, width, prefix)
        self.dim, self.height, self.width, self.prefix = dim, height, width, prefix
        self.rows = nn.Parameter(torch.randn(height, dim) * init_std)
        self.cols = nn.Parameter(torch.randn(width, dim) * init_std)
        self.extra = nn.Parameter(torch.randn(prefix, dim) * init_std)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        self._check_tokens(x.shape[-2], offset)
        r, c = grid_coordinates(self.height, self.width, x.device)
        pe = torch.cat([self.extra, self.rows[r] + self.cols[c]], dim=0)  # (n, dim)
        return x + pe.to(x.dtype)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, grid={self.height}x{self.width}, prefix={self.prefix}"


class GridRelativeBias(_Grid):
    r"""A learned bias per head and 2-D offset added to the scores (Swin, Liu et al. 2021):

    .. math::
        \alpha_{ij} \mathrel{+}= B_{h,\ r_j - r_i,\ c_j - c_i}, \qquad
        B \in \mathbb{R}^{H \times (2 \cdot height - 1) \times (2 \cdot width - 1)},

    zero-initialised (training starts from content-only attention). Prefix tokens get a learned
    bias per head for attending to / from them (one each way).

    This is the bias of :func:`attnlab.conv_as_attention` made soft: with
    :math:`B_{h,\Delta} = 0` at head ``h``'s offset and :math:`-\infty` elsewhere, a head attends
    exactly to one neighbour.

    Args:
        heads: number of heads ``H``.
        height: rows of the grid.
        width: columns of the grid.
        prefix: leading tokens (CLS).

    Shapes: :meth:`score_bias` ``(1, H, n, n)``, ``n = prefix + height * width``.
    """

    acts_on = "scores"

    def __init__(self, heads: int, *, height: int, width: int, prefix: int = 0) -> None:
        super().__init__()
        _check_grid("GridRelativeBias", height, width, prefix)
        if not isinstance(heads, int) or heads <= 0:
            raise ValueError(f"GridRelativeBias: heads must be a positive int, got {heads!r}")
        self.heads, self.height, self.width, self.prefix = heads, height, width, prefix
        self.table = nn.Parameter(torch.zeros(heads, 2 * height - 1, 2 * width - 1))
        self.to_prefix = nn.Parameter(torch.zeros(heads))
        self.from_prefix = nn.Parameter(torch.zeros(heads))

    def score_bias(self, q_len: int, kv_len: int, *, q_offset: int = 0) -> Tensor:
        self._check_tokens(q_len, q_offset)
        self._check_tokens(kv_len)
        r, c = grid_coordinates(self.height, self.width, self.table.device)
        dr = (r[None, :] - r[:, None]) + self.height - 1  # (i, j) key row - query row, shifted
        dc = (c[None, :] - c[:, None]) + self.width - 1
        grid = self.table[:, dr, dc]  # (H, i, j)
        n, p = self.max_len, self.prefix
        out = self.table.new_zeros(self.heads, n, n)
        out[:, p:, p:] = grid
        out[:, p:, :p] = self.to_prefix[:, None, None]  # cells attending to CLS
        out[:, :p, :] = self.from_prefix[:, None, None]  # CLS attending to everything
        return out.unsqueeze(0)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, grid={self.height}x{self.width}, prefix={self.prefix}"
