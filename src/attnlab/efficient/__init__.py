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
synthesizer honour any mask; a mask a kernel cannot apply raises, it is never ignored. All of
them implement the package's one kernel protocol, :class:`attnlab.kernels.AttentionKernel`;
the exact maths (:class:`attnlab.kernels.ExactKernel`) is the layers' default kernel and is not
registered here.

One word per concept in the options: ``window`` is a radius (keys at ``|i - j| <= window``, as
:func:`attnlab.masks.local`), ``block`` a block length, ``backend`` the way a sparse kernel
computes.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from ..registry import Registry
from .base import AttentionKernel, MaskParts, split_mask
from .bigbird import BigBirdKernel, BigBirdMask
from .linear import LinearKernel, LinearState, RecurrentCache
from .linformer import LinformerKernel
from .local import LocalKernel
from .longformer import LongformerKernel, LongformerPattern
from .nystrom import NystromKernel
from .performer import PerformerKernel
from .reformer import ReformerKernel
from .sinkhorn import SinkhornKernel
from .synthesizer import SynthesizerKernel

__all__ = [
    "KERNELS",
    "make_kernel",
    "kernel_options",
    "check_kernel_options",
    "AttentionKernel",
    "MaskParts",
    "split_mask",
    "BigBirdMask",
    "LongformerPattern",
    "LinearState",
    "RecurrentCache",
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
    skip = {"dim", "heads"}
    return {
        p.name: p.default
        for p in params.values()
        if p.kind is p.KEYWORD_ONLY and p.name not in skip
    }


def check_kernel_options(name: str, options: Iterable[str]) -> None:
    """Raise ``ValueError`` naming the unknown options of kernel ``name`` and listing its valid
    options with their defaults."""
    valid = kernel_options(name)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        listed = ", ".join(f"{k}={v!r}" for k, v in valid.items()) or "none"
        raise ValueError(f"kernel {name!r} has no option(s) {unknown}; valid options: {listed}")


def make_kernel(name: str, *, dim: int, heads: int, **options: Any) -> AttentionKernel:
    """Build the kernel registered as ``name`` for ``heads`` heads of ``dim // heads``.

    An unknown name lists the valid kernels; an unknown option lists the valid options of that
    kernel with their defaults.
    """
    check_kernel_options(name, options)
    return KERNELS.get(name)(dim=dim, heads=heads, **options)
