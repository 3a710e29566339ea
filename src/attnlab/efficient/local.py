"""Local (sliding-window) attention: exact softmax attention restricted to a window.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

from torch import Tensor

from .. import masks
from ..backends import BACKENDS, Problem, run_backend
from ..functional import ScaledDotScore, SoftmaxNorm
from ..masks import Mask
from ._sparse import band_index, gathered_attention
from .base import AttentionKernel, MaskParts

__all__ = [
    "LocalKernel",
    "exact_attention",
    "check_backend",
    "default_block",
    "sliding_band",
]


def check_backend(backend: str) -> str:
    """Validate a sparse kernel's ``backend`` option: ``"auto"``, ``"banded"``, ``"exact"`` or
    an exact backend's name."""
    if backend not in ("auto", "banded", "exact") and backend not in BACKENDS:
        raise ValueError(
            f"backend must be 'auto', 'banded', 'exact' or an exact backend "
            f"({', '.join(BACKENDS.names())}), got {backend!r}"
        )
    return backend


def exact_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Mask | None,
    *,
    q_offset: int,
    backend: str = "auto",
) -> Tensor:
    """Exact scaled dot-product softmax attention under ``mask`` on the core's backends
    (``backend``: a backend name, or ``"auto"`` / ``"exact"`` / ``"banded"`` for the core's
    automatic choice)."""
    name = backend if backend in BACKENDS else "auto"
    p = Problem(q, k, v, ScaledDotScore(), SoftmaxNorm(), mask=mask, q_offset=q_offset)
    out, _, _ = run_backend(name, p)
    return out


def default_block(window: int) -> int:
    """Query block of the banded path for a sliding window ``w``: ``min(max(w, 16), 256)``."""
    return min(max(window, 16), 256)


def sliding_band(
    backend: str,
    *,
    block: int,
    window: int,
    causal: bool,
    q_len: int,
    kv_len: int,
    q_offset: int,
    extra_keys: int = 0,
) -> Tensor | None:
    """Key positions of each query block's sliding-window band, ``(r, block + w + after)``
    (``after`` = ``w``, or 0 when causal), or None where the exact backends should run instead.

    The banded path runs when ``backend="banded"``, or for ``backend="auto"`` when a query
    block's keys (its band plus ``extra_keys``, e.g. global tokens) are at most half of the
    ``kv_len`` keys: for short sequences a dense fused kernel beats gathering.
    """
    after = 0 if causal else window
    keys = block + window + after + extra_keys
    if not (backend == "banded" or (backend == "auto" and 2 * keys <= kv_len)):
        return None
    blocks = -(-q_len // block)
    return band_index(blocks, block, before=window, after=after, q_offset=q_offset, kv_len=kv_len)


class LocalKernel(AttentionKernel):
    r"""Sliding-window attention, exact under ``masks.local(window) & mask``.

    Each query attends only to keys within ``window`` positions of itself (Luong et al. 2015's
    local attention; the restricted self-attention of Vaswani et al. 2017, Sec. 4; the sliding
    window of Longformer, Beltagy et al. 2020, Sec. 3.1):

    .. math::
        o_i = \sum_{j : |i - j| \le w}
              \mathrm{softmax}_j\Big(\frac{q_i \cdot k_j}{\sqrt d}\Big) v_j .

    It is *exact* attention under ``masks.local(window)`` composed with the caller's mask, so
    every mask works (causal: ``0 <= i - j <= w``). Two ways to compute it, one visible switch:

    * ``backend="banded"``: query blocks of ``block`` gather the band of ``block + 2w`` keys
      around them (:mod:`attnlab.efficient._sparse`): ``O(n w d)`` time, ``O(n w)`` memory,
      forward and backward.
    * ``backend="sdpa" | "flex" | "chunked" | "reference"`` (or ``"exact"``: the core's
      ``auto`` choice): the exact backends of :mod:`attnlab.backends` under
      ``local(w) & mask``. FlexAttention skips masked blocks but runs forward only on CPU and
      compiles per shape; ``chunked`` still evaluates the mask on every block, ``O(n^2)``.

    ``backend="auto"`` (default) takes ``banded`` when the band is at most half of the keys,
    else the exact backends (for short sequences a dense fused kernel beats gathering).

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        window: ``w``, the radius: keys at ``|i - j| <= w`` (default 128), the same meaning as
            :func:`attnlab.masks.local`'s. ``w >= n - 1`` is full attention.
        block: query block of the banded path (default ``min(max(w, 16), 256)``).
        backend: ``"auto"`` (default), ``"banded"``, ``"exact"`` or an exact backend's name.

    Shapes: as :class:`~attnlab.efficient.base.AttentionKernel`.

    Complexity: time ``O(n w d)``, memory ``O(n w)`` (banded).
    """

    name = "local"
    supports_causal = True
    supports_structured = True

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        window: int = 128,
        block: int | None = None,
        backend: str = "auto",
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if not isinstance(window, int) or window < 0:
            raise ValueError(f"window must be an int >= 0, got {window!r}")
        if block is not None and (not isinstance(block, int) or block <= 0):
            raise ValueError(f"block must be a positive int or None, got {block!r}")
        self.window, self.backend = window, check_backend(backend)
        self.block = block or default_block(window)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        i, j = q.shape[2], k.shape[2]
        window = masks.local(self.window, causal=parts.causal)
        mask = window if parts.mask is None else window & parts.mask
        band = sliding_band(
            self.backend, block=self.block, window=self.window, causal=parts.causal, q_len=i,
            kv_len=j, q_offset=q_offset,
        )  # fmt: skip
        if band is None:
            return exact_attention(q, k, v, mask, q_offset=q_offset, backend=self.backend)
        return gathered_attention(q, k, v, band, block=self.block, mask=mask, q_offset=q_offset)

    def extra_repr(self) -> str:
        return f"window={self.window}, block={self.block}, backend={self.backend!r}"
