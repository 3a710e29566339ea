r"""Converters: layers of other libraries, with their weights, as attnlab modules.

Users arrive with pretrained weights in other layouts. Each converter reads a *module* of the
other library (not a checkpoint file), so its shapes and options are known, and returns the
attnlab module that computes the same function (equal to float64 rounding in eval mode):

=============================  ==================================  ============================
source                         converter                           result
=============================  ==================================  ============================
HF ``BertAttention`` /         :func:`attention_from_hf_bert`      :class:`MultiHeadAttention`
``BertSelfAttention``
HF ``BertLayer``               :func:`block_from_hf_bert`          post-norm
                                                                   :class:`TransformerBlock`
timm ViT ``Attention``         :func:`attention_from_timm`         :class:`MultiHeadAttention`
timm ViT ``Block``             :func:`block_from_timm`             pre-norm
                                                                   :class:`TransformerBlock`
HF ``attention_mask``          :func:`mask_from_hf`                boolean mask, True = attend
=============================  ==================================  ============================

The BERT converters also take the modules of models with BERT's layout (RoBERTa, ELECTRA, ...).
Neither ``transformers`` nor ``timm`` is imported here: the converters read the modules'
attributes, so this module imports without them (they are the ``peers`` extra).

Masks: Hugging Face layers take an *additive* float mask (0 = attend, a large negative number =
ignore, shape ``(b, 1, 1, j)`` for padding), built from the user-facing ``attention_mask``
``(b, j)`` of 1 = token / 0 = padding. attnlab takes a boolean mask, True = may attend
(:func:`mask_from_hf` converts either form), or the additive mask itself as
``MultiHeadAttention(..., bias=extended_mask)``. timm's ``attn_mask`` follows SDPA: a boolean
mask means True = attend, as here.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .attention_config import AttentionConfig
from .blocks import FeedForward, TransformerBlock

__all__ = [
    "attention_from_hf_bert",
    "block_from_hf_bert",
    "attention_from_timm",
    "block_from_timm",
    "mask_from_hf",
]

# Activations of transformers / timm with an exact torch module equivalent, by class name (the
# libraries are not imported here). Any other activation *module* is copied as it is.
_GELU_TANH = partial(nn.GELU, approximate="tanh")
_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "GELUActivation": nn.GELU,  # transformers "gelu" (erf)
    "GELU": nn.GELU,  # timm.layers.GELU (erf)
    "GELUTanh": _GELU_TANH,  # transformers "gelu_pytorch_tanh", timm's GELUTanh
    "PytorchGELUTanh": _GELU_TANH,  # its older transformers name
    "NewGELUActivation": _GELU_TANH,  # transformers "gelu_new": the tanh formula, spelt out
    "SiLUActivation": nn.SiLU,  # transformers "silu"
    "Swish": nn.SiLU,  # timm.layers.Swish
}


# ---- Hugging Face BERT ----------------------------------------------------------------------
def attention_from_hf_bert(
    module: nn.Module,
    *,
    output: nn.Module | None = None,
    attention: AttentionConfig | None = None,
) -> MultiHeadAttention:
    r"""A :class:`MultiHeadAttention` with the weights of a Hugging Face BERT attention.

    ``query`` becomes ``q_proj``, ``[key; value]`` becomes ``kv_proj`` and the output
    ``dense`` becomes ``out_proj``. What is converted:

    * a ``BertAttention`` (``module.self`` and ``module.output``): the layer computes
      ``module.output.dense(module.self(x)[0])``. ``BertSelfOutput``'s dropout, residual sum
      and ``LayerNorm`` belong to the block (:func:`block_from_hf_bert`), so
      ``BertAttention(x) == module.output.LayerNorm(x + layer(x).out)`` in eval mode;
    * a ``BertSelfAttention``: with ``output`` (a ``BertSelfOutput`` or its ``dense``
      ``nn.Linear``) as above; without, ``out_proj`` is the identity (zero bias), so the layer
      equals ``module(x)[0]``, the concatenated heads;
    * a cross-attention (``BertCrossAttention``, whose keys and values read
      ``encoder_hidden_states``): call the layer as ``layer(x, context)``.

    Masks: pass ``mask=mask_from_hf(attention_mask)`` (boolean, True = may attend), or HF's
    additive extended mask itself as ``bias=``. A decoder's causality is a mask too:
    ``mask=masks.causal()``.

    Args:
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
        ValueError: what :class:`MultiHeadAttention` cannot express: relative position
            embeddings, a score scale other than ``head_dim ** -0.5``, an attention width other
            than the hidden width, or biases on some projections but not all.
    """
    if hasattr(module, "self") and hasattr(module, "output"):  # BertAttention
        if output is not None:
            raise ValueError(
                "output: a BertAttention brings its own output projection (module.output); "
                "pass output= only with a bare BertSelfAttention"
            )
        sa, out = module.self, _hf_dense(module.output, "module.output")
    else:
        sa, out = module, (None if output is None else _hf_dense(output, "output"))
    where = "attention_from_hf_bert"
    q, k, v = (_linear(sa, name, where) for name in ("query", "key", "value"))
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
    linears = {"query": q, "key": k, "value": v}
    if out is not None:
        linears["output dense"] = out
    bias = _one_bias_flag(linears, where)
    dropout = sa.dropout.p if isinstance(getattr(sa, "dropout", None), nn.Dropout) else 0.0
    layer = _attention(
        dim, heads, bias=bias, context_dim=k.in_features, dropout=dropout,
        attention=attention, like=q.weight,
    )  # fmt: skip
    with torch.no_grad():
        _copy_linear(layer.q_proj, q.weight, q.bias)
        kv_bias = None if k.bias is None else torch.cat([k.bias, v.bias])
        _copy_linear(layer.kv_proj, torch.cat([k.weight, v.weight]), kv_bias)
        if out is None:  # identity: the layer returns the concatenated heads, as the module
            layer.out_proj.weight.copy_(torch.eye(dim))
            if bias:
                layer.out_proj.bias.zero_()
        else:
            _copy_linear(layer.out_proj, out.weight, out.bias)
    return layer.train(sa.training)


def block_from_hf_bert(
    layer: nn.Module,
    *,
    causal: bool | None = None,
    attention: AttentionConfig | None = None,
) -> TransformerBlock:
    r"""A post-norm :class:`TransformerBlock` with the weights of a Hugging Face ``BertLayer``.

    BERT's layer is post-norm (Vaswani et al. 2017),
    ``x = LN(x + Drop(Attn(x)))``, ``x = LN(x + Drop(FF(x)))``, which is
    ``TransformerBlock(norm_first=False)``. The mapping:

    * ``attention`` -> ``self_attn`` (:func:`attention_from_hf_bert`),
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
    ``attention_dropout``.

    Masks: HF's ``BertLayer`` takes the additive extended mask ``(b, 1, 1, j)``; pass
    ``mask=mask_from_hf(attention_mask)`` here.

    Args:
        layer: the ``BertLayer`` (or a layer of the same layout).
        causal: causal self-attention. Default: ``layer.is_decoder``; in Hugging Face the
            decoder's causal mask is built by the model (``BertModel``) and handed to every
            layer, in attnlab it is the block's option.
        attention: attnlab's attention settings for every attention layer of the block
            (default ``AttentionConfig()``).

    Returns:
        The block, on ``layer``'s device and dtype and in its train / eval mode.

    Raises:
        TypeError: ``layer`` does not have ``BertLayer``'s layout.
        ValueError: what the block cannot express (see :func:`attention_from_hf_bert`; also
            norms other than ``nn.LayerNorm`` or with different settings, and feed-forward
            biases on one linear map but not the other).
    """
    where = "block_from_hf_bert"
    for name in ("attention", "intermediate", "output"):
        if not isinstance(getattr(layer, name, None), nn.Module):
            raise TypeError(
                f"{where}: expected a BertLayer (attention, intermediate, output), got "
                f"{type(layer).__name__} without {name!r}"
            )
    cross = getattr(layer, "crossattention", None)
    fc1 = _linear(layer.intermediate, "dense", where)
    fc2 = _linear(layer.output, "dense", where)
    ff_bias = _one_bias_flag({"intermediate.dense": fc1, "output.dense": fc2}, where)
    theirs = {
        "attn_norm": getattr(layer.attention.output, "LayerNorm", None),
        "ff_norm": getattr(layer.output, "LayerNorm", None),
    }
    if cross is not None:
        theirs["cross_norm"] = getattr(cross.output, "LayerNorm", None)
    norm_layer = _layer_norm_type(theirs, where)
    drops = {layer.attention.output.dropout.p, layer.output.dropout.p}
    if cross is not None:
        drops.add(cross.output.dropout.p)
    if len(drops) != 1:
        raise ValueError(
            f"{where}: the residual dropouts differ ({sorted(drops)}); TransformerBlock has one"
        )
    # The attention first: its checks name what is wrong with it before the block is built.
    self_attn = attention_from_hf_bert(layer.attention, attention=attention)
    cross_attn = None if cross is None else attention_from_hf_bert(cross, attention=attention)
    block = TransformerBlock(
        self_attn.dim, self_attn.heads, ff_hidden=fc1.out_features,
        dropout=drops.pop(), norm_first=False, norm_layer=norm_layer,
        cross_attention=cross is not None,
        context_dim=None if cross_attn is None else _context_dim(cross_attn),
        causal=bool(getattr(layer, "is_decoder", False)) if causal is None else causal,
        attention=attention, ff_layer=partial(FeedForward, dropout=0.0, bias=ff_bias),
    )  # fmt: skip
    # Cast first, copy after: copying into default-dtype (float32) parameters would round
    # float64 weights.
    block.to(device=fc1.weight.device, dtype=fc1.weight.dtype)
    block.self_attn = self_attn
    if cross_attn is not None:
        block.cross_attn = cross_attn
    block.ff.act = _activation(layer.intermediate.intermediate_act_fn, where)
    block.ff.fc1.load_state_dict(fc1.state_dict())
    block.ff.fc2.load_state_dict(fc2.state_dict())
    for ours, norm in theirs.items():
        getattr(block, ours).load_state_dict(norm.state_dict())
    return block.train(layer.training)


# ---- timm ViT -------------------------------------------------------------------------------
def attention_from_timm(
    attn: nn.Module, *, attention: AttentionConfig | None = None
) -> MultiHeadAttention:
    r"""A :class:`MultiHeadAttention` with the weights of a timm ViT ``Attention``.

    timm fuses the three input projections into ``qkv`` (``dim -> 3 dim``, rows
    ``[queries; keys; values]``): its first ``dim`` rows become ``q_proj``, the other ``2 dim``
    ``kv_proj``; ``proj`` becomes ``out_proj``. The layer equals ``attn(x, attn_mask=mask)`` in
    eval mode for the same boolean mask (timm follows SDPA: True = may attend). timm's
    ``proj_drop`` after the output projection is not part of :class:`MultiHeadAttention`;
    :func:`block_from_timm` puts it on the block's residual branch.

    Args:
        attn: ``timm.layers.Attention`` (``timm.models.vision_transformer.Attention``).
        attention: attnlab's attention settings (default ``AttentionConfig()``). With an
            efficient ``kernel`` the source's attention dropout is dropped.

    Returns:
        The layer, on ``attn``'s device and dtype and in its train / eval mode.

    Raises:
        TypeError: ``attn`` is not timm's ``Attention``.
        ValueError: what :class:`MultiHeadAttention` cannot express: ``qk_norm``,
            ``scale_norm``, ``gated``, an attention width or output width other than ``dim``,
            or ``qkv_bias=False`` with a biased ``proj`` (timm's default): the layer has one
            ``bias`` flag for all its projections.
    """
    where = "attention_from_timm"
    _expect_class(attn, "Attention", "timm.layers.Attention", where)
    qkv, proj = _linear(attn, "qkv", where), _linear(attn, "proj", where)
    for name, option in (("q_norm", "qk_norm"), ("k_norm", "qk_norm"), ("norm", "scale_norm")):
        if not isinstance(getattr(attn, name, None), nn.Identity | None):
            raise ValueError(
                f"{where}: {option}=True ({name} is {type(getattr(attn, name)).__name__}) is not "
                "supported; MultiHeadAttention does not normalise queries, keys or head outputs"
            )
    if getattr(attn, "gate", None) is not None:
        raise ValueError(f"{where}: gated=True (a sigmoid gate on the heads) is not supported")
    dim = qkv.in_features
    if qkv.out_features != 3 * dim or proj.in_features != dim or proj.out_features != dim:
        raise ValueError(
            f"{where}: qkv maps {dim} -> {qkv.out_features} and proj {proj.in_features} -> "
            f"{proj.out_features}; expected {dim} -> {3 * dim} and {dim} -> {dim} (attn_head_dim "
            "and dim_out must leave the attention width equal to dim)"
        )
    heads = attn.num_heads
    scale = getattr(attn, "scale", None)
    if scale is not None and abs(scale - (dim // heads) ** -0.5) > 1e-12 * scale:
        raise ValueError(
            f"{where}: attn.scale={scale} is not head_dim ** -0.5 = {(dim // heads) ** -0.5}"
        )
    bias = _one_bias_flag({"qkv": qkv, "proj": proj}, where)
    layer = _attention(
        dim, heads, bias=bias, context_dim=dim, dropout=attn.attn_drop.p,
        attention=attention, like=qkv.weight,
    )  # fmt: skip
    with torch.no_grad():
        _copy_linear(layer.q_proj, qkv.weight[:dim], None if qkv.bias is None else qkv.bias[:dim])
        kv_bias = None if qkv.bias is None else qkv.bias[dim:]
        _copy_linear(layer.kv_proj, qkv.weight[dim:], kv_bias)
        _copy_linear(layer.out_proj, proj.weight, proj.bias)
    return layer.train(attn.training)


def block_from_timm(
    block: nn.Module,
    *,
    causal: bool = False,
    attention: AttentionConfig | None = None,
) -> TransformerBlock:
    r"""A pre-norm :class:`TransformerBlock` with the weights of a timm ViT ``Block``.

    timm's ``Block`` is pre-norm, ``x = x + ls1(attn(norm1(x)))``,
    ``x = x + ls2(mlp(norm2(x)))``, which is ``TransformerBlock(norm_first=True)``. The mapping:

    * ``norm1`` -> ``attn_norm``, ``attn`` -> ``self_attn`` (:func:`attention_from_timm`);
    * ``norm2`` -> ``ff_norm``, ``mlp.fc1`` / ``mlp.act`` / ``mlp.fc2`` -> ``ff.fc1`` /
      ``ff.act`` / ``ff.fc2``;
    * LayerScale (``init_values``): ``ls1`` / ``ls2`` multiply each branch's output by a
      per-channel ``gamma``; it is folded into ``self_attn.out_proj`` and ``ff.fc2`` (rows
      and biases scaled by ``gamma``): the same function, though training then updates the
      product rather than ``gamma`` alone.

    The ``LayerNorm`` epsilon (timm: ``1e-6``) is kept through ``norm_layer`` and the
    activation module is copied (timm's ``GELU`` / ``GELUTanh`` become ``nn.GELU``).
    Dropouts: ``attn_drop`` is the attention dropout, ``mlp.drop1`` the feed-forward's hidden
    dropout and ``proj_drop`` (``attn.proj_drop`` = ``mlp.drop2``) the residual dropout.

    Masks: timm's ``attn_mask`` is SDPA's, boolean True = may attend, as here;
    ``block(x, is_causal=True)`` is ``block_from_timm(block, causal=True)``.

    Args:
        block: ``timm.models.vision_transformer.Block``.
        causal: causal self-attention (timm passes ``is_causal`` per call).
        attention: attnlab's attention settings (default ``AttentionConfig()``).

    Returns:
        The block, on ``block``'s device and dtype and in its train / eval mode.

    Raises:
        TypeError: ``block`` is not timm's ``Block`` or its ``mlp`` not timm's ``Mlp``.
        ValueError: what the block cannot express: stochastic depth (``drop_path > 0``; build
            the timm model with ``drop_path_rate=0``, which changes nothing in eval mode), an
            ``Mlp`` with a norm or with biases on one linear map but not the other, norms other
            than ``nn.LayerNorm``, different output dropouts after the attention and the
            ``Mlp``, and what :func:`attention_from_timm` refuses.
    """
    where = "block_from_timm"
    _expect_class(block, "Block", "timm.models.vision_transformer.Block", where)
    mlp = block.mlp
    _expect_class(mlp, "Mlp", "timm.layers.Mlp", where)
    for name in ("drop_path1", "drop_path2"):
        p = getattr(getattr(block, name, None), "drop_prob", 0.0)
        if p:
            raise ValueError(
                f"{where}: {name} has drop_prob={p}; stochastic depth has no counterpart in "
                "TransformerBlock. Build the timm model with drop_path_rate=0 (the same "
                "function in eval mode) before converting"
            )
    if not isinstance(getattr(mlp, "norm", None), nn.Identity | None):
        raise ValueError(f"{where}: an Mlp with a norm (scale_mlp_norm=True) is not supported")
    fc1, fc2 = _linear(mlp, "fc1", where), _linear(mlp, "fc2", where)
    ff_bias = _one_bias_flag({"mlp.fc1": fc1, "mlp.fc2": fc2}, where)
    norm_layer = _layer_norm_type({"norm1": block.norm1, "norm2": block.norm2}, where)
    attn = block.attn
    residual_drop = {attn.proj_drop.p, mlp.drop2.p}
    if len(residual_drop) != 1:
        raise ValueError(
            f"{where}: attn.proj_drop ({attn.proj_drop.p}) and mlp.drop2 ({mlp.drop2.p}) "
            "differ; TransformerBlock has one residual dropout"
        )
    dim = fc1.in_features
    out = TransformerBlock(
        dim, attn.num_heads, ff_hidden=fc1.out_features, dropout=residual_drop.pop(),
        norm_first=True, norm_layer=norm_layer, causal=causal, attention=attention,
        ff_layer=partial(FeedForward, dropout=mlp.drop1.p, bias=ff_bias),
    )  # fmt: skip
    out.to(device=fc1.weight.device, dtype=fc1.weight.dtype)
    out.self_attn = attention_from_timm(attn, attention=attention)
    out.ff.act = _activation(mlp.act, where)
    out.ff.fc1.load_state_dict(fc1.state_dict())
    out.ff.fc2.load_state_dict(fc2.state_dict())
    out.attn_norm.load_state_dict(block.norm1.state_dict())
    out.ff_norm.load_state_dict(block.norm2.state_dict())
    with torch.no_grad():
        for ls, linear in ((block.ls1, out.self_attn.out_proj), (block.ls2, out.ff.fc2)):
            gamma = getattr(ls, "gamma", None)
            if gamma is None:
                if not isinstance(ls, nn.Identity):
                    raise ValueError(f"{where}: unknown layer scale {type(ls).__name__}")
                continue
            # gamma * (W x + c) = (diag(gamma) W) x + gamma * c
            linear.weight.mul_(gamma[:, None])
            if linear.bias is not None:
                linear.bias.mul_(gamma)
    return out.train(block.training)


# ---- masks ----------------------------------------------------------------------------------
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


# ---- helpers --------------------------------------------------------------------------------
def _attention(
    dim: int,
    heads: int,
    *,
    bias: bool,
    context_dim: int,
    dropout: float,
    attention: AttentionConfig | None,
    like: Tensor,
) -> MultiHeadAttention:
    """A fresh layer with ``attention``'s settings, cast to ``like``'s dtype and device before
    anything is copied in (copying into float32 first would round float64 weights)."""
    if attention is None:
        attention = AttentionConfig()
    if not isinstance(attention, AttentionConfig):
        raise TypeError(f"attention: expected an AttentionConfig, got {type(attention).__name__}")
    if attention.kernel is not None:
        dropout = 0.0  # efficient kernels form no attention weights to drop
    layer = MultiHeadAttention(
        dim, heads, dropout=dropout, bias=bias,
        context_dim=None if context_dim == dim else context_dim, **attention.layer_kwargs(),
    )  # fmt: skip
    return layer.to(device=like.device, dtype=like.dtype)


def _linear(owner: nn.Module, name: str, where: str) -> nn.Linear:
    linear = getattr(owner, name, None)
    if not isinstance(linear, nn.Linear):
        got = "missing" if linear is None else type(linear).__name__
        raise TypeError(
            f"{where}: expected {type(owner).__name__}.{name} to be an nn.Linear, got {got}"
        )
    return linear


def _hf_dense(output: nn.Module, name: str) -> nn.Linear:
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


def _one_bias_flag(linears: dict[str, nn.Linear], where: str) -> bool:
    """Whether all of ``linears`` have biases; a mix is refused, naming who has one."""
    with_bias = [name for name, lin in linears.items() if lin.bias is not None]
    if with_bias and len(with_bias) != len(linears):
        without = [name for name in linears if name not in with_bias]
        raise ValueError(
            f"{where}: biases on {', '.join(with_bias)} but not on {', '.join(without)} (e.g. "
            "bias-free q/k/v with a biased output projection); attnlab's layers have one bias "
            "flag for all their projections, so this mix cannot be loaded yet"
        )
    return bool(with_bias)


def _copy_linear(linear: nn.Linear, weight: Tensor, bias: Tensor | None) -> None:
    linear.weight.copy_(weight)
    if bias is not None:
        linear.bias.copy_(bias)


def _layer_norm_type(norms: dict[str, nn.Module], where: str) -> Callable[[int], nn.Module]:
    """``nn.LayerNorm`` with the (shared) settings of ``norms``, for ``norm_layer``."""
    settings = set()
    for name, norm in norms.items():
        if not isinstance(norm, nn.LayerNorm):
            raise ValueError(f"{where}: {name} is {type(norm).__name__}; expected nn.LayerNorm")
        settings.add((norm.eps, norm.elementwise_affine, norm.bias is not None))
    if len(settings) != 1:
        raise ValueError(
            f"{where}: the LayerNorms differ in (eps, elementwise_affine, bias): "
            f"{sorted(settings)}; the block builds all its norms alike"
        )
    eps, affine, bias = settings.pop()
    return partial(nn.LayerNorm, eps=eps, elementwise_affine=affine, bias=bias)


def _activation(act: object, where: str) -> nn.Module:
    """A torch module computing ``act``: the equal torch module where one is known, else a
    copy of the module (kept exact)."""
    if not isinstance(act, nn.Module):
        raise ValueError(
            f"{where}: the activation is a plain function ({act!r}); only nn.Module "
            "activations can be carried into FeedForward"
        )
    if type(act).__module__.startswith("torch.nn"):
        return copy.deepcopy(act)
    factory = _ACTIVATIONS.get(type(act).__name__)
    return factory() if factory is not None else copy.deepcopy(act)


def _context_dim(layer: MultiHeadAttention) -> int | None:
    return None if layer.context_dim == layer.dim else layer.context_dim


def _expect_class(module: object, name: str, full: str, where: str) -> None:
    # By name, not isinstance: timm is not imported here. Same-named classes of other origin
    # still have to pass the layout checks.
    if type(module).__name__ != name:
        raise TypeError(f"{where}: expected {full}, got {type(module).__name__}")
