r"""timm's ViT ``Attention`` and ``Block`` as attnlab modules.

The converters read the modules (``timm.layers.Attention``,
``timm.models.vision_transformer.Block``), not a checkpoint file; ``timm`` is never imported
here (classes are recognised by name and checked by layout). Call them through
``MultiHeadAttention.from_timm`` / ``TransformerBlock.from_timm`` or :mod:`attnlab.convert`;
the functions here take the class to build as their first argument.

Masks: timm's ``attn_mask`` follows SDPA: a boolean mask means True = attend, as here.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from ..attention_config import AttentionConfig
from ..blocks.feedforward import FeedForward
from ._shared import (
    Module,
    activation,
    any_bias,
    copy_linear,
    expect_class,
    layer_norm_type,
    linear,
    new_attention,
)

__all__ = ["convert_attention", "convert_block"]


def convert_attention(
    cls: type[Module], attn: nn.Module, *, attention: AttentionConfig | None = None
) -> Module:
    r"""A ``cls`` (:class:`~attnlab.MultiHeadAttention`) with the weights of a timm ViT
    ``Attention``.

    timm fuses the three input projections into ``qkv`` (``dim -> 3 dim``, rows
    ``[queries; keys; values]``): its first ``dim`` rows become ``q_proj``, the other ``2 dim``
    ``kv_proj``; ``proj`` becomes ``out_proj``. Biases follow timm's flags: ``qkv_bias``
    (timm's default False) is the layer's ``qkv_bias``, ``proj_bias`` (default True) its
    ``out_bias``. The layer equals ``attn(x, attn_mask=mask)`` in eval mode for the same
    boolean mask (timm follows SDPA: True = may attend). timm's ``proj_drop`` after the output
    projection is not part of :class:`~attnlab.MultiHeadAttention`; :func:`convert_block`
    puts it on the block's residual branch.

    Args:
        cls: the layer class to build (``MultiHeadAttention`` or a subclass).
        attn: ``timm.layers.Attention`` (``timm.models.vision_transformer.Attention``).
        attention: attnlab's attention settings (default ``AttentionConfig()``). With an
            efficient ``kernel`` the source's attention dropout is dropped.

    Returns:
        The layer, on ``attn``'s device and dtype and in its train / eval mode.

    Raises:
        TypeError: ``attn`` is not timm's ``Attention``.
        ValueError: what :class:`~attnlab.MultiHeadAttention` cannot express: ``qk_norm``,
            ``scale_norm``, ``gated``, an attention width or output width other than ``dim``.
    """
    where = "from_timm"
    expect_class(attn, "Attention", "timm.layers.Attention", where)
    qkv, proj = linear(attn, "qkv", where), linear(attn, "proj", where)
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
    layer = new_attention(
        cls, dim, heads, qkv_bias=any_bias(qkv), out_bias=any_bias(proj), context_dim=dim,
        dropout=attn.attn_drop.p, attention=attention, like=qkv.weight,
    )  # fmt: skip
    with torch.no_grad():
        bias = qkv.bias
        copy_linear(layer.q_proj, qkv.weight[:dim], None if bias is None else bias[:dim])
        copy_linear(layer.kv_proj, qkv.weight[dim:], None if bias is None else bias[dim:])
        copy_linear(layer.out_proj, proj.weight, proj.bias)
    return layer.train(attn.training)


def convert_block(
    cls: type[Module],
    block: nn.Module,
    *,
    attention_cls: type[nn.Module],
    causal: bool = False,
    attention: AttentionConfig | None = None,
) -> Module:
    r"""A pre-norm ``cls`` (:class:`~attnlab.blocks.TransformerBlock`) with the weights of a
    timm ViT ``Block``.

    timm's ``Block`` is pre-norm, ``x = x + ls1(attn(norm1(x)))``,
    ``x = x + ls2(mlp(norm2(x)))``, which is ``TransformerBlock(norm_first=True)``. The mapping:

    * ``norm1`` -> ``attn_norm``, ``attn`` -> ``self_attn`` (:func:`convert_attention`);
    * ``norm2`` -> ``ff_norm``, ``mlp.fc1`` / ``mlp.act`` / ``mlp.fc2`` -> ``ff.fc1`` /
      ``ff.act`` / ``ff.fc2``;
    * LayerScale (``init_values``): ``ls1`` / ``ls2`` multiply each branch's output by a
      per-channel ``gamma``; it is folded into ``self_attn.out_proj`` and ``ff.fc2`` (rows
      and biases scaled by ``gamma``): the same function, though training then updates the
      product rather than ``gamma`` alone.

    The ``LayerNorm`` epsilon (timm: ``1e-6``) is kept through ``norm_layer`` and the
    activation module is copied (timm's ``GELU`` / ``GELUTanh`` become ``nn.GELU``).
    Dropouts: ``attn_drop`` is the attention dropout, ``mlp.drop1`` the feed-forward's hidden
    dropout and ``proj_drop`` (``attn.proj_drop`` = ``mlp.drop2``) the residual dropout. An
    ``Mlp`` bias on one linear map but not the other becomes a zero bias on the other.

    Masks: timm's ``attn_mask`` is SDPA's, boolean True = may attend, as here;
    ``block(x, is_causal=True)`` is ``convert_block(..., causal=True)``.

    Args:
        cls: the block class to build (``TransformerBlock`` or a subclass).
        block: ``timm.models.vision_transformer.Block``.
        attention_cls: the class of the block's attention layer (``MultiHeadAttention``).
        causal: causal self-attention (timm passes ``is_causal`` per call).
        attention: attnlab's attention settings (default ``AttentionConfig()``).

    Returns:
        The block, on ``block``'s device and dtype and in its train / eval mode.

    Raises:
        TypeError: ``block`` is not timm's ``Block`` or its ``mlp`` not timm's ``Mlp``.
        ValueError: what the block cannot express: stochastic depth (``drop_path > 0``; build
            the timm model with ``drop_path_rate=0``, which changes nothing in eval mode), an
            ``Mlp`` with a norm, norms other than ``nn.LayerNorm``, different output dropouts
            after the attention and the ``Mlp``, and what :func:`convert_attention` refuses.
    """
    where = "from_timm"
    expect_class(block, "Block", "timm.models.vision_transformer.Block", where)
    mlp = block.mlp
    expect_class(mlp, "Mlp", "timm.layers.Mlp", where)
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
    fc1, fc2 = linear(mlp, "fc1", where), linear(mlp, "fc2", where)
    norm_layer = layer_norm_type({"norm1": block.norm1, "norm2": block.norm2}, where)
    attn = block.attn
    residual_drop = {attn.proj_drop.p, mlp.drop2.p}
    if len(residual_drop) != 1:
        raise ValueError(
            f"{where}: attn.proj_drop ({attn.proj_drop.p}) and mlp.drop2 ({mlp.drop2.p}) "
            "differ; TransformerBlock has one residual dropout"
        )
    self_attn = convert_attention(attention_cls, attn, attention=attention)
    out = cls(
        fc1.in_features, attn.num_heads, ff_hidden=fc1.out_features,
        dropout=residual_drop.pop(), norm_first=True, norm_layer=norm_layer, causal=causal,
        attention=attention,
        ff_layer=partial(FeedForward, dropout=mlp.drop1.p, bias=any_bias(fc1, fc2)),
    )  # fmt: skip
    out.to(device=fc1.weight.device, dtype=fc1.weight.dtype)
    out.self_attn = self_attn
    out.ff.act = activation(mlp.act, where)
    out.attn_norm.load_state_dict(block.norm1.state_dict())
    out.ff_norm.load_state_dict(block.norm2.state_dict())
    with torch.no_grad():
        copy_linear(out.ff.fc1, fc1.weight, fc1.bias)
        copy_linear(out.ff.fc2, fc2.weight, fc2.bias)
        for ls, target in ((block.ls1, out.self_attn.out_proj), (block.ls2, out.ff.fc2)):
            gamma = getattr(ls, "gamma", None)
            if gamma is None:
                if not isinstance(ls, nn.Identity):
                    raise ValueError(f"{where}: unknown layer scale {type(ls).__name__}")
                continue
            # gamma * (W x + c) = (diag(gamma) W) x + gamma * c
            target.weight.mul_(gamma[:, None])
            if target.bias is not None:
                target.bias.mul_(gamma)
    return out.train(block.training)
