"""``attnlab show`` for graphs: a node's neighbourhood with its attention weights.

One panel per head of the model's first attention layer: the node's 2-hop neighbourhood (the
whole graph for small graphs such as karate), nodes coloured by predicted class (the shown
node ringed in black, a cross on a wrong prediction), each edge ``j -> i`` drawn with width and
colour = the weight node ``i`` gave node ``j``. A model without attention (``mlp``, ``gcn``)
gets one panel with plain edges.

Legend: ``n`` nodes, ``E`` edges, ``h`` heads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from attnlab.lab.tasks.graph.data import NodeGraph

__all__ = ["draw_neighbourhood", "neighbourhood", "MAX_DRAWN_NODES", "WHOLE_GRAPH_NODES"]

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


def draw_neighbourhood(
    task: Any, model: nn.Module, graph: NodeGraph, node: int, out: str | Path, *,
    title: str = "",
) -> Path:  # fmt: skip
    """Draw ``node``'s neighbourhood under ``model`` into the PNG ``out`` (module docstring).

    ``task`` is the :class:`~.task.NodeTask` (its ``classes`` and batches; not imported here,
    as the task imports this module)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import networkx as nx
    from matplotlib.figure import Figure

    model.eval()
    with torch.no_grad():
        res = model(task._batch(graph, torch.tensor([node])), need_weights=True)
    pred = res.logits.argmax(-1)
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
    fig = Figure(figsize=(4.2 * cols, 4.2 * rows + 0.6))
    cmap = matplotlib.colormaps["viridis"]
    colours = matplotlib.colormaps["tab10"]
    node_colours = [colours(int(pred[i]) % 10) for i in nodes]
    for k in range(heads):
        ax = fig.add_subplot(rows, cols, k + 1)
        ax.set_axis_off()
        w = weights[:, k]
        scale = float(w.max()) if w.numel() and float(w.max()) > 0 else 1.0
        dg = nx.DiGraph()
        dg.add_nodes_from(nodes)
        dg.add_edges_from(edges.T.tolist())
        edge_w = {(int(s), int(d)): float(x) / scale for (s, d), x in zip(edges.T, w)}
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
        nx.draw_networkx_labels(g, pos, ax=ax, labels={node: str(node)}, font_size=8)
        ax.set_title(f"head {k + 1}" if res.attention else "no attention: plain edges")
    handles = _legend(task.classes, colours)
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 7), fontsize=7)
    label = task.classes[int(pred[node])]
    what = "whole graph" if whole else f"{len(nodes)} nodes within 2 hops"
    fig.suptitle(f"{title or graph.name}: node {node} -> {label} ({what}; edge = attention "
                 "weight, max-scaled per head)", fontsize=9)  # fmt: skip
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    return out


def _legend(classes: list[str], colours: Any) -> list:
    from matplotlib.lines import Line2D

    return [Line2D([], [], marker="o", linestyle="", color=colours(c % 10), label=name)
            for c, name in enumerate(classes)]  # fmt: skip
