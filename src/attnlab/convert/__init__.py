r"""Converters: layers of other libraries, with their weights, as attnlab modules.

Users arrive with pretrained weights in other layouts. Each converter reads a *module* of the
other library (not a checkpoint file), so its shapes and options are known, and returns the
attnlab module that computes the same function (equal to float64 rounding in eval mode). The
classmethods next to ``from_torch`` and the functions here are the same converters:

=============================  ===========================================  ==================
source                         converter                                    result
=============================  ===========================================  ==================
HF ``BertAttention`` /         ``MultiHeadAttention.from_hf_bert``,         MultiHeadAttention
``BertSelfAttention``          :func:`attention_from_hf_bert`
HF ``BertLayer``               ``TransformerBlock.from_hf_bert``,           post-norm
                               :func:`block_from_hf_bert`                   TransformerBlock
timm ViT ``Attention``         ``MultiHeadAttention.from_timm``,            MultiHeadAttention
                               :func:`attention_from_timm`
timm ViT ``Block``             ``TransformerBlock.from_timm``,              pre-norm
                               :func:`block_from_timm`                      TransformerBlock
HF ``attention_mask``          :func:`mask_from_hf`                         boolean mask,
                                                                            True = attend
=============================  ===========================================  ==================

The BERT converters also take the modules of models with BERT's layout (RoBERTa, ELECTRA, ...).
Biases are per projection group: the layer's ``qkv_bias`` and ``out_bias`` follow the source
(timm's ``qkv_bias=False`` with a biased ``proj``, for instance); within a group a missing bias
becomes a zero bias (the same function). Neither ``transformers`` nor ``timm`` is imported
here: the converters read the modules' attributes, so this package imports without them (they
are the ``peers`` extra).

The work is done in :mod:`attnlab.convert.hf` and :mod:`attnlab.convert.timm`, whose functions
take the class to build (the classmethods pass their own ``cls``, so a subclass converts into
itself); they import neither the layer nor the block module, so the classmethods can import
them without an import cycle.

Masks: Hugging Face layers take an *additive* float mask (0 = attend, a large negative number =
ignore), built from the user-facing ``attention_mask`` ``(b, j)`` of 1 = token / 0 = padding;
pass :func:`mask_from_hf` of either form as ``mask=``, or the additive mask itself as
``bias=``. timm's ``attn_mask`` follows SDPA: a boolean mask means True = attend, as here.

Legend: ``b`` batch, ``j`` key positions.
"""

from __future__ import annotations

from torch import nn

from ..attention import MultiHeadAttention
from ..attention_config import AttentionConfig
from ..blocks.block import TransformerBlock
from . import hf, timm
from .hf import mask_from_hf

__all__ = [
    "attention_from_hf_bert",
    "block_from_hf_bert",
    "attention_from_timm",
    "block_from_timm",
    "mask_from_hf",
    "hf",
    "timm",
]


def attention_from_hf_bert(
    module: nn.Module,
    *,
    output: nn.Module | None = None,
    attention: AttentionConfig | None = None,
) -> MultiHeadAttention:
    """A :class:`MultiHeadAttention` with the weights of a Hugging Face BERT attention
    (``BertAttention``, ``BertSelfAttention``, ``BertCrossAttention``); the same as
    ``MultiHeadAttention.from_hf_bert``. Mapping, masks and refusals:
    :func:`attnlab.convert.hf.convert_attention`."""
    return hf.convert_attention(MultiHeadAttention, module, output=output, attention=attention)


def block_from_hf_bert(
    layer: nn.Module,
    *,
    causal: bool | None = None,
    attention: AttentionConfig | None = None,
) -> TransformerBlock:
    """A post-norm :class:`TransformerBlock` with the weights of a Hugging Face ``BertLayer``;
    the same as ``TransformerBlock.from_hf_bert``. Mapping, masks and refusals:
    :func:`attnlab.convert.hf.convert_layer`."""
    return hf.convert_layer(
        TransformerBlock, layer, attention_cls=MultiHeadAttention, causal=causal,
        attention=attention,
    )  # fmt: skip


def attention_from_timm(
    attn: nn.Module, *, attention: AttentionConfig | None = None
) -> MultiHeadAttention:
    """A :class:`MultiHeadAttention` with the weights of a timm ViT ``Attention``; the same as
    ``MultiHeadAttention.from_timm``. Mapping, masks and refusals:
    :func:`attnlab.convert.timm.convert_attention`."""
    return timm.convert_attention(MultiHeadAttention, attn, attention=attention)


def block_from_timm(
    block: nn.Module,
    *,
    causal: bool = False,
    attention: AttentionConfig | None = None,
) -> TransformerBlock:
    """A pre-norm :class:`TransformerBlock` with the weights of a timm ViT ``Block``; the same
    as ``TransformerBlock.from_timm``. Mapping, masks and refusals:
    :func:`attnlab.convert.timm.convert_block`."""
    return timm.convert_block(
        TransformerBlock, block, attention_cls=MultiHeadAttention, causal=causal,
        attention=attention,
    )  # fmt: skip
