"""The request every backend computes (:class:`Problem`), the backend protocol (:class:`Backend`)
and the registry of backends by name (:data:`BACKENDS`).

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from ..functional import Normalization, Score
from ..masks import Dense, Mask
from ..pair_bias import PairBias
from ..registry import Registry

__all__ = ["Problem", "Backend", "BACKENDS"]


@dataclass
class Problem:
    """One attention request, on already projected ``q, k, v`` of shape ``(b, h, n, d)``."""

    q: Tensor
    k: Tensor
    v: Tensor
    score: Score
    normalize: Normalization
    mask: Mask | Tensor | None = None
    bias: Tensor | PairBias | None = None
    dropout: float = 0.0  # effective probability: 0 unless training
    need_weights: bool = False
    q_offset: int = 0

    @property
    def shape(self) -> tuple[int, int, int, int]:
        b, h, i, _ = self.q.shape
        return b, h, i, self.k.shape[2]

    @property
    def needs_grad(self) -> bool:
        return torch.is_grad_enabled() and any(
            t.requires_grad for t in (self.q, self.k, self.v, self.bias) if t is not None
        )

    def with_dense_bias(self) -> Problem:
        """This problem with a :class:`~attnlab.pair_bias.PairBias` made dense, in the dtype
        the scores are computed in (autocast's, else ``q``'s), for backends that add only
        dense biases."""
        if not isinstance(self.bias, PairBias):
            return self
        return replace(self, bias=self.bias.dense(self.compute_dtype))

    @property
    def compute_dtype(self) -> torch.dtype:
        """The dtype the scores are computed in: autocast's on ``q``'s device, else ``q``'s."""
        device = self.q.device.type
        low = torch.is_autocast_enabled(device)
        return torch.get_autocast_dtype(device) if low else self.q.dtype

    def dense_mask(self) -> Tensor | None:
        if self.mask is None or isinstance(self.mask, Tensor):
            return self.mask
        b, h, i, j = self.shape
        return self.mask.dense(b, h, i, j, q_offset=self.q_offset, device=self.q.device)

    def mask_object(self) -> Mask | None:
        """The mask as a :class:`~attnlab.masks.Mask` (a tensor wrapped as ``Dense``)."""
        if self.mask is None or isinstance(self.mask, Mask):
            return self.mask
        return Dense(self.mask)


class Backend:
    """A way to compute a :class:`Problem` exactly.

    :meth:`refuses` says why it can never compute a score with a normalisation (checked once,
    when a layer is built; phrased to follow "backend NAME"); :meth:`unsupported` why it cannot
    compute one request (it includes :meth:`refuses`). Both return None when it can.
    :meth:`advice` says what to use instead, after the reason (whole sentences).
    """

    name: str = "?"
    #: whether it adds a :class:`~attnlab.pair_bias.PairBias` itself (else it gets the dense
    #: bias)
    takes_pair_bias: bool = False

    def refuses(self, score: Score, normalize: Normalization) -> str | None:
        return None

    def unsupported(self, p: Problem) -> str | None:
        reason = self.refuses(p.score, p.normalize)
        return None if reason is None else f"it {reason}"

    def advice(self, p: Problem) -> str:
        """What computes ``p`` when :meth:`unsupported` refuses it (a sentence)."""
        if p.need_weights:  # only the reference path returns them
            return (
                "Use backend='auto' or 'reference', which returns the weights and computes "
                "every score and normalization."
            )
        return (
            "Use backend='auto' to pick one that can, or 'reference' / 'chunked', which "
            "compute every score and normalization."
        )

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        raise NotImplementedError


BACKENDS: Registry = Registry("backend")
