"""Efficient attention kernels: the "-formers" as swappable attention maths.

Each kernel is an :class:`~attnlab.efficient.base.AttentionKernel` in its own file, registered
in :data:`KERNELS`, and plugs into the layer by name::

    MultiHeadAttention(256, 4, kernel="performer", features=128)

========================  =====================================  ==========  =================
kernel                    paper                                  causal      cost (time)
========================  =====================================  ==========  =================
``local``                 sliding window (Beltagy et al. 2020)   yes         O(n w d), exact
``longformer``            Beltagy et al. 2020                    yes         O(n (w + g) d)
``bigbird``               Zaheer et al. 2020                     yes         O(n c (3 + s + g) d)
``linformer``             Wang et al. 2020                       raises      O(n k d)
``performer``             Choromanski et al. 2021 (FAVOR+)       yes         O(n m d)
``linear``                Katharopoulos et al. 2020              yes (RNN)   O(n d^2)
``nystrom``               Xiong et al. 2021                      raises      O(n m d + m^3)
``reformer``              Kitaev et al. 2020 (LSH)               yes         O(R n c d)
``synthesizer``           Tay et al. 2021                        yes         O(n^2 d)
``sinkhorn``              Tay et al. 2020                        raises      O(n c d)
========================  =====================================  ==========  =================

Every kernel honours key padding; the sparse ones (local, longformer, bigbird) and the
synthesizer honour any mask; a mask a kernel cannot apply raises, it is never ignored.
"""

from __future__ import annotations

import inspect
from typing import Any

from torch import nn

from ..registry import Registry
from .base import AttentionKernel, MaskParts, is_causal, padding_lengths, split_mask
from .bigbird import BigBirdKernel, BigBirdMask
from .linear import LinearKernel, LinearState
from .linformer import LinformerKernel
from .local import LocalKernel
from .longformer import LongformerKernel
from .nystrom import NystromKernel
from .performer import PerformerKernel
from .reformer import ReformerKernel
from .sinkhorn import SinkhornKernel
from .synthesizer import SynthesizerKernel

__all__ = [
    "KERNELS",
    "make_kernel",
    "kernel_options",
    "AttentionKernel",
    "MaskParts",
    "split_mask",
    "is_causal",
    "padding_lengths",
    "BigBirdMask",
    "LinearState",
]

KERNELS: Registry = Registry("kernel")
for _cls in (
    LocalKernel,
    LongformerKernel,
    BigBirdKernel,
    LinformerKernel,
    PerformerKernel,
    LinearKernel,
    NystromKernel,
    ReformerKernel,
    SynthesizerKernel,
    SinkhornKernel,
):
    KERNELS.register(_cls.name, _cls)


def kernel_options(name: str) -> dict[str, Any]:
    """The options of kernel ``name`` and their defaults (``dim`` and ``heads`` excluded)."""
    cls = KERNELS.get(name)
    params = inspect.signature(cls.__init__).parameters
    return {
        p.name: p.default
        for p in params.values()
        if p.kind is p.KEYWORD_ONLY and p.name not in ("dim", "heads")
    }


def make_kernel(name: str, *, dim: int, heads: int, **options: Any) -> nn.Module:
    """Build the kernel registered as ``name`` for ``heads`` heads of ``dim // heads``.

    An unknown name lists the valid kernels; an unknown option lists the valid options of that
    kernel with their defaults.
    """
    cls = KERNELS.get(name)
    valid = kernel_options(name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        listed = ", ".join(f"{k}={v!r}" for k, v in valid.items()) or "none"
        raise ValueError(f"kernel {name!r} has no option(s) {unknown}; valid options: {listed}")
    return cls(dim=dim, heads=heads, **options)
