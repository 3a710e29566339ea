r"""Graph attention layers: GAT (Velickovic et al. 2018) and GATv2 (Brody et al. 2022), on the
edge list, with PyTorch Geometric's parameter layout so that ``from_pyg`` copies a PyG layer.

Attention restricted to the edges is the lecture's additive score on a graph: node ``i`` attends
to its in-neighbours ``j`` (edges ``(j, i)``) with

.. math::
    \text{GAT:}\quad e_{ij} = \mathrm{LeakyReLU}\big(a_s^\top W x_j + a_d^\top W x_i
        + a_e^\top W_e f_{ji}\big), \qquad
    \text{GATv2:}\quad e_{ij} = a^\top \mathrm{LeakyReLU}\big(W_s x_j + W_d x_i + W_e f_{ji}\big),

    \alpha_{ij} = \mathrm{softmax}_{j \to i}(e_{ij}), \qquad
    x'_i = \big\Vert_{k=1}^{H} \sum_{j \to i} \alpha^k_{ij} W^k x_j + b
    \quad(\text{or the mean over the } H \text{ heads}).

GAT's score splits into a term of the source and a term of the destination, so both are
computed once per node (``(n, H)``) and only added per edge; GATv2's LeakyReLU sits between the
sum and ``a``, so it needs the ``(E, H, C)`` sum. The segment softmax and the scatter back are
:func:`attnlab.graph.edge_softmax` and :func:`attnlab.graph.edge_aggregate`: ``O(E * H * C)``.

Legend: ``n`` nodes, ``E`` edges (self loops included), ``H`` heads, ``C`` channels per head,
``F`` input features.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..backends.edge_ops import edge_aggregate, edge_softmax
from ..dropout import dropout
from .edges import EdgeCache, SortedEdges, add_self_loops, check_dtype, check_node_features

__all__ = ["GATConv", "GATv2Conv"]


def _glorot(t: Tensor) -> None:
    """PyG's ``glorot``: uniform in ``±sqrt(6 / (fan_in + fan_out))`` of the last two dims."""
    bound = math.sqrt(6.0 / (t.size(-2) + t.size(-1)))
    with torch.no_grad():
        t.uniform_(-bound, bound)


