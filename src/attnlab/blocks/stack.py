r"""``BlockStack``: what :class:`TransformerEncoder` and :class:`TransformerDecoder` share.

``depth`` :class:`TransformerBlock` s, a positional encoding applied either once to the input or
in every block, input dropout and an optional final norm.

Legend: ``b`` batch, ``n`` positions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor, nn

from ..dropout import Dropout
from ..positional.base import PositionalEncoding
from .block import TransformerBlock, _check_positional

__all__ = ["BlockStack"]


class BlockStack(nn.Module):
    r"""Base of the encoder and the decoder: the blocks, the positional encoding, the final norm.

    Args:
        dim: model width.
        heads: attention heads.
        depth: number of blocks (a positive int).
        dropout, norm_first, norm_layer: block options, see :class:`TransformerBlock`;
            ``dropout`` also follows an ``"input"`` positional encoding.
        positional: a :class:`~attnlab.positional.base.PositionalEncoding` or None.
        final_norm: normalise the output (default: True for pre-norm, whose residual stream is
            otherwise never normalised; False for post-norm, whose blocks already end in one).
        **block_options: the other :class:`TransformerBlock` options (``causal``,
            ``cross_attention``, ``attention``, ...).
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        depth: int,
        *,
        dropout: float,
        norm_first: bool,
        norm_layer: Callable[[int], nn.Module],
        positional: PositionalEncoding | None,
        final_norm: bool | None,
        **block_options: Any,
    ) -> None:
        super().__init__()
        if not isinstance(depth, int) or depth <= 0:
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        _check_positional(positional)
        self.dim, self.depth = dim, depth
        self.blocks = nn.ModuleList(
            TransformerBlock(
                dim,
                heads,
                dropout=dropout,
                norm_first=norm_first,
                norm_layer=norm_layer,
                **block_options,
            )
            for _ in range(depth)
        )
        self.positional = positional
        self.input_dropout = Dropout(dropout)
        final_norm = norm_first if final_norm is None else final_norm
        self.norm = norm_layer(dim) if final_norm else None

    def _input_positions(
        self, x: Tensor, offset: int = 0
    ) -> tuple[Tensor, PositionalEncoding | None]:
        """Add an ``"input"`` positional encoding to ``x`` ``(b, n, dim)`` at positions
        ``offset, offset + 1, ...`` (then dropout); any other encoding is left to the blocks.

        Returns:
            ``x`` (encoded or not) and the encoding every block gets (None if it acted here).
        """
        pe = self.positional
        if pe is None or pe.acts_on != "input":
            return x, pe
        pe.check_length(offset + x.shape[1])
        return self.input_dropout(pe(x, offset=offset)), None

    def _final_norm(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.norm is not None else x
