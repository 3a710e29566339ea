r"""Rotary position embedding, RoPE (Su et al. 2021, "RoFormer: Enhanced Transformer with
Rotary Position Embedding"), in the two channel layouts pretrained models use and with partial
rotation.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``r`` rotated channels (``r <= d``), ``n`` positions.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .base import PositionalEncoding

__all__ = ["Rotary", "rotate_every_two", "rotate_half"]


def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [-x2, x1]`` on the last dimension (the GPT-NeoX / LLaMA convention)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def rotate_every_two(x: Tensor) -> Tensor:
    """``[x0, x1, x2, x3, ...] -> [-x1, x0, -x3, x2, ...]`` on the last dimension (the RoFormer /
    GPT-J / x-transformers convention: adjacent channels form a pair)."""
    pairs = x.unflatten(-1, (-1, 2))  # (..., d/2, 2)
    x1, x2 = pairs.unbind(-1)  # each (..., d/2)
    return torch.stack((-x2, x1), dim=-1).flatten(-2)  # (..., d)


class Rotary(PositionalEncoding):
    r"""Rotary position embedding: rotate queries and keys by an angle proportional to their
    position (Su et al. 2021).

    The first ``r = rotary_dim`` channels of each head form ``r / 2`` planes; plane ``k``
    turns at frequency :math:`\theta_k = \beta^{-2k/r}` (note ``r``, not ``d``, as every library
    below computes it), so position ``t`` rotates it by :math:`t\theta_k`:

    .. math::
        \begin{pmatrix} y_a \\ y_b \end{pmatrix} =
        \begin{pmatrix} \cos t\theta_k & -\sin t\theta_k \\
                        \sin t\theta_k & \cos t\theta_k \end{pmatrix}
        \begin{pmatrix} x_a \\ x_b \end{pmatrix},
        \qquad (R_i q)^\top (R_j k) = q^\top R_{j - i}\, k ,

    so after rotation the score of query ``i`` and key ``j`` depends on the positions only
    through ``i - j`` (``R`` is orthogonal and :math:`R_i^\top R_j = R_{j-i}`). Channels
    ``r .. d - 1`` pass through unchanged. Which channels ``(a, b)`` pair up is the layout:

    * rotate half (default, ``interleaved=False``): :math:`(a, b) = (k, k + r/2)`, i.e.
      :math:`R_t x = x \odot \cos t\theta + \mathrm{rotate\_half}(x) \odot \sin t\theta` with
      :math:`\theta` repeated as ``[θ_0 .. θ_{r/2-1}, θ_0 .. θ_{r/2-1}]``. GPT-NeoX / Pythia,
      Hugging Face LLaMA / Mistral / Qwen / Phi, and most Hugging Face ports.
    * interleaved (``interleaved=True``): :math:`(a, b) = (2k, 2k + 1)`, i.e.
      :math:`R_t x = x \odot \cos t\theta + \mathrm{rotate\_every\_two}(x) \odot \sin t\theta`
      with :math:`\theta` repeated as ``[θ_0, θ_0, θ_1, θ_1, ...]``. The RoFormer paper,
      GPT-J / mesh-transformer-jax (Hugging Face ``rotate_every_two``), x-transformers and
      rotary-embedding-torch, Meta's original LLaMA code (``view_as_complex``).

    The two layouts are the same map up to a fixed permutation ``P`` of the rotated channels
    (``[0, 2, 4, .., 1, 3, 5, ..]``): ``interleaved(x)[P] = half(x[P])``. Weights trained with
    one layout therefore need this layout, or their q/k projection rows permuted by ``P`` per
    head (what Hugging Face's LLaMA conversion does).

    Partial rotation (``rotary_dim`` or ``fraction``): GPT-J's ``rotary_dim``, GPT-NeoX's
    ``rotary_pct`` (now ``partial_rotary_factor``), x-transformers' ``rotary_emb_dim`` (default
    ``max(dim_head // 2, 32)``). The remaining ``d - r`` channels then carry content only: the
    score is position-free on them.

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
        interleaved: pair adjacent channels ``(2k, 2k+1)`` (RoFormer / GPT-J / x-transformers)
            instead of ``(k, k + r/2)`` (GPT-NeoX / LLaMA; the default, False).
        rotary_dim: rotate only the first ``r`` channels of each head (even,
            ``0 < r <= head_dim``; default: all of them).
        fraction: the same given as a share of the head, ``r = int(head_dim * fraction)`` as
            Hugging Face's GPT-NeoX computes it; must give an even ``r > 0``. At most one of
            ``rotary_dim`` and ``fraction``.

    Shapes:
        - q: ``(b, h, i, d)`` at positions ``q_offset .. q_offset + i - 1``;
          k: ``(b, h, j, d)`` at positions ``k_offset .. k_offset + j - 1``.
        - output of :meth:`rotate`: rotated ``q`` and ``k``, same shapes and dtypes.
    """

    acts_on = "qk"

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        interleaved: bool = False,
        rotary_dim: int | None = None,
        fraction: float | None = None,
    ) -> None:
        super().__init__()
        if not _is_int(head_dim) or head_dim <= 0 or head_dim % 2:
            raise ValueError(
                f"Rotary rotates channel pairs: head_dim must be a positive even int, "
                f"got {head_dim!r}"
            )
        if not base > 1.0:
            raise ValueError(f"base must be > 1, got {base!r}")
        if not isinstance(interleaved, bool):
            raise ValueError(f"interleaved must be a bool, got {interleaved!r}")
        self.head_dim, self.base, self.interleaved = head_dim, float(base), interleaved
        self.rotary_dim = _resolve_rotary_dim(head_dim, rotary_dim, fraction)
        self._turn = rotate_every_two if interleaved else rotate_half
        self._cache: tuple[Tensor, Tensor] | None = None  # (cos, sin), each (n, r); see above

    def cos_sin(
        self,
        n: int,
        *,
        offset: int = 0,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> tuple[Tensor, Tensor]:
        """``cos`` and ``sin`` of positions ``offset .. offset + n - 1``, each ``(n, r)`` in this
        encoding's layout (angles repeated ``[θ_0 .. θ_{r/2-1}] * 2`` for rotate half,
        ``θ_0, θ_0, θ_1, θ_1, ..`` interleaved), in float32 (float64 for a float64 ``dtype``)
        on ``device`` (default: the cached table's device, else the CPU)."""
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
            grow, r = max(need, 2 * have), self.rotary_dim
            half = torch.arange(r // 2, dtype=torch.float64, device=device)
            inv_freq = self.base ** (-2 * half / r)  # (r/2,)
            pos = torch.arange(grow, dtype=torch.float64, device=device)
            angle = torch.outer(pos, inv_freq)  # (n, r/2)
            # (n, r): channels 2k, 2k+1 share θ_k (interleaved), or k and k + r/2 (halves)
            angle = angle.repeat_interleave(2, dim=-1) if self.interleaved else angle.repeat(1, 2)
            cache = self._cache = (angle.cos().to(wide), angle.sin().to(wide))
        return cache[0][offset:need], cache[1][offset:need]

    def rotate_one(self, x: Tensor, *, offset: int = 0) -> Tensor:
        """Rotate ``x (..., n, d)`` as positions ``offset .. offset + n - 1``."""
        if x.shape[-1] != self.head_dim:
            raise ValueError(
                f"Rotary was built for head_dim={self.head_dim}, got input {tuple(x.shape)}"
            )
        r = self.rotary_dim
        cos, sin = self.cos_sin(
            x.shape[-2], offset=offset, dtype=x.dtype, device=x.device
        )  # (n, r)
        xr = x[..., :r].to(cos.dtype)  # (..., n, r)
        rotated = (xr * cos + self._turn(xr) * sin).to(x.dtype)
        if r == self.head_dim:
            return rotated
        return torch.cat([rotated, x[..., r:]], dim=-1)  # (..., n, d): the rest passes through

    def rotate(
        self, q: Tensor, k: Tensor, *, q_offset: int = 0, k_offset: int = 0
    ) -> tuple[Tensor, Tensor]:
        return self.rotate_one(q, offset=q_offset), self.rotate_one(k, offset=k_offset)

    def extra_repr(self) -> str:
        extra = ", interleaved=True" if self.interleaved else ""
        if self.rotary_dim != self.head_dim:
            extra += f", rotary_dim={self.rotary_dim}"
        return f"head_dim={self.head_dim}, base={self.base:g}{extra}"


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _resolve_rotary_dim(head_dim: int, rotary_dim: int | None, fraction: float | None) -> int:
    """The number ``r`` of rotated channels, from at most one of ``rotary_dim`` / ``fraction``."""
    if rotary_dim is not None and fraction is not None:
        raise ValueError(
            f"give at most one of rotary_dim and fraction, got rotary_dim={rotary_dim!r} and "
            f"fraction={fraction!r}"
        )
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
            raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}")
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
        r = int(head_dim * fraction)  # truncation, as Hugging Face's GPT-NeoX computes it
        if r <= 0 or r % 2:
            raise ValueError(
                f"fraction={fraction!r} of head_dim={head_dim} gives rotary_dim={r}; rotated "
                "channels come in pairs, so it must be a positive even number: pick a fraction "
                "that gives one, or pass rotary_dim= directly"
            )
        return r
    if rotary_dim is None:
        return head_dim
    if not _is_int(rotary_dim) or rotary_dim <= 0 or rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(
            f"rotary_dim must be a positive even int at most head_dim={head_dim} (rotated "
            f"channels come in pairs), got {rotary_dim!r}"
        )
    return rotary_dim
