r"""``TransformerEncoder``: a stack of :class:`TransformerBlock` with a positional encoding.

Legend: ``b`` batch, ``n`` / ``i`` / ``j`` positions, ``h`` heads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from torch import Tensor, nn

from ..attention_config import AttentionConfig
from ..masks import Mask
from ..positional.base import PositionalEncoding
from .block import _check_input
from .feedforward import FeedForward
from .options import attention_settings
from .stack import BlockStack
from .trunk import TrunkConfig

__all__ = ["TransformerEncoder", "EncoderOutput", "check_kernel_positions"]


class EncoderOutput(NamedTuple):
    out: Tensor  # (b, n, dim)
    weights: list[Tensor] | None  # per layer (b, h, i, j) when need_weights


class TransformerEncoder(BlockStack):
    r"""``depth`` Transformer blocks of (optionally causal) self-attention.

    The positional encoding acts where its ``acts_on`` says:

    * ``"input"`` (sinusoidal, learned, ...): added **once** to ``x`` before the first block,
      followed by dropout, as in Vaswani et al. (2017). (Scaling token embeddings by
      :math:`\sqrt{d}` is the embedding layer's business, not the encoder's.)
    * ``"qk"`` (rotary) or ``"scores"`` (ALiBi, relative bias): handed to every block's
      self-attention; one module serves all layers, so a learned bias is shared across layers.

    Args:
        dim: model width.
        heads: attention heads.
        depth: number of blocks.
        positional: a :class:`~attnlab.positional.base.PositionalEncoding` or None.
        final_norm: normalise the output (default: True for pre-norm, whose residual stream is
            otherwise never normalised; False for post-norm, whose blocks already end in one).

    The block options ``ff_hidden``, ``dropout``, ``norm_first``, ``norm_layer``, ``causal``,
    ``attention``, ``attention_dropout``, ``ff_layer`` are passed to every
    :class:`TransformerBlock` (see its arguments).

    Padding: pass ``mask=masks.padding(lengths)`` (sequence ``b`` has ``lengths[b]`` real
    tokens, then padding), or a boolean tensor with True = may attend, broadcastable to
    ``(b, h, n, n)``: for key padding ``keep[:, None, None, :]`` with ``keep`` of shape ``(b, n)``.
    A 2-D tensor means ``(i, j)``, as everywhere in attnlab. Outputs at real positions do not
    depend on padded inputs; outputs at padded positions are finite and meaningless.

    Shapes:
        - x: ``(b, n, dim)``
        - out: ``(b, n, dim)``; weights: ``depth`` tensors ``(b, h, n, n)``
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        depth: int,
        *,
        ff_hidden: int | None = None,
        dropout: float = 0.0,
        norm_first: bool = True,
        norm_layer: Callable[[int], nn.Module] = nn.LayerNorm,
        causal: bool = False,
        attention: AttentionConfig | None = None,
        attention_dropout: float | None = None,
        ff_layer: Callable[..., nn.Module] = FeedForward,
        positional: PositionalEncoding | None = None,
        final_norm: bool | None = None,
    ) -> None:
        attention, attention_dropout = attention_settings(attention, attention_dropout)
        super().__init__(
            dim, heads, depth, ff_hidden=ff_hidden, dropout=dropout, norm_first=norm_first,
            norm_layer=norm_layer, causal=causal, attention=attention,
            attention_dropout=attention_dropout, ff_layer=ff_layer, positional=positional,
            final_norm=final_norm,
        )  # fmt: skip

    @classmethod
    def from_config(
        cls,
        dim: int,
        config: TrunkConfig,
        *,
        positional: PositionalEncoding | None = None,
        causal: bool = False,
        final_norm: bool | None = None,
    ) -> TransformerEncoder:
        """The encoder of the trunk settings ``config`` at width ``dim``; the positions
        (``positional``) and causality are the input's, given by the caller.

        Raises:
            ValueError: ``config.heads`` does not divide ``dim``, or an efficient kernel with
                a positional encoding that biases the scores (it never forms them).
        """
        config.check_width(dim)
        check_kernel_positions(config, positional)
        return cls(dim, config.heads, config.depth, **config.block_options(), causal=causal,
                   positional=positional, final_norm=final_norm)  # fmt: skip

    def forward(
        self,
        x: Tensor,
        *,
        mask: Tensor | Mask | None = None,
        bias: Tensor | None = None,
        need_weights: bool = False,
    ) -> EncoderOutput:
        """Encode ``x`` ``(b, n, dim)``; ``mask`` is the key-padding (or any) self-attention
        mask, True = may attend; ``bias`` a float ``(b, h, n, n)`` (or broadcastable) added to
        every block's attention scores (e.g. a molecule's distance bias). Returns
        ``EncoderOutput(out, weights)``."""
        _check_input(x, self.dim)
        x, block_pe = self._input_positions(x)
        weights: list[Tensor] | None = [] if need_weights else None
        for block in self.blocks:
            o = block(x, mask=mask, bias=bias, positional=block_pe, need_weights=need_weights)
            x = o.out
            if weights is not None:
                weights.append(o.self_weights)
        return EncoderOutput(self._final_norm(x), weights)


def check_kernel_positions(config: TrunkConfig, positional: PositionalEncoding | None) -> None:
    """Refuse, at construction, an efficient kernel with a score-biasing encoding."""
    if config.attention.kernel is not None and getattr(positional, "acts_on", None) == "scores":
        raise ValueError(
            f"{type(positional).__name__} biases the attention scores, which the efficient "
            f"kernel {config.attention.kernel!r} never forms; use a rotary or input encoding "
            "(e.g. rotary, sinusoidal) with a kernel, or exact attention"
        )
