r"""Converters: layers of other libraries, with their weights, as attnlab modules.

Users arrive with pretrained weights in other layouts. Each converter reads a *module* of the
other library (not a checkpoint file), so its shapes and options are known, and returns the
attnlab module that computes the same function (equal to float64 rounding in eval mode).
Porting lives here, above the layers it builds (they import nothing of it): one function per
source library, which looks at what it is given, and the specific functions behind them:

=============================  ======================================  ====================
source                         converter                               result
=============================  ======================================  ====================
``nn.MultiheadAttention``      :func:`from_torch`,                     MultiHeadAttention
                               :func:`attention_from_torch`
``nn.TransformerEncoderLayer``  :func:`from_torch`,                    TransformerBlock
/ ``...DecoderLayer``          :func:`block_from_torch`
HF ``BertAttention`` /         :func:`from_hf_bert`,                   MultiHeadAttention
``BertSelfAttention``          :func:`attention_from_hf_bert`
HF ``BertLayer``               :func:`from_hf_bert`,                   post-norm
                               :func:`block_from_hf_bert`              TransformerBlock
timm ViT ``Attention``         :func:`from_timm`,                      MultiHeadAttention
                               :func:`attention_from_timm`
timm ViT ``Block``             :func:`from_timm`,                      pre-norm
                               :func:`block_from_timm`                 TransformerBlock
HF ``attention_mask``          :func:`mask_from_hf`                    boolean mask,
                                                                       True = attend
=============================  ======================================  ====================

The BERT converters also take the modules of models with BERT's layout (RoBERTa, ELECTRA, ...).
Biases are per projection group: the layer's ``qkv_bias`` and ``out_bias`` follow the source
(timm's ``qkv_bias=False`` with a biased ``proj``, for instance); within a group a missing bias
becomes a zero bias (the same function). Neither ``transformers`` nor ``timm`` is imported
here: the converters read the modules' attributes, so this package imports without them (they
are the ``peers`` extra). Every converter takes ``cls=``, the class to build (a subclass
converts into itself).

Masks: Hugging Face layers take an *additive* float mask (0 = attend, a large negative number =
ignore), built from the user-facing ``attention_mask`` ``(b, j)`` of 1 = token / 0 = padding;
pass :func:`mask_from_hf` of either form as ``mask=``, or the additive mask itself as
``bias=``. timm's ``attn_mask`` follows SDPA: a boolean mask means True = attend, as here.

Legend: ``b`` batch, ``j`` key positions.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..attention import MultiHeadAttention
from ..attention_config import AttentionConfig
from ..blocks.block import TransformerBlock
from . import hf, timm
from .hf import mask_from_hf
from .torch import attention_from_torch, block_from_torch

__all__ = [
    "from_torch",
    "from_hf_bert",
    "from_timm",
    "attention_from_torch",
    "block_from_torch",
    "attention_from_hf_bert",
    "block_from_hf_bert",
    "attention_from_timm",
    "block_from_timm",
    "mask_from_hf",
    "hf",
    "timm",
]


def from_torch(module: nn.Module, **kwargs: Any) -> MultiHeadAttention | TransformerBlock:
    """PyTorch's ``nn.MultiheadAttention`` (:func:`attention_from_torch`) or
    ``nn.TransformerEncoderLayer`` / ``TransformerDecoderLayer`` (:func:`block_from_torch`)
    as attnlab's, with its weights; ``kwargs`` go to that converter."""
    if isinstance(module, nn.MultiheadAttention):
        return attention_from_torch(module, **kwargs)
    if isinstance(module, nn.TransformerEncoderLayer | nn.TransformerDecoderLayer):
        return block_from_torch(module, **kwargs)
    raise TypeError(
        "from_torch converts nn.MultiheadAttention, nn.TransformerEncoderLayer and "
        f"nn.TransformerDecoderLayer, got {type(module).__name__}"
    )


