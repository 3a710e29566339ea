"""``attnlab show`` for graphs: a node's neighbourhood with its attention weights.

One panel per head of the model's first attention layer: the node's 2-hop neighbourhood (the
whole graph for small graphs such as karate), nodes coloured by predicted class and labelled
with their ids (the shown node ringed in black, a cross on a wrong prediction), each edge
``j -> i`` drawn with width and colour = the weight node ``i`` gave node ``j``, on one scale
for every head (the colour bar). The title says what the model predicts for the node (class,
probability, gold label and split). A model without attention (``mlp``, ``gcn``) gets one
panel with plain edges.

As a heatmap (``show --layer L --head H``), a pair of nodes without an edge has no weight:
:func:`absent_pairs` gives those pairs, for :func:`attnlab.lab.viz.plot_attention`'s
``masked``, which draws them hatched ("no edge") instead of as weight 0.

Legend: ``n`` nodes, ``E`` edges, ``h`` heads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from attnlab.lab.tasks.graph.data import NodeGraph

__all__ = [
    "draw_neighbourhood",
    "neighbourhood_figure",
    "neighbourhood",
    "absent_pairs",
    "dense_attention",
    "MAX_DRAWN_NODES",
    "WHOLE_GRAPH_NODES",
]

#: at most this many nodes are drawn: the node, its neighbours, then 2-hop nodes by id
MAX_DRAWN_NODES = 80
#: graphs up to this size are drawn whole
WHOLE_GRAPH_NODES = 60
_MAX_PANELS = 8


def neighbourhood(edge_index: Tensor, node: int, hops: int = 2, cap: int = MAX_DRAWN_NODES):
    """The node, then its 1-hop, 2-hop, ... neighbours (each ring by id), at most ``cap``."""
    src, dst = edge_index
    order, seen, ring = [node], {node}, {node}
    for _ in range(hops):
        nxt = sorted({int(s) for s in src[torch.isin(dst, torch.tensor(sorted(ring)))]} - seen)
        order += nxt
        seen |= set(nxt)
        ring = set(nxt)
    return order[:cap]


def dense_attention(
    attention: Sequence[tuple[Tensor, Tensor]], nodes: list[int], num_nodes: int
) -> list[Tensor]:
    """Per attention layer, its ``(E', h)`` edge weights over ``nodes`` (as :func:`neighbourhood`
    orders them) as a dense ``(h, i, j)``: row ``i`` attends to column ``j`` (the edge
    ``j -> i``), zero where the layer has no such edge (:func:`absent_pairs` says which)."""
    pos = torch.full((num_nodes,), -1, dtype=torch.long)
    pos[torch.tensor(nodes)] = torch.arange(len(nodes))
    maps = []
    for edges, weights in attention:  # (2, E'), (E', h)
        i, j = pos[edges[1]], pos[edges[0]]  # destination attends to source
        keep = (i >= 0) & (j >= 0)
        dense = torch.zeros(weights.shape[1], len(nodes), len(nodes))  # (h, i, j)
        dense[:, i[keep], j[keep]] = weights[keep].float().T
        maps.append(dense)
    return maps


def absent_pairs(edge_index: Tensor, nodes: list[int], *, self_loops: bool = True) -> Tensor:
    """``(i, j)`` over ``nodes`` (as :func:`neighbourhood` orders them): True where there is no
    edge ``j -> i``, i.e. no attention weight of query ``i`` on key ``j`` (the opposite of
    :func:`attnlab.masks.graph`'s "may attend").

    Args:
        edge_index: ``(2, E)`` ``(source, destination)`` edges: the graph's, or an attention
            layer's (self loops included).
        nodes: the node ids of the rows and columns.
        self_loops: count ``i -> i`` as an edge (GAT's layers and ``masks.graph`` add them).
    """
    n = len(nodes)
    top = max(int(edge_index.max()) + 1 if edge_index.numel() else 0, max(nodes) + 1)
    pos = torch.full((top,), -1, dtype=torch.long)
    pos[torch.tensor(nodes)] = torch.arange(n)
    i, j = pos[edge_index[1]], pos[edge_index[0]]  # destination attends to source
    keep = (i >= 0) & (j >= 0)
    absent = torch.ones(n, n, dtype=torch.bool)
    absent[i[keep], j[keep]] = False
    if self_loops:
        absent.fill_diagonal_(False)
    return absent


def draw_neighbourhood(
    task: Any, model: nn.Module, graph: NodeGraph, node: int, out: str | Path, *,
    title: str = "",
) -> Path:  # fmt: skip
    """Draw :func:`neighbourhood_figure` into the PNG ``out`` (parent directories are
    created); return its path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    neighbourhood_figure(task, model, graph, node, title=title).savefig(out, dpi=110)
    return out


def neighbourhood_figure(
    task: Any, model: nn.Module, graph: NodeGraph, node: int, *, title: str = ""
) -> Figure:
    """``node``'s neighbourhood under ``model`` (module docstring), as a figure.

    ``task`` is the :class:`~.task.NodeTask` (its ``classes`` and batches; not imported here,
    as the task imports this module)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import networkx as nx
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    model.eval()
    with torch.no_grad():
        res = model(task._batch(graph, torch.tensor([node])), need_weights=True)
    probs = res.logits.float().softmax(-1)  # (n, C)
    pred = probs.argmax(-1)
    whole = graph.num_nodes <= WHOLE_GRAPH_NODES
    nodes = list(range(graph.num_nodes)) if whole else neighbourhood(graph.edge_index, node)
    keep = torch.zeros(graph.num_nodes, dtype=torch.bool)
    keep[nodes] = True
    if res.attention:
        edges, weights = res.attention[0]  # first layer: (2, E'), (E', h)
    else:
        edges, weights = graph.edge_index, torch.ones(graph.edge_index.shape[1], 1)
    inside = keep[edges[0]] & keep[edges[1]] & (edges[0] != edges[1])
    edges, weights = edges[:, inside], weights[inside].float()
    heads = min(weights.shape[1], _MAX_PANELS)

    g = nx.Graph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges.T.tolist())
    pos = nx.spring_layout(g, seed=0)
    cols = min(heads, 4)
    rows = -(-heads // cols)
    fig = Figure(figsize=(4.2 * cols + 0.8, 4.2 * rows + 1.0), layout="constrained")
    cmap = matplotlib.colormaps["viridis"]
    colours = matplotlib.colormaps["tab10"]
    node_colours = [colours(int(pred[i]) % 10) for i in nodes]
    # One scale for every head (0 to the largest weight drawn), as the colour bar reads.
    norm = Normalize(0.0, max(float(weights[:, :heads].max()) if weights.numel() else 0.0, 1e-6))
    font = 7 if len(nodes) <= 40 else 5
    panels = []
    for k in range(heads):
        ax = fig.add_subplot(rows, cols, k + 1)
        panels.append(ax)
        ax.set_axis_off()
        w = weights[:, k]
        dg = nx.DiGraph()
        dg.add_nodes_from(nodes)
        dg.add_edges_from(edges.T.tolist())
        edge_w = {(int(s), int(d)): float(norm(float(x))) for (s, d), x in zip(edges.T, w)}
        ordered = list(dg.edges())
        nx.draw_networkx_edges(
            dg, pos, ax=ax, edgelist=ordered, arrows=True, arrowsize=6,
            width=[0.3 + 3.0 * edge_w[e] for e in ordered],
            edge_color=[cmap(edge_w[e]) for e in ordered], connectionstyle="arc3,rad=0.12",
        )  # fmt: skip
        nx.draw_networkx_nodes(
            g, pos, ax=ax, nodelist=nodes, node_color=node_colours, node_size=60,
            linewidths=[2.0 if i == node else 0.0 for i in nodes], edgecolors="black",
        )  # fmt: skip
        wrong = [i for i in nodes if int(pred[i]) != int(graph.y[i])]
        nx.draw_networkx_nodes(g, pos, ax=ax, nodelist=wrong, node_shape="x", node_size=20,
                               node_color="black")  # fmt: skip
        # every node's id, just above it (on the marker it would hide the class colour)
        above = {i: (float(pos[i][0]), float(pos[i][1]) + 0.045) for i in nodes}
        nx.draw_networkx_labels(g, above, ax=ax, labels={i: str(i) for i in nodes},
                                font_size=font)  # fmt: skip
        ax.set_title(f"head {k + 1}" if res.attention else "no attention: plain edges", fontsize=9)
    if res.attention:
        bar = fig.colorbar(ScalarMappable(norm, cmap), ax=panels, fraction=0.04, shrink=0.8)
        bar.set_label("attention weight of edge j -> i (i's weight on j)", fontsize=8)
        bar.ax.tick_params(labelsize=7)
    handles = _legend(task.classes, colours)
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 5), fontsize=7)
    label = task.classes[int(pred[node])]
    gold = task.classes[int(graph.y[node])]
    split = next((s for s, idx in graph.splits.items() if bool((idx == node).any())), "no split")
    what = "whole graph" if whole else f"{len(nodes)} nodes within 2 hops"
    fig.suptitle(f"{title or graph.name}\nnode {node}: predicted {label} "
                 f"(p {float(probs[node, int(pred[node])]):.2f}; gold {gold}, {split}) - {what}",
                 fontsize=9)  # fmt: skip
    return fig


def _legend(classes: list[str], colours: Any) -> list:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", linestyle="", color=colours(c % 10), label=name)
               for c, name in enumerate(classes)]  # fmt: skip
    ring = Line2D([], [], marker="o", linestyle="", markerfacecolor="white",
                  markeredgecolor="black", markeredgewidth=2.0, label="shown node")  # fmt: skip
    cross = Line2D([], [], marker="x", linestyle="", color="black", label="wrong prediction")
    return [*handles, ring, cross]
