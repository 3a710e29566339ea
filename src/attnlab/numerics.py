"""The package's one masked softmax and the safe numerics around it.

Every softmax over a masked row in attnlab (the reference path's normalisation, the chunked
backend's online softmax, every efficient kernel) goes through :func:`masked_softmax` or shifts
by :func:`safe_max`; :func:`zero_dead_keys` keeps a NaN in padding away from real outputs.
They are re-exported by :mod:`attnlab.functional`.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["at_least_float32", "safe_max", "masked_softmax", "zero_dead_keys"]


def at_least_float32(t: Tensor) -> Tensor:
    """``t`` in float32, or in its own dtype if that is wider (float64 stays float64)."""
    return t.to(torch.promote_types(t.dtype, torch.float32))


def safe_max(s: Tensor, dim: int | tuple[int, ...] = -1) -> Tensor:
    """``s.amax(dim, keepdim=True)``, with 0 where every entry is ``-inf`` (nothing allowed),
    detached: the shift of a softmax or of ``exp`` features, which cancels exactly, so that
    ``exp(s - max)`` never overflows and never computes ``-inf - (-inf)``."""
    m = s.detach().amax(dim, keepdim=True)
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


def masked_softmax(scores: Tensor, allowed: Tensor | None = None, dim: int = -1) -> Tensor:
    """Softmax over the entries ``allowed`` (boolean, broadcastable; None = all), in float32 or
    wider; a row with no allowed entry gets zeros, not NaN, and finite gradients.

    Without a mask this is ``torch.softmax`` itself (one fused kernel, forward and backward).
    With one, forbidden scores become the dtype's lowest finite value rather than ``-inf``, so
    a fully forbidden row is a uniform softmax (never ``-inf - (-inf) = NaN``, in either pass)
    that the final ``masked_fill`` zeroes; in a row with an allowed entry they underflow to
    exactly 0. NaN or inf at a forbidden position (a NaN padded key) is replaced, so it cannot
    leak.
    """
    dtype = torch.promote_types(scores.dtype, torch.float32)
    if allowed is None:
        return torch.softmax(scores, dim, dtype=dtype)
    low = torch.finfo(scores.dtype).min
    w = torch.softmax(scores.masked_fill(~allowed, low), dim, dtype=dtype)
    return w.masked_fill(~allowed, 0.0)


def zero_dead_keys(k: Tensor, v: Tensor, live: Tensor | None) -> tuple[Tensor, Tensor]:
    """``k, v`` (``(b, h, j, d)``) with zeros at keys no query may attend to.

    Masked weights are zero, but ``0 * NaN = NaN``: a NaN or inf in a padded key or value
    (uninitialised padding, a diverged encoder) would otherwise reach every real output, and
    the gradients of real outputs. ``live`` is :meth:`attnlab.masks.Mask.live_keys`'s
    ``(b, h, 1, j)`` boolean (None: nothing to zero).
    """
    if live is None:
        return k, v
    dead = ~live.to(k.device).transpose(-2, -1)  # (b, h, j, 1)
    return k.masked_fill(dead, 0.0), v.masked_fill(dead, 0.0)