def from_hf_bert(module: nn.Module, **kwargs: Any) -> MultiHeadAttention | TransformerBlock:
    """A Hugging Face BERT layer (``BertLayer``: :func:`block_from_hf_bert`) or attention
    (``BertAttention``, ``BertSelfAttention``, ``BertCrossAttention``:
    :func:`attention_from_hf_bert`) as attnlab's; ``kwargs`` go to that converter."""
    if hasattr(module, "intermediate"):  # a layer: attention, then its feed-forward
        return block_from_hf_bert(module, **kwargs)
    return attention_from_hf_bert(module, **kwargs)


def from_timm(module: nn.Module, **kwargs: Any) -> MultiHeadAttention | TransformerBlock:
    """A timm ViT ``Block`` (:func:`block_from_timm`) or ``Attention``
    (:func:`attention_from_timm`) as attnlab's; ``kwargs`` go to that converter."""
    if hasattr(module, "mlp") and hasattr(module, "attn"):
        return block_from_timm(module, **kwargs)
    return attention_from_timm(module, **kwargs)


def attention_from_hf_bert(
    module: nn.Module,
    *,
    output: nn.Module | None = None,
    attention: AttentionConfig | None = None,
    cls: type[MultiHeadAttention] = MultiHeadAttention,
) -> MultiHeadAttention:
    """A :class:`MultiHeadAttention` with the weights of a Hugging Face BERT attention:
    ``BertAttention`` (the layer is its attention plus ``output.dense``; the residual and
    ``LayerNorm`` are the block's), ``BertSelfAttention`` (with ``output=`` its
    ``BertSelfOutput``, else an identity output projection) or ``BertCrossAttention`` (call
    with ``context``). ``attention`` sets the attention maths (default exact, as BERT). Equal in
    float64; masks: ``mask=mask_from_hf(attention_mask)``. Mapping and refusals:
    :func:`attnlab.convert.hf.convert_attention`."""
    return hf.convert_attention(cls, module, output=output, attention=attention)


def block_from_hf_bert(
    layer: nn.Module,
    *,
    causal: bool | None = None,
    attention: AttentionConfig | None = None,
    cls: type[TransformerBlock] = TransformerBlock,
) -> TransformerBlock:
    """A post-norm :class:`TransformerBlock` with the weights of a Hugging Face ``BertLayer``
    (or a layer of its layout: RoBERTa, ELECTRA, ...; a decoder's cross-attention too).
    ``causal`` defaults to ``layer.is_decoder``. Mapping, masks and refusals:
    :func:`attnlab.convert.hf.convert_layer`."""
    return hf.convert_layer(
        cls, layer, attention_cls=MultiHeadAttention, causal=causal, attention=attention
    )


def attention_from_timm(
    attn: nn.Module,
    *,
    attention: AttentionConfig | None = None,
    cls: type[MultiHeadAttention] = MultiHeadAttention,
) -> MultiHeadAttention:
    """A :class:`MultiHeadAttention` with the weights of a timm ViT ``Attention`` (fused
    ``qkv`` split into ``q_proj`` / ``kv_proj``, ``proj`` as ``out_proj``; ``qkv_bias`` /
    ``proj_bias`` kept). Equal in float64 for the same boolean mask (timm's, like SDPA's, is
    True = attend). Mapping and refusals: :func:`attnlab.convert.timm.convert_attention`."""
    return timm.convert_attention(cls, attn, attention=attention)


def block_from_timm(
    block: nn.Module,
    *,
    causal: bool = False,
    attention: AttentionConfig | None = None,
    cls: type[TransformerBlock] = TransformerBlock,
) -> TransformerBlock:
    """A pre-norm :class:`TransformerBlock` with the weights of a timm ViT ``Block``
    (LayerScale folded into the output projections). Mapping, masks and refusals:
    :func:`attnlab.convert.timm.convert_block`."""
    return timm.convert_block(
        cls, block, attention_cls=MultiHeadAttention, causal=causal, attention=attention
    )
