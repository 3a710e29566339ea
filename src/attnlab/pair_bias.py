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
        queries: the score matrix's rows ``i``.
        keys: the score matrix's columns ``j``.

    The same for every sequence of the batch. Added to a dense tensor (``bias + t``), it is
    its dense form plus ``t``.
    """

    index: Tensor
    values: Tensor
    queries: int
    keys: int
    # per (start, stop) of a block: its slice of the pairs and their places (rows()); not an
    # init field, so that a copy made by dataclasses.replace starts its own
    _bounds: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index, values = self.index, self.values
        if not isinstance(index, Tensor) or index.dim() != 1 or index.dtype != torch.int64:
            got = (f"{index.dtype} {tuple(index.shape)}" if isinstance(index, Tensor)
                   else type(index).__name__)  # fmt: skip
            raise ValueError(f"index: expected a 1-D int64 tensor of flat pairs, got {got}")
        if not isinstance(values, Tensor) or values.dim() != 2 or not values.is_floating_point():
            got = (f"{values.dtype} {tuple(values.shape)}" if isinstance(values, Tensor)
                   else type(values).__name__)  # fmt: skip
            raise ValueError(f"values: expected a float tensor (heads or 1, P), got {got}")
        if values.shape[1] != index.numel():
            raise ValueError(f"values: expected {index.numel()} columns, one per pair of index, "
                             f"got shape {tuple(values.shape)}")  # fmt: skip
        if values.device != index.device:
            raise ValueError(f"values: expected index's device {index.device}, got "
                             f"{values.device}")  # fmt: skip
        sizes = (self.queries, self.keys)
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes):
            raise ValueError(f"queries, keys: expected positive ints, got {sizes!r}")
        if index.numel():
            first, last = int(index[0]), int(index[-1])
            if first < 0 or last >= self.queries * self.keys:
                raise ValueError(f"index: pairs must lie in [0, {self.queries * self.keys}) "
                                 f"(queries x keys), got {first} to {last}")  # fmt: skip
            bad = (index[1:] <= index[:-1]).nonzero()
            if bad.numel():
                at = int(bad[0])
                raise ValueError("index: pairs must be strictly increasing (sorted, distinct); "
                                 f"got {int(index[at])} then {int(index[at + 1])} at "
                                 f"{at}, {at + 1}")  # fmt: skip

    def check(self, queries: int, keys: int, heads: int | None = None) -> None:
        """Raise ``ValueError`` unless this bias is for ``(queries, keys)`` scores and its
        values' heads are 1 or ``heads`` (None: any)."""
        if (self.queries, self.keys) != (queries, keys):
            raise ValueError(f"bias: a PairBias of ({self.queries}, {self.keys}) scores for "
                             f"(i, j) = ({queries}, {keys})")  # fmt: skip
        if heads is not None and self.heads not in (1, heads):
            raise ValueError(f"bias: a PairBias of {self.heads} heads for {heads} heads")

    @property
    def heads(self) -> int:
        """The heads the values give (1: the same for every head)."""
        return self.values.shape[0]

    @property
    def requires_grad(self) -> bool:
        return self.values.requires_grad

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
        if not isinstance(other, Tensor):
            return NotImplemented
        return self.dense(torch.promote_types(self.values.dtype, other.dtype)) + other

    __radd__ = __add__
