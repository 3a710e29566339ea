"""The masks the library builds: causal, local windows, key padding, graphs, global tokens.

Each is a :class:`~attnlab.masks.base.Mask` (True = may attend) built by the lower-case
constructors of :mod:`attnlab.masks`.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from .base import Mask

__all__ = ["Causal", "Local", "Padding", "Graph", "GlobalTokens"]


class Causal(Mask):
    """Query ``i`` may attend to keys ``j <= i``; built by :func:`causal`."""

    key_fields = ()

    def mask_mod(self, b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def __repr__(self) -> str:
        return "causal()"


class Local(Mask):
    """Keys within ``window`` positions of the query (the radius); built by :func:`local`."""

    key_fields = ("window", "causal")

    def __init__(self, window: int, causal: bool = False) -> None:
        if not isinstance(window, int) or window < 0:
            raise ValueError(f"local: window must be an int >= 0, got {window!r}")
        self.window, self.causal = window, causal

    def mask_mod(self, b, h, q_idx, kv_idx):
        d = q_idx - kv_idx
        if self.causal:
            return (d >= 0) & (d <= self.window)
        return (d <= self.window) & (d >= -self.window)

    def __repr__(self) -> str:
        return f"local({self.window}, causal={self.causal})"


class Padding(Mask):
    """Key padding: sequence ``b`` has ``lengths[b]`` real keys; built by :func:`padding`."""

    uses_batch = True
    key_fields = ("lengths",)  # by content: equal lengths, one block mask

    def __init__(self, lengths: Tensor | Sequence[int]) -> None:
        lengths = torch.as_tensor(lengths)
        if lengths.dim() != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
            raise ValueError(
                "padding: lengths must be a 1-D integer tensor of shape (batch,), got "
                f"dtype {lengths.dtype} and shape {tuple(lengths.shape)}"
            )
        self.lengths = lengths
        # While torch.compile traces, every read of the lengths' values (a branch on them,
        # int()) breaks the graph, and a mask is built in each forward: skip the value checks
        # and the precomputed extremes there (None = unknown). Eager runs still do both.
        self.max_length: int | None = None
        self.min_length: int | None = None
        if torch.compiler.is_compiling():
            return
        if (lengths < 0).any():
            raise ValueError(f"padding: lengths must be >= 0, got {lengths.tolist()}")
        # Read once here: check() and live_keys() run on every call, and reading a GPU tensor
        # syncs.
        self.max_length = int(lengths.max()) if lengths.numel() else 0
        self.min_length = int(lengths.min()) if lengths.numel() else 0

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        if self.lengths.numel() != batch:
            raise ValueError(
                f"padding: lengths has {self.lengths.numel()} entries but the batch has {batch}"
            )
        if self.max_length is not None and self.max_length > kv_len:
            raise ValueError(
                f"padding: a length ({self.max_length}) exceeds the key length {kv_len}"
            )

    def mask_mod(self, b, h, q_idx, kv_idx):
        return kv_idx < self.lengths.to(kv_idx.device)[b]

    def live_keys(self, batch: int, kv_len: int) -> Tensor | None:
        if self.min_length is not None and self.min_length >= kv_len:
            return None  # no sequence is padded: nothing to zero
        # Unknown extremes (compiling): the live keys, all True if nothing is padded, are exact.
        lengths = self.lengths.view(-1, 1, 1, 1)  # (b, 1, 1, 1)
        return torch.arange(kv_len, device=lengths.device) < lengths  # (b, 1, 1, j)

    def __repr__(self) -> str:
        return f"padding({self.lengths.tolist()})"


class Graph(Mask):
    """Attention along the edges of a graph; built by :func:`graph`.

    Keyed by the edge list as given (content, not order-free): the same edges listed in another
    order only miss the cache.
    """

    key_fields = ("num_nodes", "self_loops", "edge_index")

    def __init__(self, edge_index: Tensor, num_nodes: int, self_loops: bool = True) -> None:
        edge_index = torch.as_tensor(edge_index)
        if edge_index.dim() != 2 or edge_index.shape[0] != 2 or edge_index.dtype.is_floating_point:
            raise ValueError(
                "graph: edge_index must be an integer tensor of shape (2, num_edges), got "
                f"dtype {edge_index.dtype} and shape {tuple(edge_index.shape)}"
            )
        if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
            raise ValueError(
                f"graph: edge_index holds node ids outside [0, {num_nodes}); "
                f"got range [{int(edge_index.min())}, {int(edge_index.max())}]"
            )
        self.num_nodes, self.self_loops, self.edge_index = num_nodes, self_loops, edge_index

    @property
    def adjacency(self) -> Tensor:
        """``(i, j)`` boolean, query node ``i`` may attend to key node ``j``; built on first use
        (``O(n^2)``), so the edge-list backend, which never needs it, scales to large graphs."""
        adj = self.__dict__.get("_adjacency")
        if adj is None:
            n, ei = self.num_nodes, self.edge_index
            adj = torch.zeros(n, n, dtype=torch.bool, device=ei.device)
            # Message passing convention (PyG): edge (src, dst) lets node dst attend to node src.
            adj[ei[1], ei[0]] = True
            if self.self_loops:
                adj.fill_diagonal_(True)
            self.__dict__["_adjacency"] = adj
        return adj

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        if q_len != self.num_nodes or kv_len != self.num_nodes:
            raise ValueError(
                f"graph: the mask is for {self.num_nodes} nodes, but the attention has "
                f"{q_len} queries and {kv_len} keys"
            )

    def mask_mod(self, b, h, q_idx, kv_idx):
        return self.adjacency.to(q_idx.device)[q_idx, kv_idx]

    def __repr__(self) -> str:
        # The edges as given (the distinct allowed pairs would need the O(n^2) adjacency).
        loops = ", self_loops=True" if self.self_loops else ""
        return f"graph(num_nodes={self.num_nodes}, edges={self.edge_index.shape[1]}{loops})"


class GlobalTokens(Mask):
    """Tokens that attend everywhere and are attended from everywhere; see
    :func:`global_tokens`."""

    key_fields = ("indices",)

    def __init__(self, indices: Sequence[int] | Tensor) -> None:
        t = torch.as_tensor(indices)
        if t.dim() > 1:
            raise ValueError(
                f"global_tokens: expected one 1-D list of positions (or (n,) boolean flags) "
                f"shared by the whole batch, got shape {tuple(t.shape)}; for per-example global "
                "tokens ((b, n) flags) use the longformer kernel's pattern: "
                "layer.kernel.pattern(flags)"
            )
        # (n,) boolean flags name the flagged positions; anything else is a list of positions
        idx = t.nonzero().flatten() if t.dtype == torch.bool else t.to(torch.long).flatten()
        if (idx < 0).any():
            raise ValueError(f"global_tokens: indices must be >= 0, got {idx.tolist()}")
        self.indices = idx

    def mask_mod(self, b, h, q_idx, kv_idx):
        idx = self.indices.to(q_idx.device)
        q_global = (q_idx.unsqueeze(-1) == idx).any(-1)
        kv_global = (kv_idx.unsqueeze(-1) == idx).any(-1)
        return q_global | kv_global

    def __repr__(self) -> str:
        return f"global_tokens({self.indices.tolist()})"
