r"""What the graph attention layers accept, in PyTorch Geometric's calling conventions, brought
to one form: source and destination features, the node counts and a ``(2, E)`` edge list.

* ``x``: one tensor ``(n, F)`` (sources and destinations are the same nodes) or a pair
  ``(x_src, x_dst)`` for a bipartite graph; ``x_dst`` may be None (GAT then scores with the
  source term only and takes the number of destinations from ``size`` or the adjacency).
* ``edge_index``: a ``(2, E)`` integer tensor (row 0 the sources, row 1 the destinations), or a
  torch sparse adjacency ``adj_t`` of shape ``(n_dst, n_src)`` (COO, CSR or CSC), entry
  ``[i, j]`` the edge ``j -> i``: PyG's convention, ``adj.t()`` of ``adj[j, i] = 1``. Its values
  are ignored and its entries are a set (a duplicate counts once); the layer's edges are its
  entries in row-major order (by destination, then source), which is also the order of the
  attention weights returned with it.
* ``size``: ``(n_src, n_dst)``, checked against the features and the adjacency; it gives the
  number of destinations when ``x_dst`` is None.

Legend: ``E`` edges, ``H`` heads, ``A x B`` the adjacency's shape (destinations x sources).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ..backends.edge_ops import check_edge_index
from .edges import EdgeCache, SortedEdges, add_self_loops, check_dtype, check_node_features

__all__ = [
    "check_in_channels",
    "check_message_passing_kwargs",
    "is_adjacency",
    "NodeInputs",
    "node_inputs",
    "read_edges",
    "row_major",
    "prepare_edges",
    "attention_weights",
]

SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc)


def check_in_channels(in_channels: object) -> tuple[int, int]:
    """``(source features, destination features)`` of an int or a pair of ints; PyG's lazy
    ``-1`` and anything else refused by name."""
    pair = tuple(in_channels) if isinstance(in_channels, tuple | list) else (in_channels,) * 2
    if len(pair) != 2:
        pair = (None, None)
    if -1 in pair:
        raise ValueError(
            f"in_channels={in_channels!r}: PyG's lazy -1 (the size read from the first input) is "
            "not supported; pass the number of input features (an int, or (source features, "
            "destination features) for a bipartite graph)"
        )
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in pair):
        raise ValueError(
            "in_channels must be a positive int or a pair (source features, destination "
            f"features) of them, got {in_channels!r}"
        )
    return pair  # type: ignore[return-value]


_REFUSED = {
    "aggr": "the layer sums the weighted messages (aggr='add'); other aggregations are not "
    "supported",
    "aggr_kwargs": "the sum takes no aggr_kwargs",
    "flow": "only flow='source_to_target' is supported; for the reverse flow pass "
    "edge_index.flip(0) (every edge reversed)",
    "decomposed_layers": "decomposed_layers must be a positive int (it only saves memory in PyG "
    "and is ignored here)",
    "node_dim": "node_dim is fixed to 0 (as in PyG's layer)",
    "normalize": "normalize is not an argument of PyG 2.8.1's layer (later versions add it) and "
    "is not supported",
}


def check_message_passing_kwargs(layer: str, kwargs: dict) -> None:
    """PyG's ``**kwargs`` (those of ``MessagePassing``): the values under which PyG computes
    what this layer computes are accepted, any other refused with the reason."""
    for key, val in kwargs.items():
        ok = {
            "aggr": val in ("add", "sum"),
            "aggr_kwargs": not val,
            "flow": val == "source_to_target",
            "decomposed_layers": isinstance(val, int) and not isinstance(val, bool) and val >= 1,
        }.get(key, False)
        if ok:
            continue
        if key not in _REFUSED:
            raise TypeError(f"{layer}.__init__() got an unexpected keyword argument {key!r}")
        raise ValueError(f"{layer}: {key}={val!r} is not supported: {_REFUSED[key]}")


def is_adjacency(edge_index: object) -> bool:
    """Is ``edge_index`` a torch sparse adjacency (COO, CSR or CSC)?"""
    return isinstance(edge_index, Tensor) and edge_index.layout in SPARSE_LAYOUTS


class NodeInputs(NamedTuple):
    x_src: Tensor  # (n_src, F_src)
    x_dst: Tensor | None  # (n_dst, F_dst); None: PyG's (x_src, None)
    one: bool  # x was one tensor: x_dst is x_src, the same nodes
    n_src: int
    n_dst: int


def _describe(x: object) -> str:
    if isinstance(x, tuple | list):
        return f"a {type(x).__name__} of {len(x)}: ({', '.join(type(v).__name__ for v in x)})"
    return type(x).__name__


def _check_size(size: object) -> tuple[int, int]:
    if (
        isinstance(size, tuple | list)
        and len(size) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in size)
    ):
        return int(size[0]), int(size[1])
    raise ValueError(
        f"size must be None or (number of source nodes, number of destination nodes), two "
        f"non-negative ints; got {size!r}"
    )


def node_inputs(
    x: object, edge_index: object, size: object, in_src: int, in_dst: int, dtype: torch.dtype,
    layer: str, *, dst_optional: bool = True,
) -> NodeInputs:  # fmt: skip
    """``x`` split into source and destination features (each checked: float, ``(n, F)`` with
    the layer's ``in_src`` / ``in_dst`` features, in ``dtype``) and the node counts, checked
    against ``size`` and a sparse ``edge_index``'s shape; a ValueError naming what disagrees."""
    if isinstance(x, Tensor):
        x_src, x_dst, one = x, x, True
        names = ("x", "x")
    elif isinstance(x, tuple | list) and len(x) == 2 and isinstance(x[0], Tensor) and (
        x[1] is None or isinstance(x[1], Tensor)
    ):  # fmt: skip
        (x_src, x_dst), one = x, False
        names = ("x[0] (source features)", "x[1] (destination features)")
    else:
        raise ValueError(
            "x must be a tensor of node features (num_nodes, F) or a pair (x_src, x_dst) of "
            f"them for a bipartite graph (x_dst may be None), got {_describe(x)}"
        )
    if x_dst is None and not dst_optional:
        raise ValueError(
            f"{layer} needs the destination features: x=(x_src, None) is not supported (its "
            "score depends on the destination's features); pass x=(x_src, x_dst)"
        )
    check_node_features(x_src, in_src, name=names[0], dtype=dtype, layer=layer)
    if x_dst is not None and (not one or in_dst != in_src):
        check_node_features(x_dst, in_dst, name=names[1], dtype=dtype, layer=layer)

    given, what = None, ""
    if is_adjacency(edge_index):
        shape = tuple(edge_index.shape)
        what = f"edge_index (a sparse adjacency adj_t of shape {shape} = (destinations, sources))"
        if len(shape) == 2:
            given = (shape[1], shape[0])
            if size is not None and _check_size(size) != given:
                raise ValueError(
                    f"size={size!r} disagrees with {what}: pass size=None or size={given} "
                    "(sources, destinations)"
                )
    elif size is not None:
        given, what = _check_size(size), f"size={tuple(size)} (sources, destinations)"
    n_src = x_src.shape[0]
    n_dst = x_dst.shape[0] if x_dst is not None else (given[1] if given else n_src)
    for k, (n, name) in enumerate(((n_src, names[0]), (n_dst, names[1]))):
        if given is not None and given[k] != n and (k == 0 or x_dst is not None):
            who = ("source", "destination")[k]
            raise ValueError(f"{what} says {given[k]} {who} nodes but {name} has {n} rows")
    return NodeInputs(x_src, x_dst, one, n_src, n_dst)


def _ptr_to_index(ptr: Tensor) -> Tensor:
    """Compressed pointers ``(m + 1,)`` to one row (or column) id per entry."""
    ids = torch.arange(ptr.numel() - 1, device=ptr.device)
    return ids.repeat_interleave(ptr.diff().long())


def _index_to_ptr(index: Tensor, m: int) -> Tensor:
    """Sorted ids ``(E,)`` in ``[0, m)`` to compressed pointers ``(m + 1,)``."""
    counts = torch.bincount(index, minlength=m)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


def _adjacency_edges(adj: Tensor) -> Tensor:
    """``(2, E)`` long ``(source, destination)`` of the entries of ``adj_t`` (a set), in
    row-major order (by destination, then source)."""
    if adj.dim() != 2:
        raise ValueError(
            "edge_index as a sparse adjacency must be 2-D, (num destinations, num sources) with "
            f"one value per entry; got shape {tuple(adj.shape)} (hybrid or batched). Pass edge "
            "features as edge_attr with a (2, E) edge_index"
        )
    if adj.layout == torch.sparse_coo:
        rows, cols = adj._indices()
    elif adj.layout == torch.sparse_csr:
        rows, cols = _ptr_to_index(adj.crow_indices()), adj.col_indices()
    else:  # CSC
        rows, cols = adj.row_indices(), _ptr_to_index(adj.ccol_indices())
    width = adj.shape[1]
    if rows.numel() == 0:
        return torch.zeros(2, 0, dtype=torch.long, device=adj.device)
    key = torch.unique(rows.long() * width + cols.long())  # sorted: row-major
    return torch.stack([key % width, key // width])


def read_edges(edge_index: object, n_src: int, n_dst: int) -> Tensor:
    """``(2, E)`` long edge list of ``edge_index`` (an edge list or a sparse adjacency), with
    sources in ``[0, n_src)`` and destinations in ``[0, n_dst)``; else a ValueError."""
    if is_adjacency(edge_index):
        return _adjacency_edges(edge_index)
    if type(edge_index).__name__ == "SparseTensor":
        raise ValueError(
            "edge_index is a torch_sparse.SparseTensor, which is not supported: pass "
            "adj_t.to_torch_sparse_csr_tensor() (the same adjacency as a torch sparse tensor) or "
            "a (2, E) edge list"
        )
    if n_src == n_dst:
        return check_edge_index(edge_index, n_src).long()
    ei = check_edge_index(edge_index, max(n_src, n_dst)).long()
    for row, n, who in ((0, n_src, "source"), (1, n_dst, "destination")):
        hi = int(ei[row].max()) if ei.shape[1] else -1
        if hi >= n:
            raise ValueError(
                f"edge_index row {row} (the {who}s) holds node id {hi}, out of range for {n} "
                f"{who} nodes (ids must be in [0, {n}))"
            )
    return ei


def row_major(edges: Tensor, n_src: int) -> Tensor:
    """``edges`` ``(2, E)`` (no duplicates) sorted by destination, then source."""
    return edges[:, torch.argsort(edges[1] * n_src + edges[0])]


def prepare_edges(
    cache: EdgeCache, edge_index: object, nodes: NodeInputs, edge_attr: Tensor | None,
    self_loops: bool, edge_dim: int | None, fill_value, dtype: torch.dtype | None, layer: str,
) -> tuple[SortedEdges, Tensor | None]:  # fmt: skip
    """``(edges, edge_attr)``: the edges used (:class:`SortedEdges`: PyG's order, self loops
    removed and one per node appended when ``self_loops``, and sorted by destination), kept in
    ``cache`` per graph; the edge features (checked: ``(E, edge_dim)`` in ``dtype``, with the
    loops' from ``fill_value``) in the sorted order."""
    n_src, n_dst = nodes.n_src, nodes.n_dst
    loops, sparse = min(n_src, n_dst), is_adjacency(edge_index)

    def read(ei):
        return read_edges(ei, n_src, n_dst)

    def make(ei: Tensor):
        keep = ei[0] != ei[1] if self_loops else None
        used = add_self_loops(ei[:, keep], None, loops)[0] if self_loops else ei
        if sparse and self_loops:  # the adjacency's order: by destination, source
            used = row_major(used, n_src)
        return SortedEdges.of(used), keep, ei

    edges, keep, ei = cache.get(edge_index, (n_src, n_dst), make, read=read)
    if edge_attr is None:
        return edges, None
    if edge_dim is None:
        raise ValueError(
            "edge_attr was given but the layer was built with edge_dim=None; build it with "
            "edge_dim=<number of edge features> to use edge features"
        )
    if sparse:
        raise ValueError(
            "edge_attr with a sparse adjacency edge_index is not supported (PyG drops it "
            "when it adds self loops); pass edge_index as a (2, E) tensor and edge_attr in "
            "its order"
        )
    ea = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
    if ea.dim() != 2 or ea.shape != (ei.shape[1], edge_dim) or not ea.is_floating_point():  # fmt: skip
        raise ValueError(
            f"edge_attr must be a float tensor of shape (num_edges, {edge_dim}) = "
            f"({ei.shape[1]}, {edge_dim}), got dtype {edge_attr.dtype} and "
            f"shape {tuple(edge_attr.shape)}"
        )
    check_dtype(ea, dtype, name="edge_attr", layer=layer)
    if keep is not None:
        _, ea = add_self_loops(ei[:, keep], ea[keep], loops, fill_value, n_dst)
    return edges, edges.sort(ea)


def attention_weights(used: Tensor, alpha: Tensor, edge_index: Tensor) -> tuple[Tensor, Tensor]:
    """PyG's second output with ``return_attention_weights``: ``(edge_index used, alpha (E,
    H))`` for an edge list; for a sparse adjacency ``adj_t`` ``(A, B)``, the adjacency used
    (self loops included) in the same layout, of shape ``(A, B, H)`` with the weights as its
    values, and the weights in the order of those values. ``used`` is row-major then."""
    if not is_adjacency(edge_index):
        return used, alpha
    A, B = edge_index.shape
    shape = (A, B, *alpha.shape[1:])
    src, dst = used[0], used[1]
    if edge_index.layout == torch.sparse_coo:
        adj = torch.sparse_coo_tensor(
            torch.stack([dst, src]), alpha, shape, is_coalesced=True, check_invariants=False
        )
    elif edge_index.layout == torch.sparse_csr:
        adj = torch.sparse_csr_tensor(
            _index_to_ptr(dst, A), src, alpha, shape, check_invariants=False
        )
    else:  # CSC: column-major values
        order = torch.argsort(src * A + dst)
        src, dst, alpha = src[order], dst[order], alpha[order]
        adj = torch.sparse_csc_tensor(
            _index_to_ptr(src, B), dst, alpha, shape, check_invariants=False
        )
    return adj, alpha
