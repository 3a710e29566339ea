r"""``TransformerDecoder``: causal self-attention, cross-attention to an encoded context and a
feed-forward network per block, with a KV cache for incremental decoding.

Legend: ``b`` batch, ``n`` / ``i`` target positions, ``m`` context positions, ``h`` heads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from torch import Tensor, nn

from ..attention_config import AttentionConfig
from ..masks import Mask
from ..positional.base import PositionalEncoding
from .block import BlockCache, _check_input
from .encoder import check_kernel_positions
from .feedforward import FeedForward
from .options import attention_settings
from .stack import BlockStack
from .trunk import TrunkConfig

__all__ = ["TransformerDecoder", "DecoderOutput", "DecoderCache"]


class DecoderOutput(NamedTuple):
    out: Tensor  # (b, n, dim)
    self_weights: list[Tensor] | None  # per layer (b, h, i, j) when need_weights
    cross_weights: list[Tensor] | None  # per layer (b, h, i, m) when need_weights


@dataclass
class DecoderCache:
    """One :class:`BlockCache` per layer: a self-attention KV cache that grows with every call
    and a cross-attention cache filled from the context on the first call and reused after.

    Start with ``DecoderCache()``; the decoder fills in its layers on first use. With
    ``kernel="linear"`` self-attention each layer's ``self_attn`` is a
    :class:`~attnlab.attention.RecurrentCache`: the RNN state of linear attention, whose size
    does not grow with the length.
    """

    layers: list[BlockCache] = field(default_factory=list)

    @property
    def length(self) -> int:
        """Number of target positions decoded so far."""
        return self.layers[0].length if self.layers else 0

    def reorder(self, index: Tensor) -> DecoderCache:
        """Keep the batch rows ``index`` ``(b',)`` of every cached tensor, in place (beam
        search: the surviving beams and their parents); returns ``self``."""
        for layer in self.layers:
            for cache in (layer.self_attn, layer.cross_attn):
                for name, value in vars(cache).items():
                    if isinstance(value, Tensor):  # every cached tensor is batch first
                        setattr(cache, name, value.index_select(0, index))
        return self


class TransformerDecoder(BlockStack):
    r"""``depth`` blocks of causal self-attention, cross-attention and feed-forward.

    Called with the whole target it is the training-time (teacher-forced) decoder. Called with a
    :class:`DecoderCache`, ``x`` holds only the new positions (one token, or several), which come
    after the ``cache.length`` cached ones; the result equals the full causal computation.

    The positional encoding acts on the target only: ``"input"`` encodings are added once to
    ``x`` at positions ``cache.length, cache.length + 1, ...``; ``"qk"`` / ``"scores"`` ones go
    to every block's self-attention. Cross-attention gets none (the context carries its own).

    Args:
        dim: model width.
        heads: attention heads.
        depth: number of blocks.
        context_dim: width of the context (default ``dim``).
        positional: a :class:`~attnlab.positional.base.PositionalEncoding` or None.
        final_norm: normalise the output (default: True for pre-norm, False for post-norm).

    The block options ``ff_hidden``, ``dropout``, ``norm_first``, ``norm_layer``, ``attention``,
    ``attention_dropout``, ``ff_layer`` are passed to every :class:`TransformerBlock` (see its
    arguments).

    Shapes:
        - x: ``(b, n, dim)``; context: ``(b, m, context_dim)``
        - mask: target self-attention mask (combined with causality), a Mask such as
          ``masks.padding(lengths)`` or a boolean tensor broadcastable to ``(b, h, n, n)``.
          Under a cache it must be a Mask that fits the keys so far (``cache.length + n``),
          e.g. ``masks.padding(lengths.clamp(max=cache.length + n))``
        - context_mask: ``masks.padding(context_lengths)`` or boolean, broadcastable to
          ``(b, h, n, m)``; under a cache use a Mask or a ``(b, 1, 1, m)`` tensor
        - out: ``(b, n, dim)``; weights: ``depth`` tensors ``(b, h, n, n)`` / ``(b, h, n, m)``
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        depth: int,
        *,
        context_dim: int | None = None,
        ff_hidden: int | None = None,
        dropout: float = 0.0,
        norm_first: bool = True,
        norm_layer: Callable[[int], nn.Module] = nn.LayerNorm,
        attention: AttentionConfig | None = None,
        attention_dropout: float | None = None,
        ff_layer: Callable[..., nn.Module] = FeedForward,
        positional: PositionalEncoding | None = None,
        final_norm: bool | None = None,
    ) -> None:
        attention, attention_dropout = attention_settings(attention, attention_dropout)
        super().__init__(
            dim, heads, depth, ff_hidden=ff_hidden, dropout=dropout, norm_first=norm_first,
            norm_layer=norm_layer, cross_attention=True, context_dim=context_dim, causal=True,
            attention=attention, attention_dropout=attention_dropout, ff_layer=ff_layer,
            positional=positional, final_norm=final_norm,
        )  # fmt: skip
        self.context_dim = context_dim or dim

    @classmethod
    def from_config(
        cls,
        dim: int,
        config: TrunkConfig,
        *,
        positional: PositionalEncoding | None = None,
        context_dim: int | None = None,
    ) -> TransformerDecoder:
        """The decoder of the trunk settings ``config`` at width ``dim`` (see
        :meth:`TransformerEncoder.from_config`)."""
        config.check_width(dim)
        check_kernel_positions(config, positional)
        return cls(dim, config.heads, config.depth, **config.block_options(),
                   context_dim=context_dim, positional=positional)  # fmt: skip

    def forward(
        self,
        x: Tensor,
        context: Tensor,
        *,
        mask: Tensor | Mask | None = None,
        context_mask: Tensor | Mask | None = None,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
    ) -> DecoderOutput:
        """Decode ``x`` ``(b, n, dim)`` against ``context`` ``(b, m, context_dim)``.

        With ``cache``, ``x`` is the next ``n`` positions and the cache is updated in place.
        Returns ``DecoderOutput(out, self_weights, cross_weights)``.
        """
        _check_input(x, self.dim)
        _check_input(context, self.context_dim, "context")
        if cache is not None:
            if not cache.layers:
                # linear attention decodes as an RNN (RecurrentCache: constant size per layer)
                cache.layers.extend(
                    BlockCache(self_attn=b.self_attn.new_cache()) for b in self.blocks
                )
            elif len(cache.layers) != self.depth:
                raise ValueError(
                    f"cache has {len(cache.layers)} layers but the decoder has {self.depth}; "
                    "start each sequence with a fresh DecoderCache()"
                )
        offset = cache.length if cache is not None else 0
        x, block_pe = self._input_positions(x, offset)
        self_w: list[Tensor] | None = [] if need_weights else None
        cross_w: list[Tensor] | None = [] if need_weights else None
        for layer, block in enumerate(self.blocks):
            o = block(
                x, context=context, mask=mask, context_mask=context_mask, positional=block_pe,
                need_weights=need_weights, cache=cache.layers[layer] if cache is not None else None,
            )  # fmt: skip
            x = o.out
            if need_weights:
                self_w.append(o.self_weights)
                cross_w.append(o.cross_weights)
        return DecoderOutput(self._final_norm(x), self_w, cross_w)
