"""Longformer attention: a sliding window plus a few global tokens, exact under its mask.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``g`` global tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from .. import masks
from ..kernels.base import renamed_option
from ._sparse import append_keys, full_rows, gathered_attention
from .base import AttentionKernel, MaskParts
from .local import check_backend, default_block, exact_attention, sliding_band

__all__ = ["LongformerKernel"]


class LongformerKernel(AttentionKernel):
    r"""Longformer attention (Beltagy, Peters & Cohan 2020, Sec. 3.1): window + global tokens.

    Every query attends to the keys within ``window`` positions on either side of itself (the
    radius: the paper's "window size" is twice it); the ``global_tokens`` attend to
    every key and every query attends to them ("symmetric" global attention, Sec. 3.1). It is
    exact softmax attention under

    .. math::
        M = \big(\mathrm{local}(w) \lor \mathrm{global}(G)\big) \land \mathrm{mask},

    i.e. ``(masks.local(w) | masks.global_tokens(G)) & mask``, so padding, causality (causal
    local window plus global tokens seen from later positions) and any other mask compose. The
    paper's separate linear projections for global attention are not included: this kernel works
    on the layer's one set of ``q, k, v``.

    Long sequences run on the banded path (each query block gathers its band and the global
    keys; the ``g`` global queries get full rows); short ones on the exact backends.

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        window: ``w``, the sliding window's radius: keys at ``|i - j| <= w`` (default 128), as
            :func:`attnlab.masks.local`.
        global_tokens: positions of the global tokens (default ``(0,)``, e.g. ``[CLS]``);
            positions past the sequence are ignored.
        block: query block of the banded path (default ``min(max(w, 16), 256)``).
        backend: ``"auto"`` (default), ``"banded"``, ``"exact"`` or an exact backend's name
            (see :class:`~attnlab.efficient.local.LocalKernel`).
        impl: deprecated name of ``backend``.

    Complexity: time ``O(n (w + g) d)``, memory ``O(n (w + g))``.
    """

    name = "longformer"
    supports_causal = True
    supports_structured = True
    deprecated_options = {"impl": "backend"}

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        window: int = 128,
        global_tokens: Sequence[int] = (0,),
        block: int | None = None,
        backend: str = "auto",
        impl: str | None = None,
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if not isinstance(window, int) or window < 0:
            raise ValueError(f"window must be an int >= 0, got {window!r}")
        idx = torch.as_tensor(list(global_tokens), dtype=torch.long).flatten()
        if (idx < 0).any():
            raise ValueError(f"global_tokens must be positions >= 0, got {idx.tolist()}")
        backend = renamed_option(self.name, "impl", "backend", impl, backend)
        self.window, self.backend = window, check_backend(backend)
        self.global_idx = torch.unique(idx)
        self.block = block or default_block(window)

    @property
    def impl(self) -> str:
        """Deprecated name of :attr:`backend`."""
        return self.backend

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        i, j = q.shape[2], k.shape[2]
        pattern = masks.local(self.window, causal=parts.causal) | masks.global_tokens(
            self.global_idx
        )
        mask = pattern if parts.mask is None else pattern & parts.mask
        g = self.global_idx[self.global_idx < j]
        band = sliding_band(
            self.backend, block=self.block, window=self.window, causal=parts.causal, q_len=i,
            kv_len=j, q_offset=q_offset, extra_keys=g.numel(),
        )  # fmt: skip
        if band is None:
            return exact_attention(q, k, v, mask, q_offset=q_offset, backend=self.backend)
        index = append_keys(band, g)  # (r, kk): band keys and the global keys, each once
        out = gathered_attention(q, k, v, index, block=self.block, mask=mask, q_offset=q_offset)
        rows = self.global_idx - q_offset
        rows = rows[(rows >= 0) & (rows < i)]  # global queries among these queries
        return full_rows(out, q, k, v, rows, mask=mask, q_offset=q_offset)

    def extra_repr(self) -> str:
        return (
            f"window={self.window}, global_tokens={self.global_idx.tolist()}, "
            f"block={self.block}, backend={self.backend!r}"
        )
