"""PyTorch's own layers as attnlab's: ``nn.MultiheadAttention`` and
``nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer``, with their weights (outputs equal
for the same batch-first inputs).

Masks: torch's ``key_padding_mask`` and boolean ``attn_mask`` mean True = *ignore*; here True =
may attend, so pass ``~attn_mask`` or ``masks.padding(lengths)``. torch's layers take the
causal mask per call (``is_causal`` / ``tgt_mask``); a converted block takes ``causal=True``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..attention import MultiHeadAttention
from ..attention_config import AttentionConfig
from ..blocks.block import TransformerBlock
from ..blocks.feedforward import FeedForward

__all__ = ["attention_from_torch", "block_from_torch"]

#: torch's functional activations (``nn.Transformer*Layer.activation``) and their module classes
_TORCH_ACTIVATIONS: dict[Callable, type[nn.Module]] = {F.relu: nn.ReLU, F.gelu: nn.GELU}


def attention_from_torch(
    m: nn.MultiheadAttention, *, cls: type[MultiHeadAttention] = MultiHeadAttention, **kwargs: Any
) -> MultiHeadAttention:
    """A layer with the weights of ``torch.nn.MultiheadAttention`` ``m`` (any batch_first), in
    ``m``'s dtype and device and training mode (the same dropout behaviour).

    Args:
        m: the torch layer.
        cls: the class to build (a subclass of :class:`MultiHeadAttention`).
        **kwargs: further layer arguments (``backend=``, ``score=``, ...).

    Raises:
        ValueError: ``add_bias_kv``, ``add_zero_attn``, or ``kdim != vdim``.
    """
    if m.bias_k is not None or m.add_zero_attn:
        raise ValueError("from_torch: add_bias_kv and add_zero_attn are not supported")
    if m.kdim != m.vdim:
        raise ValueError(f"from_torch: kdim ({m.kdim}) must equal vdim ({m.vdim})")
    has_bias = m.in_proj_bias is not None
    layer = cls(
        m.embed_dim, m.num_heads, dropout=m.dropout, bias=has_bias,
        context_dim=None if m._qkv_same_embed_dim else m.kdim, **kwargs,
    )  # fmt: skip
    # Take m's dtype before copying: copied into float32 first, float64 weights would round.
    p = m.out_proj.weight
    layer = layer.to(device=p.device, dtype=p.dtype)
    e = m.embed_dim
    with torch.no_grad():
        if m._qkv_same_embed_dim:
            wq, wk, wv = m.in_proj_weight.split(e)
        else:
            wq, wk, wv = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
        layer.q_proj.weight.copy_(wq)
        layer.kv_proj.weight.copy_(torch.cat([wk, wv]))
        layer.out_proj.weight.copy_(m.out_proj.weight)
        if has_bias:
            bq, bkv = m.in_proj_bias.split([e, 2 * e])
            layer.q_proj.bias.copy_(bq)
            layer.kv_proj.bias.copy_(bkv)
            layer.out_proj.bias.copy_(m.out_proj.bias)
    return layer.train(m.training)


def block_from_torch(
    layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer,
    *,
    causal: bool = False,
    attention: AttentionConfig | None = None,
    cls: type[TransformerBlock] = TransformerBlock,
) -> TransformerBlock:
    """A block with the weights of a ``torch.nn.TransformerEncoderLayer`` or
    ``TransformerDecoderLayer`` (any ``batch_first``, ``norm_first``, relu / gelu).

    Args:
        layer: the torch layer.
        causal: causal self-attention.
        attention: the attention settings (e.g. ``AttentionConfig(backend="reference")``);
            the attention dropout comes from ``layer``.
        cls: the class to build (a subclass of :class:`TransformerBlock`).

    Raises:
        TypeError: another layer; ValueError: an activation or norm torch's layers allow but
            this block has not.
    """
    if not isinstance(layer, nn.TransformerEncoderLayer | nn.TransformerDecoderLayer):
        raise TypeError(
            "from_torch expects nn.TransformerEncoderLayer or nn.TransformerDecoderLayer, "
            f"got {type(layer).__name__}"
        )
    attention = attention or AttentionConfig()
    options = attention.layer_kwargs()
    decoder = isinstance(layer, nn.TransformerDecoderLayer)
    act = layer.activation
    if isinstance(act, nn.Module):
        activation = type(act)
    elif act in _TORCH_ACTIVATIONS:
        activation = _TORCH_ACTIVATIONS[act]
    else:
        raise ValueError(
            f"from_torch: activation {act!r} is not supported; use 'relu', 'gelu' or an "
            "nn.Module activation"
        )
    n1 = layer.norm1
    if not isinstance(n1, nn.LayerNorm):
        raise ValueError(f"from_torch: expected LayerNorm norms, got {type(n1).__name__}")
    fc1 = layer.linear1
    norm_layer = partial(
        nn.LayerNorm, eps=n1.eps, elementwise_affine=n1.elementwise_affine,
        bias=n1.bias is not None,
    )  # fmt: skip
    sa, ca = layer.self_attn, (layer.multihead_attn if decoder else None)
    context_dim = ca.kdim if ca is not None and ca.kdim != ca.embed_dim else None
    block = cls(
        sa.embed_dim, sa.num_heads, ff_hidden=fc1.out_features, dropout=layer.dropout.p,
        norm_first=layer.norm_first, norm_layer=norm_layer, cross_attention=decoder,
        context_dim=context_dim, causal=causal, attention=attention, attention_dropout=sa.dropout,
        ff_layer=partial(FeedForward, activation=activation, bias=fc1.bias is not None),
    )  # fmt: skip
    # Cast first, copy after: copying into default-dtype (float32) parameters would round
    # float64 weights.
    block.to(device=fc1.weight.device, dtype=fc1.weight.dtype)
    block.self_attn = attention_from_torch(sa, **options)
    norms = [(block.attn_norm, layer.norm1), (block.ff_norm, layer.norm2)]
    if decoder:
        block.cross_attn = attention_from_torch(ca, **options)
        norms = [(block.attn_norm, layer.norm1), (block.cross_norm, layer.norm2)]
        norms.append((block.ff_norm, layer.norm3))
    if isinstance(act, nn.Module):
        block.ff.act = copy.deepcopy(act)  # keeps its arguments (e.g. approximate="tanh")
    block.ff.fc1.load_state_dict(layer.linear1.state_dict())
    block.ff.fc2.load_state_dict(layer.linear2.state_dict())
    for ours, theirs in norms:
        ours.load_state_dict(theirs.state_dict())
    return block