class _GraphAttention(nn.Module):
    """What GAT and GATv2 share: arguments, self loops, edge features, heads, bias, ``from_pyg``."""

    _pyg_class = ""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        heads: int = 1,
        concat: bool = True,
        negative_slope: float = 0.2,
        dropout: float = 0.0,
        add_self_loops: bool = True,
        edge_dim: int | None = None,
        bias: bool = True,
        fill_value: float | str = "mean",
    ) -> None:
        super().__init__()
        for name, val in (("in_channels", in_channels), ("out_channels", out_channels), ("heads", heads)):  # fmt: skip
            if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
                raise ValueError(f"{name} must be a positive int, got {val!r}")
        if edge_dim is not None and (not isinstance(edge_dim, int) or edge_dim <= 0):
            raise ValueError(f"edge_dim must be a positive int or None, got {edge_dim!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, negative_slope, dropout
        self.add_self_loops, self.edge_dim, self.fill_value = add_self_loops, edge_dim, fill_value
        total = out_channels * (heads if concat else 1)
        self.bias = nn.Parameter(torch.zeros(total)) if bias else None
        self._edges = EdgeCache()

    # ---- edges -------------------------------------------------------------------------------
    def _prepare(self, edge_index: Tensor, n: int, edge_attr: Tensor | None):
        """``(edges, edge_attr)``: the edges used (:class:`SortedEdges`: PyG's order, self
        loops removed and one per node appended when ``add_self_loops``, and sorted by
        destination), cached per graph; the edge features in the sorted order."""

        def make(ei: Tensor):
            keep = ei[0] != ei[1] if self.add_self_loops else None
            used = add_self_loops(ei[:, keep], None, n)[0] if self.add_self_loops else ei
            return SortedEdges.of(used), keep

        edges, keep = self._edges.get(edge_index, n, make)
        if edge_attr is None:
            return edges, None
        if self.edge_dim is None:
            raise ValueError(
                "edge_attr was given but the layer was built with edge_dim=None; build it with "
                "edge_dim=<number of edge features> to use edge features"
            )
        ea = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        if ea.dim() != 2 or ea.shape != (edge_index.shape[1], self.edge_dim) or not ea.is_floating_point():  # fmt: skip
            raise ValueError(
                f"edge_attr must be a float tensor of shape (num_edges, {self.edge_dim}) = "
                f"({edge_index.shape[1]}, {self.edge_dim}), got dtype {edge_attr.dtype} and "
                f"shape {tuple(edge_attr.shape)}"
            )
        check_dtype(ea, self.lin_edge.weight.dtype, name="edge_attr", layer=type(self).__name__)
        if keep is not None:
            _, ea = add_self_loops(edge_index[:, keep], ea[keep], n, self.fill_value)
        return edges, edges.sort(ea)

    def _check_features(self, x: Tensor, weight: Tensor) -> None:
        """``x`` ``(n, F)`` float in the dtype of ``weight`` (the layer's), or a ValueError."""
        check_node_features(x, self.in_channels, dtype=weight.dtype, layer=type(self).__name__)

    def _edge_features(self, edge_attr: Tensor) -> Tensor:
        return self.lin_edge(edge_attr).view(-1, self.heads, self.out_channels)  # (E, H, C)

    def _finish(self, out: Tensor, edges: SortedEdges, alpha: Tensor, weights: bool):
        """Heads concatenated or averaged, bias added, the weights appended (in the order of
        the returned edge index, PyG's) when asked for."""
        # H*C spelt out, not -1: an empty graph (n = 0) has nothing to infer -1 from.
        hc = self.heads * self.out_channels
        out = out.reshape(out.shape[0], hc) if self.concat else out.mean(dim=1)  # (n, H*C | C)
        if self.bias is not None:
            out = out + self.bias
        return (out, (edges.used, edges.unsort(alpha))) if weights else out

    # ---- PyG ---------------------------------------------------------------------------------
    @classmethod
    def _pyg_kwargs(cls, conv) -> dict:
        if not isinstance(conv.in_channels, int) or getattr(conv, "res", None) is not None:
            raise ValueError(
                f"{cls.__name__}.from_pyg copies layers with int in_channels and no residual; "
                f"got in_channels={conv.in_channels!r}, residual={getattr(conv, 'residual', False)}"
            )
        return dict(
            in_channels=conv.in_channels, out_channels=conv.out_channels, heads=conv.heads,
            concat=conv.concat, negative_slope=conv.negative_slope, dropout=conv.dropout,
            add_self_loops=conv.add_self_loops, edge_dim=conv.edge_dim,
            bias=conv.bias is not None, fill_value=conv.fill_value,
        )  # fmt: skip

    @classmethod
    def from_pyg(cls, conv) -> _GraphAttention:
        """A layer equal to PyG's ``conv`` (same arguments, a copy of its weights).

        The parameter names and shapes are PyG's (see the class docstring), so this is
        ``load_state_dict(conv.state_dict())`` on a layer built with ``conv``'s arguments.
        """
        if type(conv).__name__ != cls._pyg_class:
            raise ValueError(f"{cls.__name__}.from_pyg expects a torch_geometric {cls._pyg_class}, got {type(conv).__name__}")  # fmt: skip
        layer = cls(**cls._pyg_kwargs(conv))
        ref = next(iter(conv.parameters()))
        layer.to(device=ref.device, dtype=ref.dtype)
        layer.load_state_dict(conv.state_dict())
        layer.train(conv.training)
        return layer

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, heads={self.heads}, concat={self.concat}"


class GATConv(_GraphAttention):
    r"""Graph attention (Velickovic et al. 2018), equal to PyG's ``GATConv`` given its weights.

    .. math::
        x'_i = \big\Vert_{k=1}^{H} \sum_{j \in N(i) \cup \{i\}} \alpha^k_{ij} \Theta^k x_j,
        \quad
        \alpha^k_{ij} = \mathrm{softmax}_j\,\mathrm{LeakyReLU}\big(a_s^{k\top}\Theta^k x_j
        + a_d^{k\top}\Theta^k x_i + a_e^{k\top}\Theta_e^k f_{ji}\big).

    Args:
        in_channels: input features ``F`` per node.
        out_channels: channels ``C`` per head.
        heads: number of heads ``H``.
        concat: concatenate the heads (``H * C`` outputs) or average them (``C``).
        negative_slope: LeakyReLU's slope for negative scores.
        dropout: dropout on the attention weights, in training mode.
        add_self_loops: remove existing loops and add one per node (PyG's order: loops last).
        edge_dim: edge feature size (None: no edge features).
        bias: learn an output bias.
        fill_value: edge features of the added loops: ``"mean"`` of the node's incoming edge
            features (PyG's default), another reduction name, or a number.

    Parameters (PyG's names and shapes): ``lin.weight`` ``(H*C, F)`` (:math:`\Theta`, no bias),
    ``att_src``, ``att_dst`` ``(1, H, C)``, ``lin_edge.weight`` ``(H*C, edge_dim)`` and
    ``att_edge`` ``(1, H, C)`` with edge features, ``bias`` ``(H*C)`` or ``(C)``.

    Shapes:
        x ``(n, F)``, dense or sparse COO (``nn.Linear`` multiplies it as it is);
        edge_index ``(2, E)`` long, edge ``(j, i)`` = ``j`` sends to ``i``; edge_attr
        ``(E, edge_dim)`` or ``(E,)``; ``x`` and ``edge_attr`` in the layer's dtype. Output
        ``(n, H*C)`` or ``(n, C)`` (``n = 0``, an empty graph, included); with
        ``return_attention_weights=True``, ``(out, (edge_index_used, alpha (E', H)))``.
    """

    _pyg_class = "GATConv"

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: int | None = None, bias: bool = True,
                 *, fill_value: float | str = "mean") -> None:  # fmt: skip
        super().__init__(
            in_channels, out_channels, heads, concat, negative_slope, dropout, add_self_loops,
            edge_dim, bias, fill_value,
        )  # fmt: skip
        hc = heads * out_channels
        self.lin = nn.Linear(in_channels, hc, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_channels))
        if edge_dim is not None:
            self.lin_edge = nn.Linear(edge_dim, hc, bias=False)
            self.att_edge = nn.Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge, self.att_edge = None, None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's initialisation: Glorot weights and attention vectors, zero bias."""
        for p in (self.lin.weight, self.att_src, self.att_dst):
            _glorot(p)
        if self.lin_edge is not None:
            _glorot(self.lin_edge.weight)
            _glorot(self.att_edge)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def _attention_matrix(self) -> Tensor:
        """``(H*C, 2H)``: column ``k`` holds ``att_src[k]`` in rows ``k*C:(k+1)*C``, column
        ``H + k`` holds ``att_dst[k]`` there, zeros elsewhere."""
        H, C = self.heads, self.out_channels
        att = torch.cat([self.att_src, self.att_dst], dim=0)  # (2, H, C)
        eye = torch.eye(H, dtype=att.dtype, device=att.device)  # (H, H)
        # [h, c, s, k] = att[s, h, c] * (h == k), then (h, c) -> rows and (s, k) -> columns.
        block = att.permute(1, 2, 0).unsqueeze(-1) * eye.view(H, 1, 1, H)  # (H, C, 2, H)
        return block.reshape(H * C, 2 * H)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None,
                return_attention_weights: bool = False):  # fmt: skip
        """See the class docstring for the maths and shapes."""
        self._check_features(x, self.lin.weight)
        n, H, C = x.shape[0], self.heads, self.out_channels
        edges, ea = self._prepare(edge_index, n, edge_attr)
        src, dst = edges.src, edges.dst
        h = self.lin(x).view(n, H, C)  # (n, H, C)
        # The score splits into source and destination terms: two (n, H) vectors, not (E, H, C),
        # both from one (n, H*C) x (H*C, 2H) product with the attention vectors on the block
        # diagonal (one matmul instead of two broadcast products and sums over C).
        a_both = h.view(n, H * C) @ self._attention_matrix()  # (n, 2H)
        a_src, a_dst = a_both[:, :H], a_both[:, H:]  # (n, H) each
        alpha = a_src.index_select(0, src) + a_dst.index_select(0, dst)  # (E, H)
        if ea is not None:
            alpha = alpha + (self._edge_features(ea) * self.att_edge).sum(-1)
        alpha = edge_softmax(F.leaky_relu(alpha, self.negative_slope), dst, n)
        alpha = dropout(alpha, self.dropout, self.training)
        out = edge_aggregate(h, alpha, src, dst, n)  # (n, H, C)
        return self._finish(out, edges, alpha, return_attention_weights)


