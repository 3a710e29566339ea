r"""Graph convolution (Kipf & Welling 2017) on the same edge-list machinery as GAT: the
baseline whose weights are fixed by the degrees instead of learned by attention.

.. math::
    x'_i = \sum_{j \to i} \frac{w_{ji}}{\sqrt{\hat d_j \hat d_i}}\, \Theta x_j + b, \qquad
    \hat d_i = \sum_{j \to i} w_{ji},

over the edges plus one self loop per node (weight 1 unless the graph has one). Equal to PyG's
``GCNConv`` given its weights.

Legend: ``n`` nodes, ``E`` edges, ``F`` input features, ``C`` output channels.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..backends.edge_ops import edge_aggregate
from .edges import EdgeCache, SortedEdges, add_remaining_self_loops, check_node_features
from .gat import _glorot

__all__ = ["GCNConv", "gcn_norm"]


def gcn_norm(
    edge_index: Tensor, edge_weight: Tensor | None, num_nodes: int, *, add_self_loops: bool = True,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:  # fmt: skip
    r"""The symmetric normalisation :math:`w_{ji} / \sqrt{\hat d_j \hat d_i}`: ``(edge_index
    used, weights (E',))``; a node of degree 0 contributes 0 (not inf)."""
    if add_self_loops:
        edge_index, edge_weight = add_remaining_self_loops(edge_index, edge_weight, num_nodes)
    src, dst = edge_index[0], edge_index[1]
    if edge_weight is None:
        edge_weight = torch.ones(src.shape[0], dtype=dtype, device=src.device)
    deg = edge_weight.new_zeros(num_nodes).index_add(0, dst, edge_weight)
    inv = deg.pow(-0.5)
    inv = inv.masked_fill(inv == float("inf"), 0.0)
    return edge_index, inv.index_select(0, src) * edge_weight * inv.index_select(0, dst)


def _check_edge_weight(w: object, num_edges: int) -> None:
    if isinstance(w, Tensor) and w.is_floating_point() and w.shape == (num_edges,):
        return
    got = f"dtype {w.dtype}, shape {tuple(w.shape)}" if isinstance(w, Tensor) else type(w).__name__
    raise ValueError(
        f"edge_weight must be a float tensor of shape (num_edges,) = ({num_edges},), got {got}"
    )


class GCNConv(nn.Module):
    r"""Graph convolution, equal to PyG's ``GCNConv`` given its weights (see the module
    docstring for the maths).

    Args:
        in_channels: input features ``F`` per node.
        out_channels: output channels ``C``.
        add_self_loops: give every node one self loop (an existing one keeps its weight).
        normalize: apply the symmetric degree normalisation (else use the weights as given).
        bias: learn an output bias.

    Parameters (PyG's names): ``lin.weight`` ``(C, F)`` (:math:`\Theta`, no bias), ``bias``
    ``(C)``.

    Shapes:
        x ``(n, F)``, dense or sparse COO (``nn.Linear`` multiplies it as it is);
        edge_index ``(2, E)`` long; edge_weight ``(E,)`` float (any float dtype, used in
        ``x``'s) or None (ones). ``x`` in the layer's dtype. Output ``(n, C)``; ``(0, C)`` for
        an empty graph.
    """

    def __init__(self, in_channels: int, out_channels: int, add_self_loops: bool = True,
                 normalize: bool = True, bias: bool = True) -> None:  # fmt: skip
        super().__init__()
        for name, val in (("in_channels", in_channels), ("out_channels", out_channels)):
            if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
                raise ValueError(f"{name} must be a positive int, got {val!r}")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.add_self_loops, self.normalize = add_self_loops, normalize
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels)) if bias else None
        self._edges = EdgeCache()
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's initialisation: Glorot weight, zero bias."""
        _glorot(self.lin.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    @classmethod
    def from_pyg(cls, conv) -> GCNConv:
        """A layer equal to PyG's ``GCNConv`` ``conv`` (its arguments, a copy of its weights)."""
        if type(conv).__name__ != "GCNConv":
            raise ValueError(f"GCNConv.from_pyg expects a torch_geometric GCNConv, got {type(conv).__name__}")  # fmt: skip
        if getattr(conv, "improved", False):
            raise ValueError("GCNConv.from_pyg: improved=True (self-loop weight 2) is not supported")  # fmt: skip
        layer = cls(conv.in_channels, conv.out_channels, conv.add_self_loops, conv.normalize,
                    conv.bias is not None)  # fmt: skip
        layer.to(device=conv.lin.weight.device, dtype=conv.lin.weight.dtype)
        layer.load_state_dict(conv.state_dict())
        return layer

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None = None) -> Tensor:
        """See the class docstring for the maths and shapes."""
        check_node_features(x, self.in_channels, dtype=self.lin.weight.dtype, layer="GCNConv")
        n = x.shape[0]

        def make(ei: Tensor):
            if not self.normalize:
                return ei, None
            used, w = gcn_norm(ei, None, n, add_self_loops=self.add_self_loops, dtype=x.dtype)
            edges = SortedEdges.of(used)  # destination-major: sequential scatters
            return torch.stack([edges.src, edges.dst]), edges.sort(w)

        used, w = self._edges.get(edge_index, n, make, (x.dtype,))  # the graph's weights
        if edge_weight is not None:
            _check_edge_weight(edge_weight, edge_index.shape[1])
            # The weights are data, not a parameter's input: any float dtype, used in x's (a
            # float64 layer normalises in float64 whatever the weights came in).
            edge_weight = edge_weight.to(x.dtype)
        if edge_weight is not None and self.normalize:
            used, w = gcn_norm(edge_index, edge_weight, n, add_self_loops=self.add_self_loops)
        elif not self.normalize:
            w = edge_weight if edge_weight is not None else x.new_ones(used.shape[1])
        h = self.lin(x)  # (n, C)
        out = edge_aggregate(h, w.to(h.dtype), used[0], used[1], n)  # (n, C)
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}"
