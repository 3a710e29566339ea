r"""Hugging Face BERT-style attention and layers as attnlab modules, and HF's attention masks.

The converters read a *module* (``BertAttention``, ``BertSelfAttention``, ``BertLayer``, or a
module of the same layout: RoBERTa, ELECTRA, ...), not a checkpoint file, so its shapes and
options are known; ``transformers`` is never imported here. Call them through
``MultiHeadAttention.from_hf_bert`` / ``TransformerBlock.from_hf_bert`` or
:mod:`attnlab.convert`; the functions here take the class to build as their first argument.

Masks: Hugging Face layers take an *additive* float mask (0 = attend, a large negative number =
ignore, shape ``(b, 1, 1, j)`` for padding), built from the user-facing ``attention_mask``
``(b, j)`` of 1 = token / 0 = padding. attnlab takes a boolean mask, True = may attend
(:func:`mask_from_hf` converts either form), or the additive mask itself as
``MultiHeadAttention(..., bias=extended_mask)``.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import Tensor, nn

from ..attention_config import AttentionConfig
from ..blocks.feedforward import FeedForward
from ._shared import (
    Module,
    activation,
    any_bias,
    context_dim,
    copy_linear,
    copy_linear_group,
    layer_norm_type,
    linear,
    new_attention,
)

__all__ = ["convert_attention", "convert_layer", "mask_from_hf"]


def convert_attention(
    cls: type[Module],
    module: nn.Module,
    *,
    output: nn.Module | None = None,
    attention: AttentionConfig | None = None,
) -> Module:
    r"""A ``cls`` (:class:`~attnlab.MultiHeadAttention`) with the weights of a Hugging Face BERT
    attention.

    ``query`` becomes ``q_proj``, ``[key; value]`` becomes ``kv_proj`` and the output
    ``dense`` becomes ``out_proj``. What is converted:

    * a ``BertAttention`` (``module.self`` and ``module.output``): the layer computes
      ``module.output.dense(module.self(x)[0])``. ``BertSelfOutput``'s dropout, residual sum
      and ``LayerNorm`` belong to the block (:func:`convert_layer`), so
      ``BertAttention(x) == module.output.LayerNorm(x + layer(x).out)`` in eval mode;
    * a ``BertSelfAttention``: with ``output`` (a ``BertSelfOutput`` or its ``dense``
      ``nn.Linear``) as above; without, ``out_proj`` is the identity (no bias), so the layer
      equals ``module(x)[0]``, the concatenated heads;
    * a cross-attention (``BertCrossAttention``, whose keys and values read
      ``encoder_hidden_states``): call the layer as ``layer(x, context)``.

    Biases: the layer's ``qkv_bias`` is set when any of ``query`` / ``key`` / ``value`` has a
    bias (a missing one becomes a zero bias: the same function, though training may then move
    it), ``out_bias`` when the output dense has one.

    Masks: pass ``mask=mask_from_hf(attention_mask)`` (boolean, True = may attend), or HF's
    additive extended mask itself as ``bias=``. A decoder's causality is a mask too:
    ``mask=masks.causal()``.

    Args:
        cls: the layer class to build (``MultiHeadAttention`` or a subclass).
        module: the BERT attention (``BertAttention``, ``BertSelfAttention`` or
            ``BertCrossAttention``, or a module of the same layout).
        output: the output projection of a bare self-attention module (see above).
        attention: attnlab's attention settings (default ``AttentionConfig()``, exact
            scaled-dot softmax as BERT). With an efficient ``kernel`` the source's attention
            dropout is dropped (such kernels form no attention weights to drop).

    Returns:
        The layer, on ``module``'s device and dtype and in its train / eval mode.

    Raises:
        TypeError: ``module`` or ``output`` does not have BERT's layout.
        ValueError: what the layer cannot express: relative position embeddings, a score scale
            other than ``head_dim ** -0.5``, an attention width other than the hidden width.
    """
    where = "from_hf_bert"
    if hasattr(module, "self") and hasattr(module, "output"):  # BertAttention
        if output is not None:
            raise ValueError(
                "output: a BertAttention brings its own output projection (module.output); "
                "pass output= only with a bare BertSelfAttention"
            )
        sa, out = module.self, _dense(module.output, "module.output")
    else:
        sa, out = module, (None if output is None else _dense(output, "output"))
    q, k, v = (linear(sa, name, where) for name in ("query", "key", "value"))
    heads = getattr(sa, "num_attention_heads", None)
    if not isinstance(heads, int):
        raise TypeError(
            f"{where}: expected a BERT attention module (query / key / value Linears and "
            f"num_attention_heads), got {type(sa).__name__}"
        )
    position = getattr(sa, "position_embedding_type", "absolute")
    if position != "absolute" or hasattr(sa, "distance_embedding"):
        raise ValueError(
            f"{where}: position_embedding_type={position!r} (learned relative distances inside "
            "the attention) is not supported; only BERT's 'absolute' positions, which are "
            "added to the embeddings outside the attention layers"
        )
    dim = q.in_features
    if q.out_features != dim or k.out_features != dim or v.out_features != dim:
        raise ValueError(
            f"{where}: query / key / value widths ({q.out_features}, {k.out_features}, "
            f"{v.out_features}) differ from the hidden width {dim}; MultiHeadAttention's "
            "attention width is its model width"
        )
    if v.in_features != k.in_features:
        raise ValueError(
            f"{where}: key reads width {k.in_features} but value reads {v.in_features}; "
            "they must read the same context"
        )
    if out is not None and (out.in_features != dim or out.out_features != dim):
        raise ValueError(
            f"{where}: the output dense maps {out.in_features} -> {out.out_features}, "
            f"expected {dim} -> {dim}"
        )
    scale = getattr(sa, "scaling", None)
    if scale is not None and abs(scale - (dim // heads) ** -0.5) > 1e-12 * scale:
        raise ValueError(
            f"{where}: the module scales scores by {scale}, not head_dim ** -0.5 = "
            f"{(dim // heads) ** -0.5}; MultiHeadAttention's scaled_dot score uses the latter"
        )
    dropout = sa.dropout.p if isinstance(getattr(sa, "dropout", None), nn.Dropout) else 0.0
    layer = new_attention(
        cls, dim, heads, qkv_bias=any_bias(q, k, v), out_bias=out is not None and any_bias(out),
        context_dim=k.in_features, dropout=dropout, attention=attention, like=q.weight,
    )  # fmt: skip
    with torch.no_grad():
        copy_linear_group(layer.q_proj, [q])
        copy_linear_group(layer.kv_proj, [k, v])
        if out is None:  # identity: the layer returns the concatenated heads, as the module
            copy_linear(layer.out_proj, torch.eye(dim), None)
        else:
            copy_linear(layer.out_proj, out.weight, out.bias)
    return layer.train(sa.training)


def convert_layer(
    cls: type[Module],
    layer: nn.Module,
    *,
    attention_cls: type[nn.Module],
    causal: bool | None = None,
    attention: AttentionConfig | None = None,
) -> Module:
    r"""A post-norm ``cls`` (:class:`~attnlab.blocks.TransformerBlock`) with the weights of a
    Hugging Face ``BertLayer``.

    BERT's layer is post-norm (Vaswani et al. 2017),
    ``x = LN(x + Drop(Attn(x)))``, ``x = LN(x + Drop(FF(x)))``, which is
    ``TransformerBlock(norm_first=False)``. The mapping:

    * ``attention`` -> ``self_attn`` (:func:`convert_attention`),
      ``attention.output.LayerNorm`` -> ``attn_norm``;
    * a decoder's ``crossattention`` -> ``cross_attn`` and ``cross_norm`` (call the block with
      ``context=encoder_hidden_states``);
    * ``intermediate.dense`` -> ``ff.fc1``, ``intermediate.intermediate_act_fn`` -> ``ff.act``,
      ``output.dense`` -> ``ff.fc2``, ``output.LayerNorm`` -> ``ff_norm``.

    The ``LayerNorm`` epsilon (BERT: ``1e-12``) is kept through ``norm_layer``; the activation
    (BERT: ``"gelu"``, the exact erf form) becomes the equal torch module (``nn.GELU()``;
    ``"gelu_new"`` / ``"gelu_pytorch_tanh"`` ``nn.GELU(approximate="tanh")``, ``"silu"``
    ``nn.SiLU()``), and any other activation module is copied as it is.
    ``hidden_dropout_prob`` is the block's residual ``dropout`` (BERT has no dropout inside
    the feed-forward, so ``ff.drop`` is 0) and ``attention_probs_dropout_prob`` its
    ``attention_dropout``. A feed-forward bias on one linear map but not the other becomes a
    zero bias on the other.

    Masks: HF's ``BertLayer`` takes the additive extended mask ``(b, 1, 1, j)``; pass
    ``mask=mask_from_hf(attention_mask)`` here.

    Args:
        cls: the block class to build (``TransformerBlock`` or a subclass).
        layer: the ``BertLayer`` (or a layer of the same layout).
        attention_cls: the class of the block's attention layers (``MultiHeadAttention``).
        causal: causal self-attention. Default: ``layer.is_decoder``; in Hugging Face the
            decoder's causal mask is built by the model (``BertModel``) and handed to every
            layer, in attnlab it is the block's option.
        attention: attnlab's attention settings for every attention layer of the block
            (default ``AttentionConfig()``).

    Returns:
        The block, on ``layer``'s device and dtype and in its train / eval mode.

    Raises:
        TypeError: ``layer`` does not have ``BertLayer``'s layout.
        ValueError: what the block cannot express (see :func:`convert_attention`; also norms
            other than ``nn.LayerNorm`` or with different settings, and different residual
            dropouts).
    """
    where = "from_hf_bert"
    for name in ("attention", "intermediate", "output"):
        if not isinstance(getattr(layer, name, None), nn.Module):
            raise TypeError(
                f"{where}: expected a BertLayer (attention, intermediate, output), got "
                f"{type(layer).__name__} without {name!r}"
            )
    cross = getattr(layer, "crossattention", None)
    fc1 = linear(layer.intermediate, "dense", where)
    fc2 = linear(layer.output, "dense", where)
    theirs = {
        "attn_norm": getattr(layer.attention.output, "LayerNorm", None),
        "ff_norm": getattr(layer.output, "LayerNorm", None),
    }
    if cross is not None:
        theirs["cross_norm"] = getattr(cross.output, "LayerNorm", None)
    norm_layer = layer_norm_type(theirs, where)
    drops = {layer.attention.output.dropout.p, layer.output.dropout.p}
    if cross is not None:
        drops.add(cross.output.dropout.p)
    if len(drops) != 1:
        raise ValueError(
            f"{where}: the residual dropouts differ ({sorted(drops)}); TransformerBlock has one"
        )
    # The attention first: its checks name what is wrong with it before the block is built.
    self_attn = convert_attention(attention_cls, layer.attention, attention=attention)
    cross_attn = None
    if cross is not None:
        cross_attn = convert_attention(attention_cls, cross, attention=attention)
    block = cls(
        self_attn.dim, self_attn.heads, ff_hidden=fc1.out_features,
        dropout=drops.pop(), norm_first=False, norm_layer=norm_layer,
        cross_attention=cross is not None,
        context_dim=None if cross_attn is None else context_dim(cross_attn),
        causal=bool(getattr(layer, "is_decoder", False)) if causal is None else causal,
        attention=attention, ff_layer=partial(FeedForward, dropout=0.0, bias=any_bias(fc1, fc2)),
    )  # fmt: skip
    # Cast first, copy after: copying into default-dtype (float32) parameters would round
    # float64 weights.
    block.to(device=fc1.weight.device, dtype=fc1.weight.dtype)
    block.self_attn = self_attn
    if cross_attn is not None:
        block.cross_attn = cross_attn
    block.ff.act = activation(layer.intermediate.intermediate_act_fn, where)
    with torch.no_grad():
        copy_linear(block.ff.fc1, fc1.weight, fc1.bias)
        copy_linear(block.ff.fc2, fc2.weight, fc2.bias)
    for ours, norm in theirs.items():
        getattr(block, ours).load_state_dict(norm.state_dict())
    return block.train(layer.training)


def mask_from_hf(attention_mask: Tensor) -> Tensor:
    r"""A Hugging Face attention mask as attnlab's boolean mask, True = may attend.

    Two forms are read:

    * the user-facing ``attention_mask`` ``(b, j)`` of 1 (token) / 0 (padding), integer,
      float or boolean, as tokenizers return it: the result is the key-padding mask ``(b, 1, 1, j)``;
    * an *extended* additive float mask ``(b, 1, i, j)`` or ``(b, 1, 1, j)`` (what
      ``BertLayer`` receives): 0 = attend, a large negative number (``finfo.min`` or
      ``-inf``) = ignore; the result has the same shape. A 4-D *boolean* mask (what
      transformers hands SDPA / flex layers) already means True = attend and is returned as
      it is.

    Args:
        attention_mask: the mask, in either form.

    Returns:
        A boolean tensor ``(b, 1, 1, j)`` or ``(b, 1, i, j)``.

    Raises:
        ValueError: another shape; ``(b, j)`` values other than 0 / 1; additive values neither 0
            nor large negative (a real score bias: pass it as ``bias=`` instead).
    """
    if not isinstance(attention_mask, Tensor):
        raise TypeError(f"attention_mask: expected a tensor, got {type(attention_mask).__name__}")
    t = attention_mask
    if t.dim() == 2:
        if t.dtype != torch.bool and not ((t == 0) | (t == 1)).all():
            raise ValueError(
                "attention_mask: a (batch, seq) mask holds 1 (token) / 0 (padding); got other "
                "values"
            )
        return t.bool()[:, None, None, :]  # (b, 1, 1, j)
    if t.dim() == 4 and t.dtype == torch.bool:
        return t
    if t.dim() == 4 and t.is_floating_point():
        keep = t == 0
        # HF writes finfo(dtype).min; anything at or below half of it is "ignore" in any dtype.
        drop = t <= torch.finfo(t.dtype).min / 2
        if not (keep | drop).all():
            raise ValueError(
                "attention_mask: an additive mask holds 0 (attend) or a large negative number "
                "(ignore); this one holds other values (a score bias): pass it as bias= to "
                "MultiHeadAttention instead"
            )
        return keep
    raise ValueError(
        "attention_mask: expected HF's (batch, seq) 0/1 mask or its additive (batch, 1, i, j) "
        f"float form, got shape {tuple(t.shape)} and dtype {t.dtype}"
    )


def _dense(output: nn.Module, name: str) -> nn.Linear:
    """The output projection: an ``nn.Linear``, or a ``BertSelfOutput``'s ``dense``."""
    if isinstance(output, nn.Linear):
        return output
    dense = getattr(output, "dense", None)
    if not isinstance(dense, nn.Linear):
        raise TypeError(
            f"{name}: expected a BertSelfOutput (with a dense nn.Linear) or an nn.Linear, got "
            f"{type(output).__name__}"
        )
    return dense
