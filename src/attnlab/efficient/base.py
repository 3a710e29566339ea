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

import warnings

import torch
from torch import Tensor

from ..kernels.base import AttentionKernel, MaskParts, split_dense, split_mask
from ..masks import Causal, Dense, Mask, from_tensor
from ..numerics import masked_softmax

__all__ = [
    "AttentionKernel",
    "MaskParts",
    "split_mask",
    "is_causal",
    "padding_lengths",
    "key_valid_rows",
    "masked_softmax",
]


def is_causal(mask: Tensor | Mask | None, *, q_offset: int = 0) -> bool:
    """Whether ``mask`` includes the causal constraint (``masks.causal()`` as a term of a
    conjunction, or a dense ``tril`` pattern).

    Deprecated (no kernel uses it): ``split_mask(mask, ...).causal`` says the same.
    """
    warnings.warn(
        "attnlab.efficient.is_causal is deprecated; use split_mask(...).causal",
        DeprecationWarning,
        stacklevel=2,
    )
    if mask is None:
        return False
    for term in from_tensor(mask).conjuncts():
        if isinstance(term, Causal):
            return True
        if isinstance(term, Dense) and term.tensor.dim() >= 2:
            i, j = term.tensor.shape[-2:]
            found = split_dense(term.tensor, i, j, q_offset)
            if found is not None and found[1]:
                return True
    return False


def padding_lengths(key_valid: Tensor | None) -> Tensor | None:
    """Per-sequence lengths ``(b,)`` if ``key_valid (b, 1, 1, j)`` is a prefix mask, else None.

    Deprecated (no kernel uses it): ``key_valid.sum(-1)`` gives the lengths of a prefix mask.
    """
    warnings.warn(
        "attnlab.efficient.padding_lengths is deprecated; use key_valid.sum(-1)",
        DeprecationWarning,
        stacklevel=2,
    )
    if key_valid is None:
        return None
    kv = key_valid.reshape(key_valid.shape[0], -1)
    lengths = kv.sum(-1)
    prefix = torch.arange(kv.shape[-1], device=kv.device) < lengths.view(-1, 1)
    return lengths if bool((prefix == kv).all()) else None


def key_valid_rows(parts: MaskParts, batch: int, kv_len: int, device: torch.device) -> Tensor:
    """``parts.key_valid`` as ``(b, j)`` bool, True = a real key (all True without padding)."""
    if parts.key_valid is None:
        return torch.ones(batch, kv_len, dtype=torch.bool, device=device)
    return parts.key_valid[:, 0, 0]  # (b, 1, 1, j) -> (b, j)
