"""What :class:`~attnlab.attention.MultiHeadAttention` checks before it builds or runs: its
inputs' shapes and dtypes, its bias flags and the requests an efficient kernel cannot take.
Each error names the argument, what was expected and what was given.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from .efficient import KERNELS
from .efficient import kernel_options as options_of

__all__ = ["check_sequence", "bias_flags", "check_kernel_request"]


def check_sequence(t: Tensor, name: str, dim: int, weight: Tensor) -> None:
    """Raise ``ValueError`` unless ``t`` is ``(batch, seq >= 1, dim)`` floating point in the
    layer's dtype (``weight``'s; any floating dtype under autocast)."""
    if not isinstance(t, Tensor) or t.dim() != 3 or t.shape[-1] != dim:
        got = tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__
        raise ValueError(f"{name}: expected shape (batch, seq, {dim}), got {got}")
    if t.shape[1] == 0:
        raise ValueError(f"{name}: empty sequence (shape {tuple(t.shape)}); need seq >= 1")
    autocast = torch.is_autocast_enabled(t.device.type)
    if not t.is_floating_point() or (t.dtype != weight.dtype and not autocast):
        raise ValueError(
            f"{name}: dtype {t.dtype} differs from the layer's dtype {weight.dtype}; convert "
            f"the input ({name}.to({weight.dtype})) or the layer (layer.to({t.dtype}))"
            + ("" if t.is_floating_point() else "; token ids need an embedding first")
        )


def bias_flags(bias: bool, qkv_bias: bool | None, out_bias: bool | None) -> tuple[bool, bool]:
    """``(qkv_bias, out_bias)``, each ``bias`` unless given."""
    for name, value in (("bias", bias), ("qkv_bias", qkv_bias), ("out_bias", out_bias)):
        if not isinstance(value, bool) and not (value is None and name != "bias"):
            allowed = "True or False" + (" (or None: follow bias)" if name != "bias" else "")
            raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return (bias if qkv_bias is None else qkv_bias), (bias if out_bias is None else out_bias)


def check_kernel_request(
    kernel: str | nn.Module,
    options: dict[str, Any],
    score: str,
    normalize: str,
    backend: str,
    dropout: float,
) -> None:
    """Refuse, when the layer is built, what an efficient kernel cannot take."""
    if dropout > 0:
        raise ValueError(
            f"dropout={dropout}: efficient kernels never form attention weights, so "
            "there is nothing to drop; use dropout=0 with kernel= (residual dropout "
            "in the blocks still applies)"
        )
    if score != "scaled_dot" or normalize != "softmax":
        raise ValueError(
            "kernel= replaces the exact attention maths; leave score and normalize at their "
            "defaults when you choose a kernel"
        )
    if isinstance(kernel, nn.Module) and options:
        raise ValueError("kernel options go to a kernel built by name, not to a module")
    if backend != "auto" and (isinstance(kernel, nn.Module) or "backend" not in options_of(kernel)):
        with_backend = [n for n in KERNELS.names() if "backend" in options_of(n)]
        raise ValueError(
            f"backend={backend!r}: kernel {getattr(kernel, 'name', kernel)!r} has no backend "
            f"choice; leave backend='auto' (kernels with one: {', '.join(with_backend)})"
        )
