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

The layers are drop-ins for PyG's: the same constructor arguments (bipartite ``in_channels``,
``residual``, ``share_weights``) and inputs (features or a ``(x_src, x_dst)`` pair, an edge list
or a torch sparse adjacency, ``size``), which :mod:`.gat_inputs` brings to one form; what they
refuse, and why, is in :class:`GATConv`'s docstring.

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
from .edges import EdgeCache, SortedEdges
from .gat_inputs import (
    NodeInputs,
    attention_weights,
    check_in_channels,
    check_message_passing_kwargs,
    node_inputs,
    prepare_edges,
)

__all__ = ["GATConv", "GATv2Conv"]


def _glorot(t: Tensor) -> None:
    """PyG's ``glorot``: uniform in ``±sqrt(6 / (fan_in + fan_out))`` of the last two dims."""
    bound = math.sqrt(6.0 / (t.size(-2) + t.size(-1)))
    with torch.no_grad():
        t.uniform_(-bound, bound)


class _GraphAttention(nn.Module):
    """What GAT and GATv2 share: arguments, self loops, edge features, heads, residual, bias,
    the attention weights' format, ``from_pyg``."""

    _pyg_class = ""

    def __init__(
        self, in_channels: int | tuple[int, int], out_channels: int, heads: int, concat: bool,
        negative_slope: float, dropout: float, add_self_loops: bool, edge_dim: int | None,
        fill_value: float | Tensor | str, bias: bool, residual: bool, kwargs: dict,
    ) -> None:  # fmt: skip
        super().__init__()
        check_message_passing_kwargs(type(self).__name__, kwargs)
        self._in = check_in_channels(in_channels)  # (source features, destination features)
        for name, val in (("out_channels", out_channels), ("heads", heads)):
            if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
                raise ValueError(f"{name} must be a positive int, got {val!r}")
        if edge_dim is not None and (not isinstance(edge_dim, int) or edge_dim <= 0):
            raise ValueError(f"edge_dim must be a positive int or None, got {edge_dim!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.concat, self.negative_slope, self.dropout = concat, negative_slope, dropout
        self.add_self_loops, self.edge_dim, self.fill_value = add_self_loops, edge_dim, fill_value
        self.residual = residual
        total = out_channels * (heads if concat else 1)
        self.res = nn.Linear(self._in[1], total, bias=False) if residual else None
        self.bias = nn.Parameter(torch.zeros(total)) if bias else None
        self._edges = EdgeCache()

    def _prepare(self, edge_index, nodes: NodeInputs, edge_attr: Tensor | None):
        """``(edges, edge_attr)`` of :func:`.gat_inputs.prepare_edges`, cached per graph."""
        dtype = None if self.lin_edge is None else self.lin_edge.weight.dtype
        return prepare_edges(
            self._edges, edge_index, nodes, edge_attr, self.add_self_loops, self.edge_dim,
            self.fill_value, dtype, type(self).__name__,
        )  # fmt: skip

    def _edge_features(self, edge_attr: Tensor) -> Tensor:
        return self.lin_edge(edge_attr).view(-1, self.heads, self.out_channels)  # (E, H, C)

    def _finish(self, out: Tensor, nodes: NodeInputs, edges: SortedEdges, alpha: Tensor,
                edge_index: Tensor, weights) -> Tensor | tuple:  # fmt: skip
        """Heads concatenated or averaged, residual and bias added, the weights appended (in
        PyG's format, see :func:`.gat_inputs.attention_weights`) when asked for."""
        # H*C spelt out, not -1: an empty graph (n = 0) has nothing to infer -1 from.
        hc = self.heads * self.out_channels
        out = out.reshape(out.shape[0], hc) if self.concat else out.mean(dim=1)  # (n, H*C | C)
        if self.res is not None and nodes.x_dst is not None:  # PyG: no x_dst, no residual
            out = out + self.res(nodes.x_dst)
        if self.bias is not None:
            out = out + self.bias
        if not weights:
            return out
        return out, attention_weights(edges.used, edges.unsort(alpha), edge_index)

    def __prepare_scriptable__(self):
        """``torch.jit.script`` calls this first (on submodules too): refuse with the reason."""
        raise RuntimeError(
            f"{type(self).__name__} cannot be compiled with torch.jit.script: its forward takes "
            "a tensor or a pair of them and a sparse or dense edge_index, caches the prepared "
            "edge list and runs a custom autograd softmax, none of which TorchScript compiles. "
            "Run the layer eagerly or compile it with torch.compile(layer)"
        )

    # ---- PyG ---------------------------------------------------------------------------------
    @classmethod
    def _pyg_kwargs(cls, conv) -> dict:
        return dict(
            in_channels=conv.in_channels, out_channels=conv.out_channels, heads=conv.heads,
            concat=conv.concat, negative_slope=conv.negative_slope, dropout=conv.dropout,
            add_self_loops=conv.add_self_loops, edge_dim=conv.edge_dim,
            fill_value=conv.fill_value, bias=conv.bias is not None, residual=conv.residual,
            aggr=conv.aggr, flow=conv.flow,
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

    def __repr__(self) -> str:  # PyG's
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"  # fmt: skip


class GATConv(_GraphAttention):
    r"""Graph attention (Velickovic et al. 2018), equal to PyG's ``GATConv`` given its weights
    and a drop-in for it: the same arguments, inputs and outputs.

    .. math::
        x'_i = \big\Vert_{k=1}^{H} \sum_{j \in N(i) \cup \{i\}} \alpha^k_{ij} \Theta^k_s x_j
        \;(+\, \Theta_r x_i) + b,
        \quad
        \alpha^k_{ij} = \mathrm{softmax}_j\,\mathrm{LeakyReLU}\big(a_s^{k\top}\Theta^k_s x_j
        + a_d^{k\top}\Theta^k_d x_i + a_e^{k\top}\Theta_e^k f_{ji}\big),

    with :math:`\Theta_s = \Theta_d` unless the layer is bipartite.

    Args:
        in_channels: input features ``F`` per node (int), or ``(F_src, F_dst)`` for a
            bipartite graph (separate source and destination projections).
        out_channels: channels ``C`` per head.
        heads: number of heads ``H`` (default 1).
        concat: concatenate the heads (``H * C`` outputs) or average them (``C``) (default
            True).
        negative_slope: LeakyReLU's slope for negative scores (default 0.2).
        dropout: dropout on the attention weights, in training mode (default 0.0).
        add_self_loops: remove existing loops and add one per node, ``min(n_src, n_dst)`` on a
            bipartite graph (PyG's order: loops last) (default True).
        edge_dim: edge feature size (default None: no edge features).
        fill_value: edge features of the added loops: ``"mean"`` of the node's incoming edge
            features (the default), another reduction (``"add"``, ``"max"``, ``"min"``,
            ``"mul"``), a number or a tensor.
        bias: learn an output bias (default True).
        residual: add a learnt skip connection :math:`\Theta_r x_i` of the destination
            features (default False).
        **kwargs: PyG's ``MessagePassing`` keywords; only ``aggr="add"``,
            ``flow="source_to_target"`` and ``decomposed_layers`` (ignored) are accepted.

    Parameters (PyG's names and shapes): ``lin.weight`` ``(H*C, F)`` (:math:`\Theta`, no
    bias), or ``lin_src.weight`` ``(H*C, F_src)`` and ``lin_dst.weight`` ``(H*C, F_dst)`` when
    bipartite; ``att_src``, ``att_dst`` ``(1, H, C)``; ``lin_edge.weight`` ``(H*C, edge_dim)``
    and ``att_edge`` ``(1, H, C)`` with edge features; ``res.weight`` ``(H*C | C, F_dst)``
    with ``residual``; ``bias`` ``(H*C)`` or ``(C)``.

    Shapes:
        x ``(n, F)``, dense or sparse COO (``nn.Linear`` multiplies it as it is), or a pair
        ``(x_src (n_src, F_src), x_dst (n_dst, F_dst))``, ``x_dst`` possibly None (no
        destination term in the score, no residual; ``n_dst`` from ``size`` or the adjacency,
        else ``n_src``). edge_index ``(2, E)`` integer, edge ``(j, i)`` = ``j`` sends to
        ``i``, or a torch sparse adjacency ``adj_t`` ``(n_dst, n_src)`` (COO, CSR or CSC;
        ``adj_t[i, j]`` = edge ``j -> i``, as ``adj.t()`` in PyG; see
        :mod:`.gat_inputs`). edge_attr ``(E, edge_dim)`` or ``(E,)``; ``x`` and ``edge_attr`` in
        the layer's dtype. size ``(n_src, n_dst)`` or None. Output ``(n_dst, H*C)`` or
        ``(n_dst, C)`` (an empty graph, ``n = 0``, included). With a true
        ``return_attention_weights``, ``(out, (edge_index_used (2, E'), alpha (E', H)))``, or
        for a sparse adjacency ``(out, (adj_used (n_dst, n_src, H) with the weights as values,
        alpha in their order))``, ``adj_used`` in the input's layout.

    Differences from PyG (2.8.1), each refused with a message that says what to pass instead:
    ``torch.jit.script`` of the layer or of a module holding it (use it eagerly or with
    ``torch.compile``); a ``torch_sparse.SparseTensor`` edge_index (pass
    ``adj_t.to_torch_sparse_csr_tensor()``); ``edge_attr`` with a sparse adjacency (PyG drops it
    silently when adding self loops); ``in_channels=-1`` (lazy sizes); other ``MessagePassing``
    keywords. Accepted beyond PyG: a CSC or uncoalesced COO adjacency; edge features with a
    reduction ``fill_value`` on a bipartite graph with more destinations than sources (PyG
    fails with an index error).
    """

    _pyg_class = "GATConv"

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: float | Tensor | str = "mean", bias: bool = True,
                 residual: bool = False, **kwargs) -> None:  # fmt: skip
        super().__init__(
            in_channels, out_channels, heads, concat, negative_slope, dropout, add_self_loops,
            edge_dim, fill_value, bias, residual, kwargs,
        )  # fmt: skip
        hc = heads * out_channels
        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = nn.Linear(in_channels, hc, bias=False)
        else:  # bipartite: a projection for each side
            self.lin_src = nn.Linear(self._in[0], hc, bias=False)
            self.lin_dst = nn.Linear(self._in[1], hc, bias=False)
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
        lins = [self.lin] if self.lin is not None else [self.lin_src, self.lin_dst]
        for p in (*(lin.weight for lin in lins), self.att_src, self.att_dst):
            _glorot(p)
        if self.lin_edge is not None:
            _glorot(self.lin_edge.weight)
            _glorot(self.att_edge)
        if self.res is not None:
            _glorot(self.res.weight)
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

    def forward(self, x: Tensor | tuple[Tensor, Tensor | None], edge_index: Tensor,
                edge_attr: Tensor | None = None, size: tuple[int, int] | None = None,
                return_attention_weights: bool | None = None):  # fmt: skip
        """See the class docstring for the maths and shapes."""
        lin_src = self.lin if self.lin is not None else self.lin_src
        lin_dst = self.lin if self.lin is not None else self.lin_dst
        nodes = node_inputs(x, edge_index, size, lin_src.in_features, lin_dst.in_features,
                            lin_src.weight.dtype, type(self).__name__)  # fmt: skip
        n, H, C = nodes.n_src, self.heads, self.out_channels
        edges, ea = self._prepare(edge_index, nodes, edge_attr)
        src, dst = edges.src, edges.dst
        h = lin_src(nodes.x_src).view(n, H, C)  # (n_src, H, C)
        # The score splits into source and destination terms: two (n, H) vectors, not (E, H, C),
        # both from one (n, H*C) x (H*C, 2H) product with the attention vectors on the block
        # diagonal (one matmul instead of two broadcast products and sums over C).
        att = self._attention_matrix()  # (H*C, 2H)
        if nodes.one and self.lin is not None:  # one projection of the same nodes: one product
            a_both = h.view(n, H * C) @ att  # (n, 2H)
            a_src, a_dst = a_both[:, :H], a_both[:, H:]  # (n, H) each
        else:
            a_src, a_dst = h.view(n, H * C) @ att[:, :H], None  # (n_src, H)
            if nodes.x_dst is not None:
                a_dst = lin_dst(nodes.x_dst) @ att[:, H:]  # (n_dst, H)
        alpha = a_src.index_select(0, src)  # (E, H)
        if a_dst is not None:
            alpha = alpha + a_dst.index_select(0, dst)
        if ea is not None:
            alpha = alpha + (self._edge_features(ea) * self.att_edge).sum(-1)
        alpha = edge_softmax(F.leaky_relu(alpha, self.negative_slope), dst, nodes.n_dst)
        alpha = dropout(alpha, self.dropout, self.training)
        out = edge_aggregate(h, alpha, src, dst, nodes.n_dst)  # (n_dst, H, C)
        return self._finish(out, nodes, edges, alpha, edge_index, return_attention_weights)


class GATv2Conv(_GraphAttention):
    r"""GATv2 (Brody et al. 2022: "How attentive are graph attention networks?"), equal to
    PyG's ``GATv2Conv`` given its weights and a drop-in for it.

    .. math::
        \alpha^k_{ij} = \mathrm{softmax}_j\, a^{k\top} \mathrm{LeakyReLU}\big(
        \Theta_s^k x_j + \Theta_d^k x_i + \Theta_e^k f_{ji}\big), \qquad
        x'_i = \big\Vert_k \sum_j \alpha^k_{ij} \Theta_s^k x_j \;(+\, \Theta_r x_i) + b.

    Applying ``a`` after the nonlinearity makes the attention *dynamic* (the ranking of the
    neighbours can depend on the query node), which GAT's cannot.

    Args:
        share_weights: one matrix for sources and destinations (:math:`\Theta_s = \Theta_d`)
            (default False).

    The other arguments (``in_channels``, ``out_channels``, ``heads``, ``concat``,
    ``negative_slope``, ``dropout``, ``add_self_loops``, ``edge_dim``, ``fill_value``, ``bias``,
    ``residual`` and PyG's keyword arguments) are :class:`GATConv`'s, with the same defaults, in
    PyG's positional order: ``..., fill_value, bias, share_weights, residual``.

    Parameters (PyG's names): ``lin_l`` (:math:`\Theta_s`, ``(H*C, F_src)`` weight and
    ``(H*C)`` bias when ``bias``), ``lin_r`` (:math:`\Theta_d`, ``(H*C, F_dst)``, the same
    module as ``lin_l`` when ``share_weights``), ``att`` ``(1, H, C)``, ``lin_edge.weight``
    ``(H*C, edge_dim)``, ``res.weight`` with ``residual``, ``bias`` ``(H*C)`` or ``(C)``.

    Shapes: as :class:`GATConv`, but ``x_dst`` may not be None (the score needs the
    destination's features) and ``size`` is keyword-only (PyG's ``GATv2Conv.forward`` has no
    ``size``: the fourth positional argument is ``return_attention_weights``, as there).

    Differences from PyG: as :class:`GATConv`; also ``x=(x_src, None)`` is refused (PyG
    fails an assert), and ``lin_l`` / ``lin_r``'s biases start at zero (PyG draws them
    uniformly in :math:`\pm 1/\sqrt{F}`; ``from_pyg`` copies them either way).
    """

    _pyg_class = "GATv2Conv"

    def __init__(self, in_channels: int | tuple[int, int], out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0,
                 add_self_loops: bool = True, edge_dim: int | None = None,
                 fill_value: float | Tensor | str = "mean", bias: bool = True,
                 share_weights: bool = False, residual: bool = False, **kwargs) -> None:  # fmt: skip
        super().__init__(
            in_channels, out_channels, heads, concat, negative_slope, dropout, add_self_loops,
            edge_dim, fill_value, bias, residual, kwargs,
        )  # fmt: skip
        hc = heads * out_channels
        self.share_weights = share_weights
        self.lin_l = nn.Linear(self._in[0], hc, bias=bias)
        self.lin_r = self.lin_l if share_weights else nn.Linear(self._in[1], hc, bias=bias)
        self.att = nn.Parameter(torch.empty(1, heads, out_channels))
        self.lin_edge = nn.Linear(edge_dim, hc, bias=False) if edge_dim is not None else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights and attention vector, zero biases (PyG's, but for the biases)."""
        for lin in (self.lin_l, self.lin_r, self.lin_edge):
            if lin is not None:
                _glorot(lin.weight)
                if lin.bias is not None:
                    nn.init.zeros_(lin.bias)
        _glorot(self.att)
        if self.res is not None:
            _glorot(self.res.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    @classmethod
    def _pyg_kwargs(cls, conv) -> dict:
        return super()._pyg_kwargs(conv) | {"share_weights": conv.share_weights}

    def forward(self, x: Tensor | tuple[Tensor, Tensor], edge_index: Tensor,
                edge_attr: Tensor | None = None, return_attention_weights: bool | None = None,
                *, size: tuple[int, int] | None = None):  # fmt: skip
        """See the class docstring for the maths and shapes."""
        nodes = node_inputs(x, edge_index, size, self.lin_l.in_features, self.lin_r.in_features,
                            self.lin_l.weight.dtype, type(self).__name__, dst_optional=False)  # fmt: skip
        H, C = self.heads, self.out_channels
        edges, ea = self._prepare(edge_index, nodes, edge_attr)
        src, dst = edges.src, edges.dst
        x_l = self.lin_l(nodes.x_src).view(nodes.n_src, H, C)  # (n_src, H, C): sources
        if nodes.one and self.share_weights:
            x_r = x_l
        else:
            x_r = self.lin_r(nodes.x_dst).view(nodes.n_dst, H, C)  # destinations
        z = x_l.index_select(0, src) + x_r.index_select(0, dst)  # (E, H, C)
        if ea is not None:
            z = z + self._edge_features(ea)
        alpha = (F.leaky_relu(z, self.negative_slope) * self.att).sum(-1)  # (E, H)
        alpha = edge_softmax(alpha, dst, nodes.n_dst)
        alpha = dropout(alpha, self.dropout, self.training)
        out = edge_aggregate(x_l, alpha, src, dst, nodes.n_dst)  # (n_dst, H, C)
        return self._finish(out, nodes, edges, alpha, edge_index, return_attention_weights)
