r"""``TransformerBlock``: self-attention, optional cross-attention and a feed-forward network,
each inside a residual connection with a normalisation (pre-norm or post-norm).

Legend: ``b`` batch, ``n`` / ``i`` query positions, ``m`` / ``j`` key positions, ``h`` heads.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from torch import Tensor, nn

from .. import masks
from ..attention import KVCache, MultiHeadAttention
from ..attention_config import AttentionConfig
from ..dropout import Dropout
from ..efficient.linear import RecurrentCache
from ..masks import Mask
from ..positional.base import PositionalEncoding
from .feedforward import FeedForward
from .options import attention_settings, ff_kwargs

__all__ = ["TransformerBlock", "BlockOutput", "BlockCache"]


class BlockOutput(NamedTuple):
    out: Tensor  # (b, n, dim)
    self_weights: Tensor | None  # (b, h, i, j) when need_weights
    cross_weights: Tensor | None  # (b, h, i, m) when need_weights and cross-attention


@dataclass
class BlockCache:
    """The key / value caches of one block for incremental decoding.

    ``self_attn`` grows by the new positions at every call; ``cross_attn`` is filled from the
    context on the first call and reused afterwards (the context must not change in between).
    With a linear-attention self-attention, ``self_attn`` may be a :class:`RecurrentCache`
    (``block.self_attn.new_cache()``): a constant-size state instead of growing keys.
    """

    self_attn: KVCache | RecurrentCache = field(default_factory=KVCache)
    cross_attn: KVCache = field(default_factory=KVCache)

    @property
    def length(self) -> int:
        """Number of positions decoded so far."""
        return self.self_attn.length


class TransformerBlock(nn.Module):
    r"""One Transformer layer around :class:`~attnlab.attention.MultiHeadAttention`.

    Pre-norm (``norm_first=True``, the default; Xiong et al. 2020) normalises each sub-layer's
    input and keeps the residual stream un-normalised, which trains deep stacks without warm-up;
    post-norm (Vaswani et al. 2017) normalises after each residual sum:

    .. math::
        \text{pre-norm:}\; x \leftarrow x + \mathrm{Drop}(F(\mathrm{Norm}(x))), \qquad
        \text{post-norm:}\; x \leftarrow \mathrm{Norm}(x + \mathrm{Drop}(F(x))),

    for :math:`F` = self-attention, then cross-attention (``cross_attention=True``), then the
    feed-forward network. The same arithmetic as ``torch.nn.TransformerEncoderLayer`` /
    ``TransformerDecoderLayer`` (see :meth:`from_torch`).

    Args:
        dim: model width.
        heads: attention heads; must divide ``dim``.
        ff_hidden: hidden width of the feed-forward network (default ``4 * dim``).
        dropout: dropout on the attention weights, the feed-forward hidden layer and each
            residual branch during training (default 0; as torch's layers).
        norm_first: pre-norm (True, default) or post-norm (False).
        norm_layer: normalisation class (or ``functools.partial``) called with ``dim``
            (default ``nn.LayerNorm``).
        cross_attention: add a cross-attention sub-layer attending to ``context``.
        context_dim: width of ``context`` (default ``dim``); only with ``cross_attention``.
        causal: self-attention sees only earlier positions (``masks.causal()`` combined with
            any given mask by ``&``).
        attention: the attention maths of every :class:`MultiHeadAttention` of the block
            (:class:`~attnlab.attention_config.AttentionConfig`: score, normalisation, backend,
            kernel and its options; default ``AttentionConfig()``, exact scaled-dot softmax). A
            kernel *module* given as ``attention.kernel`` is copied into each attention layer,
            so layers do not share its parameters.
        attention_dropout: dropout on the attention weights (default ``dropout``); exact
            attention only, efficient kernels refuse a positive value.
        ff_layer: the feed-forward class (or ``functools.partial``), called as
            ``ff_layer(dim, hidden=ff_hidden, dropout=dropout)`` (default :class:`FeedForward`;
            e.g. ``partial(FeedForward, activation=nn.SiLU, gated=True)`` for SwiGLU). What a
            ``partial`` binds wins: ``partial(FeedForward, dropout=0.0)`` keeps its feed-forward
            free of dropout whatever the block's ``dropout``, and a bound ``hidden`` is used
            when ``ff_hidden`` is None.

    Shapes:
        - x: ``(b, n, dim)``; context: ``(b, m, context_dim)``
        - mask: boolean broadcastable to ``(b, h, n, n)``, True = may attend, or a
          :class:`~attnlab.masks.Mask` (e.g. ``masks.padding(lengths)``)
        - context_mask: the same for ``(b, h, n, m)``
        - out: ``(b, n, dim)``; self_weights ``(b, h, n, n)``; cross_weights ``(b, h, n, m)``
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        *,
        ff_hidden: int | None = None,
        dropout: float = 0.0,
        norm_first: bool = True,
        norm_layer: Callable[[int], nn.Module] = nn.LayerNorm,
        cross_attention: bool = False,
        context_dim: int | None = None,
        causal: bool = False,
        attention: AttentionConfig | None = None,
        attention_dropout: float | None = None,
        ff_layer: Callable[..., nn.Module] = FeedForward,
    ) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if context_dim is not None and not cross_attention:
            raise ValueError(
                "context_dim is the width of cross-attention's context; pass "
                "cross_attention=True with it, or drop it"
            )
        attention, attention_dropout = attention_settings(attention, attention_dropout)
        options = attention.layer_kwargs()
        if attention_dropout is not None:
            options["dropout"] = attention_dropout
        elif attention.kernel is None:  # efficient kernels have no attention-weight dropout
            options["dropout"] = dropout
        self.dim, self.heads = dim, heads
        self.norm_first, self.causal = norm_first, causal
        # One Mask object per block: it caches its FlexAttention block masks per shape.
        self._causal_mask = masks.causal() if causal else None
        self.self_attn = MultiHeadAttention(dim, heads, **_own_copy(options))
        self.attn_norm = norm_layer(dim)
        self.cross_attn: MultiHeadAttention | None = None
        self.cross_norm: nn.Module | None = None
        if cross_attention:
            self.cross_attn = MultiHeadAttention(
                dim, heads, context_dim=context_dim, **_own_copy(options)
            )
            self.cross_norm = norm_layer(dim)
        self.ff = ff_layer(dim, **ff_kwargs(ff_layer, ff_hidden, dropout))
        self.ff_norm = norm_layer(dim)
        self.drop = Dropout(dropout)  # on each residual branch

    def self_attention_mask(self, mask: Tensor | Mask | None) -> Tensor | Mask | None:
        """The self-attention mask: ``mask``, and with ``causal`` ``masks.causal() & mask``.

        A Mask object knows the queries' positions, so it stays right under a KV cache (the
        layer passes the cache length as the first query's position).
        """
        if self._causal_mask is None:
            return mask
        return self._causal_mask if mask is None else self._causal_mask & mask

    def forward(
        self,
        x: Tensor,
        *,
        context: Tensor | None = None,
        mask: Tensor | Mask | None = None,
        context_mask: Tensor | Mask | None = None,
        bias: Tensor | None = None,
        positional: PositionalEncoding | None = None,
        need_weights: bool = False,
        cache: BlockCache | None = None,
    ) -> BlockOutput:
        """Run the block.

        Args:
            x: ``(b, n, dim)``.
            context: ``(b, m, context_dim)``; required with cross-attention, else not allowed.
            mask: self-attention mask, True = may attend (combined with causality). With a
                ``cache``, pass a Mask object (a dense tensor has no query positions).
            context_mask: cross-attention mask, e.g. ``masks.padding(context_lengths)`` or a
                boolean ``(b, 1, 1, m)`` key-padding tensor.
            bias: float ``(n, n)`` or ``(b, h, n, n)`` added to the self-attention scores (exact
                attention only).
            positional: a ``"qk"`` or ``"scores"`` encoding for self-attention. ``"input"``
                encodings are added once to the stack's input, not per block
                (:class:`TransformerEncoder` does that).
            need_weights: also return the attention weights.
            cache: a :class:`BlockCache` for incremental decoding; ``x`` holds the new positions.
        """
        if self.cross_attn is None and (context is not None or context_mask is not None):
            raise ValueError(
                "this block has no cross-attention; build it with cross_attention=True to "
                "pass context / context_mask"
            )
        if self.cross_attn is not None and context is None:
            raise ValueError("this block has cross-attention: pass context=(b, m, context_dim)")
        if positional is not None and positional.acts_on == "input":
            raise ValueError(
                f"{type(positional).__name__} acts on the input: add it once to x before the "
                "first block (TransformerEncoder / TransformerDecoder do), not in every block"
            )
        a = self.self_attn(
            self._pre(x, self.attn_norm),
            mask=self.self_attention_mask(mask),
            bias=bias,
            positional=positional,
            need_weights=need_weights,
            cache=cache.self_attn if cache is not None else None,
        )
        x = self._residual(x, a.out, self.attn_norm)
        cross_weights = None
        if self.cross_attn is not None:
            c = self.cross_attn(
                self._pre(x, self.cross_norm),
                context,
                mask=context_mask,
                need_weights=need_weights,
                cache=cache.cross_attn if cache is not None else None,
            )
            x = self._residual(x, c.out, self.cross_norm)
            cross_weights = c.weights
        x = self._residual(x, self.ff(self._pre(x, self.ff_norm)), self.ff_norm)
        return BlockOutput(x, a.weights, cross_weights)

    def _pre(self, x: Tensor, norm: nn.Module) -> Tensor:
        return norm(x) if self.norm_first else x

    def _residual(self, x: Tensor, y: Tensor, norm: nn.Module) -> Tensor:
        x = x + self.drop(y)
        return x if self.norm_first else norm(x)

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}, causal={self.causal}"


def _own_copy(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with a kernel module copied, so that attention layers never share one."""
    kernel = options.get("kernel")
    if isinstance(kernel, nn.Module):
        return {**options, "kernel": copy.deepcopy(kernel)}
    return dict(options)


def _check_input(x: Tensor, dim: int, name: str = "x") -> None:
    if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != dim:
        got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{name}: expected shape (batch, seq, {dim}), got {got}")


def _check_positional(positional: PositionalEncoding | None) -> None:
    if positional is not None and not isinstance(positional, PositionalEncoding):
        raise TypeError(
            "positional must be an attnlab.positional PositionalEncoding, got "
            f"{type(positional).__name__}"
        )
