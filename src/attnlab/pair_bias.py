r"""A score bias on a few ``(query, key)`` pairs, zero elsewhere, without its dense
``(h, i, j)`` tensor.

Graph transformers add a learned score to the pairs joined by an edge (Graphormer's edge
encoding, ``model.kind=full_edge_bias``). On Cora that is 13,264 of 7.3M pairs per head. As a
dense bias it is built, read twice and its gradient written whole in every layer of every step;
as a :class:`PairBias` the block kernel of :mod:`attnlab.backends.dropout_blocks` adds it to a
block's scores at those pairs only, and reads its gradient there, ``O(P h)``. Backends that take
only dense biases get :meth:`PairBias.dense`.

.. math::
    s_{ij} \mathrel{+}= \text{values}[h, p] \quad \text{at } i \cdot j_{\max} + j = \text{index}[p].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

__all__ = ["PairBias"]


@dataclass(frozen=True, eq=False)
class PairBias:
    """An additive score bias that is nonzero at ``P`` pairs only.

    Args:
        index: ``(P,)`` int64, the pairs' flat places ``i * keys + j`` in an ``(queries, keys)``
            score matrix, strictly increasing.
        values: ``(h, P)`` or ``(1, P)`` (the same for every head), float: the bias at each
            pair, differentiable.
        queries, keys: the score matrix's shape ``(i, j)``.

    The same for every sequence of the batch. Added to a dense tensor (``bias + t``), it is
    its dense form plus ``t``.
    """

    index: Tensor
    values: Tensor
    queries: int
    keys: int
    _bounds: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        index, values = self.index, self.values
        if not isinstance(index, Tensor) or index.dim() != 1 or index.dtype != torch.int64:
            got = f"{index.dtype} {tuple(index.shape)}" if isinstance(index, Tensor) else index
            raise ValueError(f"index: expected a 1-D int64 tensor of flat pairs, got {got}")
        if not isinstance(values, Tensor) or values.dim() != 2 or not values.is_floating_point():
            got = (f"{values.dtype} {tuple(values.shape)}" if isinstance(values, Tensor)
                   else type(values).__name__)  # fmt: skip
            raise ValueError(f"values: expected a float tensor (heads or 1, P), got {got}")
        if values.shape[1] != index.numel():
            raise ValueError(f"values: expected {index.numel()} columns, one per pair of index, "
                             f"got shape {tuple(values.shape)}")  # fmt: skip
        if self.queries < 1 or self.keys < 1:
            raise ValueError(f"queries, keys: expected positive sizes, got {self.queries}, "
                             f"{self.keys}")  # fmt: skip
        if index.numel():
            first, last = int(index[0]), int(index[-1])
            if first < 0 or last >= self.queries * self.keys:
                raise ValueError(f"index: pairs must lie in [0, {self.queries * self.keys}) "
                                 f"(queries x keys), got {first} to {last}")  # fmt: skip
            if index.numel() > 1 and not bool((index[1:] > index[:-1]).all()):
                raise ValueError("index: pairs must be strictly increasing (sorted, distinct)")

    @property
    def heads(self) -> int:
        """The heads the values give (1: the same for every head)."""
        return self.values.shape[0]

    @property
    def requires_grad(self) -> bool:
        return self.values.requires_grad

    @property
    def dtype(self) -> torch.dtype:
        return self.values.dtype

    def dense(self, dtype: torch.dtype | None = None) -> Tensor:
        """The bias as a ``(1, heads, queries, keys)`` tensor in ``dtype`` (default the
        values'), differentiable in :attr:`values` (its gradient is read at the pairs)."""
        values = self.values if dtype is None else self.values.to(dtype)
        flat = values.new_zeros(self.heads, self.queries * self.keys)
        flat = flat.index_copy(1, self.index, values)
        return flat.view(1, self.heads, self.queries, self.keys)

    def rows(self, start: int, stop: int) -> tuple[slice, Tensor]:
        """The pairs of queries ``start`` to ``stop`` (exclusive): their slice of
        :attr:`index` / :attr:`values`, and their places in that block's flat ``(c, keys)``
        scores. Cached per block."""
        got = self._bounds.get((start, stop))
        if got is None:
            ends = torch.tensor([start * self.keys, stop * self.keys], dtype=torch.int64)
            lo, hi = torch.searchsorted(self.index, ends).tolist()
            got = slice(lo, hi), self.index[lo:hi] - start * self.keys
            self._bounds[(start, stop)] = got
        return got

    def __add__(self, other: Tensor) -> Tensor:
        return self.dense(torch.promote_types(self.values.dtype, other.dtype)) + other

    __radd__ = __add__
