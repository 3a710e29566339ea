"""What the converters share: building a fresh attnlab layer in the source's dtype, reading the
source's ``nn.Linear`` maps and their biases, norms, activations and class names.

Nothing here imports :mod:`attnlab.attention` or :mod:`attnlab.blocks.block`: the converters
receive the class to build (``MultiHeadAttention.from_hf_bert`` passes ``cls``), so the
classmethods can import them without an import cycle.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import torch
from torch import Tensor, nn

from ..attention_config import AttentionConfig

__all__ = [
    "Module",
    "new_attention",
    "linear",
    "any_bias",
    "copy_linear",
    "copy_linear_group",
    "layer_norm_type",
    "activation",
    "expect_class",
    "context_dim",
]

#: the attnlab class a converter builds (MultiHeadAttention, TransformerBlock or a subclass)
Module = TypeVar("Module", bound=nn.Module)

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


def new_attention(
    cls: type[Module],
    dim: int,
    heads: int,
    *,
    qkv_bias: bool,
    out_bias: bool,
    context_dim: int,
    dropout: float,
    attention: AttentionConfig | None,
    like: Tensor,
) -> Module:
    """A fresh ``cls`` (a :class:`~attnlab.MultiHeadAttention`) with ``attention``'s settings,
    cast to ``like``'s dtype and device before anything is copied in (copying into float32
    first would round float64 weights)."""
    if attention is None:
        attention = AttentionConfig()
    if not isinstance(attention, AttentionConfig):
        raise TypeError(f"attention: expected an AttentionConfig, got {type(attention).__name__}")
    if attention.kernel is not None:
        dropout = 0.0  # efficient kernels form no attention weights to drop
    layer = cls(
        dim, heads, dropout=dropout, qkv_bias=qkv_bias, out_bias=out_bias,
        context_dim=None if context_dim == dim else context_dim, **attention.layer_kwargs(),
    )  # fmt: skip
    return layer.to(device=like.device, dtype=like.dtype)


def linear(owner: nn.Module, name: str, where: str) -> nn.Linear:
    """``owner.<name>``, which must be an ``nn.Linear``."""
    found = getattr(owner, name, None)
    if not isinstance(found, nn.Linear):
        got = "missing" if found is None else type(found).__name__
        raise TypeError(
            f"{where}: expected {type(owner).__name__}.{name} to be an nn.Linear, got {got}"
        )
    return found


def any_bias(*linears: nn.Linear) -> bool:
    """Whether one of ``linears`` has a bias: then the attnlab map that stands for all of them
    has one, and the others' parts are zero (:func:`copy_linear_group`)."""
    return any(lin.bias is not None for lin in linears)


def copy_linear(target: nn.Linear, weight: Tensor, bias: Tensor | None) -> None:
    """Copy ``weight`` and ``bias`` into ``target``; a missing ``bias`` is zero in ``target``
    (if it has one): ``W x + 0`` is the bias-free map."""
    target.weight.copy_(weight)
    if target.bias is None:
        if bias is not None:  # the flags were chosen from the sources: a bug if reached
            raise RuntimeError("copy_linear: a bias to copy into a map built without one")
        return
    if bias is None:
        target.bias.zero_()
    else:
        target.bias.copy_(bias)


def copy_linear_group(target: nn.Linear, sources: list[nn.Linear]) -> None:
    """Copy ``sources`` stacked by rows (e.g. ``[key; value]``) into ``target``; the parts of
    sources without a bias get a zero bias (e.g. Whisper's bias-free keys next to biased
    values)."""
    weight = torch.cat([s.weight for s in sources])
    bias = None
    if target.bias is not None:
        bias = torch.cat([
            s.bias if s.bias is not None else s.weight.new_zeros(s.out_features) for s in sources
        ])  # fmt: skip
    copy_linear(target, weight, bias)


def layer_norm_type(norms: dict[str, nn.Module], where: str) -> Callable[[int], nn.Module]:
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


def activation(act: object, where: str) -> nn.Module:
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


def expect_class(module: object, name: str, full: str, where: str) -> None:
    """Raise ``TypeError`` unless ``module``'s class is called ``name``.

    By name, not isinstance: the other library is not imported here. Same-named classes of
    other origin still have to pass the layout checks.
    """
    if type(module).__name__ != name:
        raise TypeError(f"{where}: expected {full}, got {type(module).__name__}")


def context_dim(layer: nn.Module) -> int | None:
    """A converted attention layer's ``context_dim`` argument (None: the model width)."""
    return None if layer.context_dim == layer.dim else layer.context_dim
