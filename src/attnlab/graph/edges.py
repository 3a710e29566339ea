"""Edge-list housekeeping shared by the graph layers: input checks, self loops as PyG adds
them, and a one-entry cache of the prepared edge list.

Legend: ``n`` nodes, ``E`` edges, ``f`` edge feature size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ..backends.edge_ops import check_edge_index

__all__ = [
    "check_node_features",
    "check_dtype",
    "remove_self_loops",
    "add_self_loops",
    "add_remaining_self_loops",
    "EdgeCache",
    "SortedEdges",
]


def check_node_features(
    x: object, in_channels: int, *, name: str = "x", dtype: torch.dtype | None = None,
    layer: str = "the layer",
) -> Tensor:  # fmt: skip
    """``x`` if it is a float tensor of shape ``(num_nodes, in_channels)`` (in ``dtype``, the
    layer's parameters' dtype, when given); else a ``ValueError`` naming ``name``, the expected
    and the given. ``layer`` names the layer in the dtype message."""
    if not isinstance(x, Tensor) or not x.is_floating_point():
        got = f"dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{name} must be a float tensor of node features, got {got}")
    if x.dim() != 2 or x.shape[1] != in_channels:
        raise ValueError(
            f"{name} must have shape (num_nodes, {in_channels}) (one row of {in_channels} "
            f"features per node), got shape {tuple(x.shape)}"
        )
    if dtype is not None:
        check_dtype(x, dtype, name=name, layer=layer)
    return x


_CAST = {torch.float32: "float()", torch.float64: "double()", torch.float16: "half()",
         torch.bfloat16: "bfloat16()"}  # fmt: skip


def check_dtype(t: Tensor, dtype: torch.dtype, *, name: str, layer: str = "the layer") -> None:
    """A ``ValueError`` (as :class:`~attnlab.MultiHeadAttention`'s dtype check) naming
    ``name``, its dtype, the layer's ``dtype`` and both ways to make them agree, unless ``t`` is
    in ``dtype`` or autocast will cast it; otherwise torch's matmul error would come, naming
    neither the argument nor the layer."""
    if t.dtype == dtype or torch.is_autocast_enabled(t.device.type):
        return
    cast = _CAST.get(dtype, f"to({dtype})")
    layer_cast = _CAST.get(t.dtype, f"to({t.dtype})")
    raise ValueError(
        f"{name} has dtype {t.dtype} but {layer}'s parameters are {dtype}; convert the input "
        f"({name}.{cast}) or the layer (layer.{layer_cast})"
    )


def remove_self_loops(edge_index: Tensor, edge_attr: Tensor | None = None):
    """The edges ``(i, i)`` removed, order kept: ``(edge_index, edge_attr)``."""
    keep = edge_index[0] != edge_index[1]
    return edge_index[:, keep], (None if edge_attr is None else edge_attr[keep])


def _loop_attr(edge_index: Tensor, edge_attr: Tensor, n: int, fill_value, num_dst: int) -> Tensor:
    """Features of the new self loops: ``"mean"`` (or ``"add"``, ``"max"``, ``"mul"``, ...) of
    each node's incoming edge features (zero where it has none, one for ``"mul"``), or a
    constant (a number, or a tensor of one edge's features). ``num_dst`` bounds the
    destination ids (more than ``n`` on a bipartite graph)."""
    shape = (n, *edge_attr.shape[1:])
    if isinstance(fill_value, Tensor):
        loop = fill_value.to(edge_attr.device, edge_attr.dtype)
        loop = loop if loop.dim() == edge_attr.dim() else loop.unsqueeze(0)
        return loop.expand(shape).contiguous()
    if isinstance(fill_value, str):
        index = edge_index[1].view(-1, *([1] * (edge_attr.dim() - 1))).expand_as(edge_attr)
        reduce = {"add": "sum", "sum": "sum", "mean": "mean", "max": "amax", "min": "amin",
                  "mul": "prod"}  # fmt: skip
        if fill_value not in reduce:
            raise ValueError(f"fill_value must be a number, a tensor or one of {sorted(reduce)}, got {fill_value!r}")  # fmt: skip
        out = edge_attr.new_full((max(n, num_dst), *shape[1:]), float(fill_value == "mul"))
        out = out.scatter_reduce(0, index, edge_attr, reduce[fill_value], include_self=fill_value == "mul")  # fmt: skip
        return out[:n]
    return edge_attr.new_full(shape, float(fill_value))


def add_self_loops(
    edge_index: Tensor, edge_attr: Tensor | None, num_nodes: int, fill_value="mean",
    num_dst: int | None = None,
) -> tuple[Tensor, Tensor | None]:  # fmt: skip
    """One loop ``(i, i)`` per node appended after the edges (PyG's order), with features from
    ``fill_value`` (see :func:`_loop_attr`) when there are edge features. ``num_dst``: the
    number of destinations when more than ``num_nodes`` (a bipartite graph's loops are
    ``min(sources, destinations)``); the default is ``num_nodes``."""
    loops = torch.arange(num_nodes, device=edge_index.device, dtype=edge_index.dtype)
    out = torch.cat([edge_index, loops.expand(2, -1)], dim=1)
    if edge_attr is None:
        return out, None
    num_dst = num_nodes if num_dst is None else num_dst
    loop_attr = _loop_attr(edge_index, edge_attr, num_nodes, fill_value, num_dst)
    return out, torch.cat([edge_attr, loop_attr])


def add_remaining_self_loops(
    edge_index: Tensor, edge_weight: Tensor | None, num_nodes: int, fill_value: float = 1.0
) -> tuple[Tensor, Tensor | None]:
    """Every node gets exactly one self loop, appended last: an existing loop keeps its weight,
    a missing one gets ``fill_value`` (PyG's ``add_remaining_self_loops``, used by GCN)."""
    is_loop = edge_index[0] == edge_index[1]
    loops = torch.arange(num_nodes, device=edge_index.device, dtype=edge_index.dtype)
    out = torch.cat([edge_index[:, ~is_loop], loops.expand(2, -1)], dim=1)
    if edge_weight is None:
        return out, None
    loop_w = edge_weight.new_full((num_nodes, *edge_weight.shape[1:]), fill_value)
    loop_w[edge_index[0, is_loop]] = edge_weight[is_loop]
    return out, torch.cat([edge_weight[~is_loop], loop_w])


class SortedEdges(NamedTuple):
    """An edge list in the caller's order (``used``) and sorted by destination for the kernel.

    Sorting by destination turns the scatters over each node's incoming edges (the softmax's
    max and sum, the aggregation) into sequential writes; on a million-node graph that halves
    the scatter-max's time. ``order[k]`` is the caller's index of sorted edge ``k`` (None when
    the list is already sorted), ``inverse`` its inverse (weights back to the caller's order).
    """

    used: Tensor  # (2, E) the caller's order (PyG's, returned with the attention weights)
    src: Tensor  # (E,) sorted by destination
    dst: Tensor  # (E,) non-decreasing
    order: Tensor | None
    inverse: Tensor | None

    @classmethod
    def of(cls, used: Tensor) -> SortedEdges:
        dst = used[1]
        if dst.numel() < 2 or bool((dst[1:] >= dst[:-1]).all()):
            return cls(used, used[0], dst, None, None)
        order = torch.argsort(dst, stable=True)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel(), device=order.device)
        return cls(used, used[0, order], dst[order], order, inverse)

    def sort(self, t: Tensor | None) -> Tensor | None:
        """Per-edge ``t`` (caller's order) in the sorted order."""
        return t if t is None or self.order is None else t.index_select(0, self.order)

    def unsort(self, t: Tensor) -> Tensor:
        """Per-edge ``t`` (sorted order) back in the caller's order."""
        return t if self.inverse is None else t.index_select(0, self.inverse)


class EdgeCache:
    """The last prepared edge list of a layer, reused while the same ``edge_index`` object comes
    back unchanged (full-batch training passes the same graph every step).

    A hit needs the very same tensor object (held here, so its memory cannot be reused by
    another tensor) at the same version counter (an in-place edit bumps it), the same node
    count and device: a stale entry is impossible, a miss only costs the preparation.
    """

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._edge_index: Tensor | None = None
        self._value = None

    def get(self, edge_index: Tensor, num_nodes, make, extra: tuple = (), read=None):
        """``make(edge_index as long)``, validated and computed once per graph; ``extra``: more
        that the value depends on (e.g. a dtype). ``read(edge_index)``: the validated ``(2, E)``
        long edge list (default: :func:`check_edge_index` against ``num_nodes``), for other
        inputs (a sparse adjacency, a bipartite graph); ``num_nodes`` is then any key."""
        if read is None:

            def read(ei):
                return check_edge_index(ei, num_nodes).long()  # int32 ids welcome too

        if not isinstance(edge_index, Tensor):
            read(edge_index)  # raises, naming what was given
        key = (edge_index._version, num_nodes, edge_index.device, *extra)
        if self._edge_index is edge_index and self._key == key:
            return self._value
        value = make(read(edge_index))
        self._edge_index, self._key, self._value = edge_index, key, value
        return value