class GATv2Conv(_GraphAttention):
    r"""GATv2 (Brody et al. 2022: "How attentive are graph attention networks?"), equal to
    PyG's ``GATv2Conv`` given its weights.

    .. math::
        \alpha^k_{ij} = \mathrm{softmax}_j\, a^{k\top} \mathrm{LeakyReLU}\big(
        \Theta_s^k x_j + \Theta_d^k x_i + \Theta_e^k f_{ji}\big), \qquad
        x'_i = \big\Vert_k \sum_j \alpha^k_{ij} \Theta_s^k x_j .

    Applying ``a`` after the nonlinearity makes the attention *dynamic* (the ranking of the
    neighbours can depend on the query node), which GAT's cannot.

    Args:
        share_weights: one matrix for sources and destinations (:math:`\Theta_s = \Theta_d`).
        the others: as :class:`GATConv`.

    Parameters (PyG's names): ``lin_l`` (:math:`\Theta_s`, ``(H*C, F)`` weight and ``(H*C)``
    bias when ``bias``), ``lin_r`` (:math:`\Theta_d`, the same module as ``lin_l`` when
    ``share_weights``), ``att`` ``(1, H, C)``, ``lin_edge.weight`` ``(H*C, edge_dim)``,
    ``bias`` ``(H*C)`` or ``(C)``.

    Shapes: as :class:`GATConv`.
    """

    _pyg_class = "GATv2Conv"

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: int | None = None, bias: bool = True, share_weights: bool = False,
                 *, fill_value: float | str = "mean") -> None:  # fmt: skip
        super().__init__(
            in_channels, out_channels, heads, concat, negative_slope, dropout, add_self_loops,
            edge_dim, bias, fill_value,
        )  # fmt: skip
        hc = heads * out_channels
        self.share_weights = share_weights
        self.lin_l = nn.Linear(in_channels, hc, bias=bias)
        self.lin_r = self.lin_l if share_weights else nn.Linear(in_channels, hc, bias=bias)
        self.att = nn.Parameter(torch.empty(1, heads, out_channels))
        self.lin_edge = nn.Linear(edge_dim, hc, bias=False) if edge_dim is not None else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's initialisation: Glorot weights and attention vector, zero biases."""
        for lin in (self.lin_l, self.lin_r, self.lin_edge):
            if lin is not None:
                _glorot(lin.weight)
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)
        _glorot(self.att)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    @classmethod
    def _pyg_kwargs(cls, conv) -> dict:
        return super()._pyg_kwargs(conv) | {"share_weights": conv.share_weights}

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None,
                return_attention_weights: bool = False):  # fmt: skip
        """See the class docstring for the maths and shapes."""
        self._check_features(x, self.lin_l.weight)
        n, H, C = x.shape[0], self.heads, self.out_channels
        edges, ea = self._prepare(edge_index, n, edge_attr)
        src, dst = edges.src, edges.dst
        x_l = self.lin_l(x).view(n, H, C)  # (n, H, C): sources
        x_r = x_l if self.share_weights else self.lin_r(x).view(n, H, C)  # destinations
        z = x_l.index_select(0, src) + x_r.index_select(0, dst)  # (E, H, C)
        if ea is not None:
            z = z + self._edge_features(ea)
        alpha = (F.leaky_relu(z, self.negative_slope) * self.att).sum(-1)  # (E, H)
        alpha = edge_softmax(alpha, dst, n)
        alpha = dropout(alpha, self.dropout, self.training)
        out = edge_aggregate(x_l, alpha, src, dst, n)  # (n, H, C)
        return self._finish(out, edges, alpha, return_attention_weights)
