r"""Node classifiers for the graph tasks, one per ``--model.kind``, all on the same batch.

=================  ===========================================================================
kind               what the hidden layers attend to
=================  ===========================================================================
``gat``            neighbours, additive score (:class:`attnlab.graph.GATConv`; Velickovic 2018)
``gatv2``          neighbours, GATv2's dynamic additive score (Brody et al. 2022)
``graph_attention`` neighbours, scaled dot product (:class:`attnlab.MultiHeadAttention` with
                   :func:`attnlab.masks.graph`)
``full_lappe``     every node, no edges: Laplacian-eigenvector positions only
                   (:class:`attnlab.positional.LaplacianPE`)
``full_edge_bias`` every node, the edges as a bias: ``full_lappe`` plus, per layer and head, a
                   learned score bias for a pair joined by an edge and one for a node and
                   itself, from :math:`\log n` (a soft form of ``graph_attention``'s mask)
``gcn``            neighbours, fixed weights :math:`1/\sqrt{d_i d_j}` (Kipf & Welling 2017)
``mlp``            nothing: features only
=================  ===========================================================================

Every model is two layers, as GAT's Cora model: input dropout, a layer of width
``heads * hidden``, ELU, dropout, an output layer (GAT: ``out_heads`` heads averaged).

A model takes the task's batch (``"x"`` ``(n, f)``, dense or sparse COO, ``"edge_index"``
``(2, E)``, and ``"eigvecs"`` ``(n, k)`` for ``full_lappe`` and ``full_edge_bias``) and returns
logits ``(n, C)`` for all nodes;
``need_weights=True`` returns a :class:`NodeOutput` with, per attention layer, the edges it
attended along and their weights ``(E', heads)``.

Legend: ``n`` nodes, ``f`` features, ``C`` classes, ``E`` edges, ``h`` heads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.attention_config import AttentionConfig
from attnlab.dropout import dropout
from attnlab.lab.tasks.graph.layers import OriginalGATConv, feature_dropout, sparse_aware_linear
from attnlab.pair_bias import PairBias

__all__ = ["GraphModelConfig", "NodeOutput", "build_node_model", "MODEL_KINDS"]

MODEL_KINDS = ("gat", "gatv2", "graph_attention", "full_lappe", "full_edge_bias", "gcn", "mlp")
GAT_VARIANTS = ("auto", "pyg", "original")
#: the kinds built on :class:`attnlab.MultiHeadAttention` (:class:`AttentionNet`)
ATTENTION_KINDS = ("graph_attention", "full_lappe", "full_edge_bias")


@dataclass
class GraphModelConfig:
    """A node classifier (module docstring).

    Args:
        kind: one of :data:`MODEL_KINDS`.
        hidden: width per head of the hidden layer (GAT: 8).
        heads: heads of the hidden layer (GAT: 8); the layer's width is ``heads * hidden``
            for every kind.
        out_heads: heads of GAT's output layer, averaged (Cora / CiteSeer: 1; PubMed: 8).
        dropout: dropout on each layer's input (GAT: 0.6).
        attention_dropout: dropout on the attention weights (GAT: 0.6; none with an efficient
            kernel, which forms no weights).
        negative_slope: LeakyReLU slope of GAT's score (0.2).
        lappe_k: Laplacian eigenvectors per node (``full_lappe``, ``full_edge_bias``).
        variant: GAT's layer: ``"original"`` (:class:`.layers.OriginalGATConv`, the authors'
            TensorFlow layer: input dropout drawn per head, the projected features dropped
            again on the value path, Glorot per head, score biases), ``"pyg"``
            (:class:`attnlab.graph.GATConv`, PyG's dropout: the input once for all heads), or
            ``"auto"`` (the default: ``original`` for ``kind=gat``, the only kind with a
            choice; :attr:`gat_variant` is the resolved one).
        attention: the attention maths of ``graph_attention``, ``full_lappe`` and
            ``full_edge_bias`` (:class:`~attnlab.attention_config.AttentionConfig`; ``--attention.kernel=...``).
            The other kinds have their own: GAT's additive score along edges, GCN's fixed
            weights, the MLP none.

    These models are GAT's two layers, not a Transformer trunk (no feed-forward blocks, no
    norms): their attention settings are :attr:`attention` alone.
    """

    kind: Literal[
        "gat", "gatv2", "graph_attention", "full_lappe", "full_edge_bias", "gcn", "mlp"
    ] = "gat"
    hidden: int = 8
    heads: int = 8
    out_heads: int = 1
    dropout: float = 0.6
    attention_dropout: float = 0.6
    negative_slope: float = 0.2
    lappe_k: int = 16
    variant: Literal["auto", "pyg", "original"] = "auto"
    attention: AttentionConfig = field(default_factory=AttentionConfig)

    def __post_init__(self) -> None:
        if self.kind not in MODEL_KINDS:
            raise ValueError(
                f"model.kind: unknown {self.kind!r}; valid choices: {', '.join(MODEL_KINDS)}"
            )
        if self.variant not in GAT_VARIANTS:
            raise ValueError(
                f"model.variant: unknown {self.variant!r}; valid choices: {', '.join(GAT_VARIANTS)}"
            )
        if self.variant == "original" and self.kind != "gat":
            raise ValueError(
                f"model.variant={self.variant!r} is a GAT layer; it needs model.kind=gat, got "
                f"{self.kind!r} (leave model.variant=auto for the other kinds)"
            )
        for name in ("hidden", "heads", "out_heads", "lappe_k"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"model.{name} must be a positive int, got {value!r}")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"model.{name} must be in [0, 1), got {getattr(self, name)!r}")
        if self.kind == "full_edge_bias" and self.attention.kernel is not None:
            raise ValueError(
                "model.kind=full_edge_bias adds the edges to the scores, which an efficient "
                f"kernel (model.attention.kernel={self.attention.kernel!r}) does not form; use "
                "model.kind=full_lappe with a kernel"
            )
        if self.kind not in ATTENTION_KINDS and self.attention != AttentionConfig():
            raise ValueError(
                "model.attention applies to kind=graph_attention, full_lappe and "
                f"full_edge_bias; kind={self.kind!r} has attention of its own (GAT's additive score along the edges, "
                "GCN's fixed weights, none in the MLP)"
            )

    @property
    def gat_variant(self) -> str:
        """The GAT layer this config builds: ``variant``, with ``auto`` resolved (``original``
        for ``kind=gat``, ``pyg`` for the other kinds, whose layers have no variants)."""
        if self.variant != "auto":
            return self.variant
        return "original" if self.kind == "gat" else "pyg"


class NodeOutput(NamedTuple):
    logits: Tensor  # (n, C)
    attention: list[tuple[Tensor, Tensor]]  # per layer: (edge_index (2, E'), weights (E', h))


class NodeModel(nn.Module):
    """Base: ``forward(batch, need_weights=False)`` -> logits, or a :class:`NodeOutput`."""

    def forward(self, batch: Mapping[str, Tensor], *, need_weights: bool = False) -> Any:
        logits, attention = self.layers(batch, need_weights=need_weights)
        return NodeOutput(logits, attention) if need_weights else logits

    def layers(self, batch: Mapping[str, Tensor], *, need_weights: bool) -> tuple[Tensor, list]:
        raise NotImplementedError


class MLP(NodeModel):
    """Features only: the baseline every graph model must beat."""

    def __init__(self, in_dim: int, num_classes: int, cfg: GraphModelConfig) -> None:
        super().__init__()
        self.p = cfg.dropout
        self.fc1 = nn.Linear(in_dim, cfg.heads * cfg.hidden)
        self.fc2 = nn.Linear(cfg.heads * cfg.hidden, num_classes)

    def layers(self, batch, *, need_weights):
        h = F.elu(self.fc1(feature_dropout(batch["x"], self.p, self.training)))
        return self.fc2(dropout(h, self.p, self.training)), []


class ConvNet(NodeModel):
    """Two message-passing layers of :mod:`attnlab.graph` (GAT, GATv2 or GCN)."""

    def __init__(self, in_dim: int, num_classes: int, cfg: GraphModelConfig) -> None:
        super().__init__()
        from attnlab import graph

        self.p, self.kind = cfg.dropout, cfg.kind
        width = cfg.heads * cfg.hidden
        if cfg.kind == "gcn":
            self.conv1 = graph.GCNConv(in_dim, width)
            self.conv2 = graph.GCNConv(width, num_classes)
            return
        conv = graph.GATConv if cfg.kind == "gat" else graph.GATv2Conv
        opts = {"negative_slope": cfg.negative_slope, "dropout": cfg.attention_dropout}
        if cfg.gat_variant == "original":  # the layer drops its own input, per head: none here
            conv, opts["input_dropout"], self.p = OriginalGATConv, cfg.dropout, 0.0
        self.conv1 = conv(in_dim, cfg.hidden, heads=cfg.heads, **opts)
        self.conv2 = conv(width, num_classes, heads=cfg.out_heads, concat=False, **opts)

    def layers(self, batch, *, need_weights):
        x, edges = batch["x"], batch["edge_index"]
        attention: list[tuple[Tensor, Tensor]] = []
        h = feature_dropout(x, self.p, self.training)
        for i, conv in enumerate((self.conv1, self.conv2)):
            if need_weights and self.kind != "gcn":
                h, weights = conv(h, edges, return_attention_weights=True)
                attention.append((weights[0], weights[1]))
            else:
                h = conv(h, edges)
            if i == 0:
                h = dropout(F.elu(h), self.p, self.training)
        return h, attention


class AttentionNet(NodeModel):
    r"""Two :class:`attnlab.MultiHeadAttention` layers over the nodes as one sequence.

    ``graph_attention``: masked to the edges (and self loops) by :func:`attnlab.masks.graph`;
    ``full_lappe``: unmasked, with :class:`~attnlab.positional.LaplacianPE` added to the
    projected features and a residual connection around each attention layer (without edges,
    attention alone would average every node's features into the same vector);
    ``full_edge_bias``: ``full_lappe`` with the edges added to the scores (Graphormer's way of
    giving full attention the graph, here one hop),

    .. math::
        s_{ij} = \frac{q_i \cdot k_j}{\sqrt d}
                 + (\log n + b^{\text{edge}}_h)\, [j \to i \in E,\ j \ne i]
                 + (\log n + b^{\text{self}}_h)\, [i = j],

    the :math:`b` learned per layer and head from zero. At the start a neighbour (or the node
    itself) weighs :math:`n` times as much as another node of the same score: with its
    :math:`d` neighbours it holds about :math:`(d + 1) / (d + 2)` of the weight, a soft form of
    ``graph_attention``'s mask that training can loosen or tighten. (Started from zero
    instead, at GAT's learning rate the biases stayed within 0.02 on Cora and CiteSeer and
    the model scored as ``full_lappe`` to the node.) ``b = -\log n`` is ``full_lappe``.

    ``input -> Linear -> attention -> ELU -> attention -> Linear``, with dropout before each
    linear and attention layer.
    """

    def __init__(self, in_dim: int, num_classes: int, cfg: GraphModelConfig) -> None:
        super().__init__()
        from attnlab.attention import MultiHeadAttention
        from attnlab.positional import LaplacianPE

        self.p, self.full = cfg.dropout, cfg.kind in ("full_lappe", "full_edge_bias")
        # per layer, per head: the bias of a pair joined by an edge, and of a node and itself
        self.edge_bias = (
            nn.Parameter(torch.zeros(2, 2, cfg.heads)) if cfg.kind == "full_edge_bias" else None
        )
        width = cfg.heads * cfg.hidden
        self.inp = nn.Linear(in_dim, width)
        self.pe = LaplacianPE(cfg.lappe_k, width) if self.full else None
        # An efficient kernel forms no attention weights: nothing for attention_dropout to drop
        # (as in the Transformer blocks).
        p_attn = cfg.attention_dropout if cfg.attention.kernel is None else 0.0
        self.attn1, self.attn2 = (
            MultiHeadAttention.from_config(width, cfg.heads, cfg.attention, dropout=p_attn)
            for _ in range(2)
        )
        self.out = nn.Linear(width, num_classes)

    def layers(self, batch, *, need_weights):
        from attnlab import masks

        x, edges = batch["x"], batch["edge_index"]
        n = x.shape[0]
        mask = None if self.full else masks.graph(edges, n)
        h = sparse_aware_linear(feature_dropout(x, self.p, self.training), self.inp)  # (n, w)
        if self.pe is not None:
            h = self.pe(h, batch["eigvecs"])
        h = h.unsqueeze(0)  # (1, n, width): the graph is one sequence
        places = None if self.edge_bias is None else _bias_places(edges, n)
        attention = []
        for i, attn in enumerate((self.attn1, self.attn2)):
            bias = None if places is None else _edge_bias(*places, self.edge_bias[i], n)
            res = attn(dropout(h, self.p, self.training), mask=mask, bias=bias,
                       need_weights=need_weights)  # fmt: skip
            # Without edges, attention averages over all nodes: a node's own features reach
            # the output only through a residual connection (as in a Transformer block).
            out = h + res.out if self.full else res.out
            h = F.elu(out) if i == 0 else out
            if need_weights:
                attention.append(_edge_weights(res.weights[0], edges, n))
        return self.out(dropout(h[0], self.p, self.training)), attention


def _bias_places(edges: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """The flat places ``i * n + j`` of an ``(n, n)`` score matrix that ``full_edge_bias``
    biases, sorted: each distinct pair where query ``i`` has an edge from key ``j != i``, and
    every ``(i, i)``; and ``(P,)`` int64, 1 where the place is a node and itself, else 0."""
    src, dst = edges[0].long(), edges[1].long()  # query = destination, key = source
    other = src != dst
    nodes = torch.arange(n, device=edges.device)
    places = torch.unique(torch.cat([dst[other] * n + src[other], nodes * (n + 1)]))
    return places, (places % (n + 1) == 0).long()


def _edge_bias(places: Tensor, own: Tensor, bias: Tensor, n: int) -> PairBias:
    """``bias`` ``(2, h)`` (edge, self) -> the pair bias of :func:`_bias_places`: ``log n +
    bias[0, h]`` at an edge, ``log n + bias[1, h]`` on the diagonal. On a CPU the block kernel
    adds it at those pairs only (:class:`~attnlab.pair_bias.PairBias`; elsewhere, e.g. with the
    weights asked for, it is made dense): as a dense ``(h, n, n)`` tensor it was built, added
    and its gradient written whole in every layer, 0.4 s of Cora's 1.3 s step."""
    values = (bias + math.log(n))[own].T  # (h, P), float32: log n + b unrounded
    return PairBias(places, values, n, n)


def _edge_weights(weights: Tensor, edges: Tensor, n: int) -> tuple[Tensor, Tensor]:
    """Dense ``(h, i, j)`` weights read at the edges and self loops: ``(2, E + n)``,
    ``(E + n, h)``."""
    loops = torch.arange(n, device=edges.device)
    edges = torch.cat([edges, torch.stack([loops, loops])], dim=1)
    return edges, weights[:, edges[1], edges[0]].T  # query = destination, key = source


def build_node_model(cfg: GraphModelConfig, *, in_dim: int, num_classes: int) -> NodeModel:
    """The model of ``cfg.kind`` for ``in_dim`` features and ``num_classes`` classes."""
    if not isinstance(cfg, GraphModelConfig):
        raise TypeError(f"expected a GraphModelConfig, got {type(cfg).__name__}")
    if cfg.kind == "mlp":
        return MLP(in_dim, num_classes, cfg)
    if cfg.kind in ATTENTION_KINDS:
        return AttentionNet(in_dim, num_classes, cfg)
    return ConvNet(in_dim, num_classes, cfg)
