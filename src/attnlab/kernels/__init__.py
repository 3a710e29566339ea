"""Attention kernels: the one protocol for attention maths on projected ``q, k, v``.

:class:`AttentionKernel` is the protocol (:mod:`attnlab.kernels.base`); :class:`ExactKernel`
the exact maths with its backends, the default of every layer; the efficient approximations
live in :mod:`attnlab.efficient`. To add a kernel, subclass :class:`AttentionKernel`, declare
what it honours (``supports_causal``, ``supports_structured``, ``bias_reason``,
``weights_reason``) and implement ``attend(q, k, v, parts, q_offset=...)``; register it in
:data:`attnlab.efficient.KERNELS` to make it available by name.
"""

from .base import AttentionKernel, KernelModule, KernelOutput, MaskParts, run_kernel, split_mask
from .exact import ExactKernel

__all__ = [
    "AttentionKernel",
    "ExactKernel",
    "KernelModule",
    "KernelOutput",
    "MaskParts",
    "run_kernel",
    "split_mask",
]
