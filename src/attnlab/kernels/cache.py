"""``KVCache``: the keys and values of earlier positions, for incremental decoding.

A kernel's :meth:`~attnlab.kernels.AttentionKernel.new_cache` makes the cache its decoding
needs: this one by default, a constant-size recurrent state for kernels with an RNN form
(:class:`~attnlab.efficient.linear.RecurrentCache`).

Legend: ``b`` batch, ``h`` heads, ``j`` cached positions, ``d`` head dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["KVCache"]


@dataclass
class KVCache:
    """Keys and values of earlier steps, for incremental decoding.

    Self-attention appends each step's keys and values; cross-attention fills the cache from the
    context once and reuses it.
    """

    k: Tensor | None = None  # (b, h, j, d)
    v: Tensor | None = None  # (b, h, j, d)

    @property
    def length(self) -> int:
        return 0 if self.k is None else self.k.shape[2]

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        self.k = k if self.k is None else torch.cat([self.k, k], dim=2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=2)
        return self.k, self.v
