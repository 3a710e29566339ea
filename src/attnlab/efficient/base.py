"""The contract every efficient attention kernel implements, and how masks reach it.

The contract is the package's one kernel protocol, :class:`attnlab.kernels.AttentionKernel`
(re-exported here with :class:`MaskParts` and :func:`split_mask`): a kernel replaces the exact
attention maths of :class:`~attnlab.MultiHeadAttention` on already projected queries, keys and
values::

    out = kernel(q, k, v, mask=mask, q_offset=offset)      # (b, h, i, e)

This module adds the predicates the efficient kernels share. The masked softmax they use is
the package's one, :func:`attnlab.functional.masked_softmax`.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..kernels.base import AttentionKernel, MaskParts, split_mask
from ..numerics import masked_softmax

__all__ = [
    "AttentionKernel",
    "MaskParts",
    "split_mask",
    "key_valid_rows",
    "masked_softmax",
]


def key_valid_rows(parts: MaskParts, batch: int, kv_len: int, device: torch.device) -> Tensor:
    """``parts.key_valid`` as ``(b, j)`` bool, True = a real key (all True without padding)."""
    if parts.key_valid is None:
        return torch.ones(batch, kv_len, dtype=torch.bool, device=device)
    return parts.key_valid[:, 0, 0]  # (b, 1, 1, j) -> (b, j)
