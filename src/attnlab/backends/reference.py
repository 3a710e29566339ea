"""The ``reference`` backend: :func:`~attnlab.functional.attend`, every score and
normalisation, and the only one that returns the attention weights; ``O(i * j)`` memory.

Because it builds every score, it refuses, before allocating anything, a problem whose scores
and weights alone would not fit in the memory available (:func:`dense_bytes`,
:func:`available_memory`), naming the backends that can compute it: at ``n = 16384``, 8 heads,
float32 they take 16 GiB, and torch would fail with a bare allocation error or the process be
killed.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ..functional import attend
from ..sizes import format_bytes
from .base import BACKENDS, Backend, Problem
from .sdpa import SDPABackend

__all__ = ["DenseCost", "ReferenceBackend", "available_memory", "dense_bytes"]

#: below this many bytes of scores and weights, the reference path runs unchecked (reading the
#: free memory costs ~30 us, a lot next to a tiny attention; no machine lacks 64 MiB)
_MEMORY_CHECK_MIN_BYTES = 1 << 26


class DenseCost(NamedTuple):
    """What :func:`dense_bytes` counts: ``bytes``, and what they hold, for the message."""

    bytes: int
    what: str


def dense_bytes(p: Problem) -> DenseCost:
    """A lower bound of what :func:`~attnlab.functional.attend` holds at once for ``p``: the
    ``(b, h, i, j)`` scores and weights, or a score's hidden layer (``pair_cost`` elements per
    pair: the additive score's ``(b, h, i, j, a)``) if that is larger.

    The scores are in ``q``'s dtype (autocast's, if narrower, under autocast), the weights in
    that or float32, whichever is wider. Left out, so that the bound stays a bound: a mask
    rendered dense, the masked copy of the scores, the bias added, dropout's mask, the weights
    cast back to ``q``'s dtype and what autograd keeps.
    """
    b, h, i, j = p.shape
    pairs = b * h * i * j
    score = p.q.dtype
    if torch.is_autocast_enabled(p.q.device.type):
        low = torch.get_autocast_dtype(p.q.device.type)
        score = low if low.itemsize < score.itemsize else score
    weights = torch.promote_types(score, torch.float32)
    both = pairs * (score.itemsize + weights.itemsize)
    hidden = pairs * getattr(p.score, "pair_cost", 1) * score.itemsize
    if hidden > both:
        name = getattr(p.score, "name", type(p.score).__name__)
        what = f"the hidden layer of score {name!r} ({p.score.pair_cost} {score} per pair)"
        return DenseCost(hidden, what)
    dtypes = str(score) if score == weights else f"{score} and {weights}"
    return DenseCost(both, f"the scores and weights ({dtypes})")


def _meminfo_available() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes; None where it cannot be read."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024  # in kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_memory(device: torch.device) -> int | None:
    """Bytes that can still be allocated on ``device``: on CPU ``MemAvailable`` (Linux), on
    CUDA the driver's free memory plus what PyTorch's caching allocator holds unused; None
    where it cannot be told (other devices, no ``/proc/meminfo``): then nothing is refused."""
    if device.type == "cpu":
        return _meminfo_available()
    if device.type == "cuda":
        try:
            free, _ = torch.cuda.mem_get_info(device)
            cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
            return free + max(0, cached)
        except (RuntimeError, AssertionError):
            return None
    return None


@BACKENDS.register("reference")
class ReferenceBackend(Backend):
    name = "reference"

    def unsupported(self, p: Problem) -> str | None:
        reason = super().unsupported(p)
        if reason is not None:
            return reason
        need = dense_bytes(p)
        if need.bytes < _MEMORY_CHECK_MIN_BYTES:
            return None
        free = available_memory(p.q.device)
        if free is None or need.bytes <= free:
            return None
        return (
            f"at (b, h, i, j) = {tuple(p.shape)} it needs at least "
            f"{format_bytes(need.bytes)} for {need.what}, and {format_bytes(free)} are "
            f"available on {p.q.device.type}"
        )

    def advice(self, p: Problem) -> str:
        """What computes ``p`` when its scores do not fit: ``sdpa`` (dot-product softmax) or
        ``chunked``, without the weights (no other backend returns them)."""
        options = ["'chunked' (every score and normalisation, memory O(n * block))"]
        if SDPABackend().refuses(p.score, p.normalize) is None:
            options.insert(0, "'sdpa' (fused, memory linear in n; dot-product softmax only)")
        use = f"use backend={' or '.join(options)}, or 'auto', which picks one that fits"
        if p.need_weights:
            return f"No other backend returns the weights: ask without need_weights=True and {use}."  # fmt: skip
        return f"{use[0].upper()}{use[1:]}."

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        out, w = attend(
            p.q, p.k, p.v, score=p.score, normalize=p.normalize, mask=p.mask, bias=p.bias,
            dropout=p.dropout, training=p.dropout > 0, q_offset=p.q_offset,
        )  # fmt: skip
        return out, (w if p.need_weights else None)
