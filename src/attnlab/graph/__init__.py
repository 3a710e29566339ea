"""Graphs: attention only along edges.

* :class:`GATConv`, :class:`GATv2Conv`, :class:`GCNConv`: message-passing layers with PyTorch
  Geometric's arguments and parameter layout (``from_pyg`` copies a PyG layer), computed on the
  edge list in ``O(E * heads)`` memory.
* :func:`edge_softmax`, :func:`edge_aggregate`, :func:`edge_attention`: the edge-list kernel
  (defined in :mod:`attnlab.backends.edge_ops`, which the ``edges`` backend also runs).
* :mod:`.reorder`: reverse Cuthill-McKee node order and block density (for block-sparse flex).
* :mod:`.sampling`: neighbour sampling (GraphSAGE) for mini-batches of a graph too large for
  full-batch training.

Convention (PyG's): ``edge_index`` is a ``(2, E)`` long tensor; edge ``(src, dst)`` lets node
``dst`` attend to (receive a message from) node ``src``.
"""

from ..backends.edge_ops import (
    EdgeAttentionOutput,
    check_edge_index,
    edge_aggregate,
    edge_attention,
    edge_softmax,
    in_degree,
)
from .edges import add_remaining_self_loops, add_self_loops, check_node_features, remove_self_loops
from .gat import GATConv, GATv2Conv
from .gcn import GCNConv, gcn_norm
from .reorder import BlockDensity, block_density, permute_edges, rcm_order
from .sampling import SampledSubgraph, sample_neighbors

__all__ = [
    "GATConv",
    "GATv2Conv",
    "GCNConv",
    "gcn_norm",
    "edge_softmax",
    "edge_aggregate",
    "edge_attention",
    "EdgeAttentionOutput",
    "check_edge_index",
    "check_node_features",
    "in_degree",
    "add_self_loops",
    "add_remaining_self_loops",
    "remove_self_loops",
    "rcm_order",
    "permute_edges",
    "block_density",
    "BlockDensity",
    "sample_neighbors",
    "SampledSubgraph",
]
