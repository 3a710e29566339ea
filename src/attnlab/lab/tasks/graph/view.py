"""``show --html`` for graphs: the chosen node's 2-hop neighbourhood laid out by networkx; a
node's attention is drawn on its incoming edges only, since attention runs along edges and a
non-edge has no weight (masked, never zero) (:class:`attnlab.viz.AttentionView`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from attnlab.viz import Attention, AttentionView, Modality

from .draw import absent_pairs, dense_attention, neighbourhood

__all__ = ["graph_view"]


@torch.no_grad()
def graph_view(task: Any, model: nn.Module, node: int, *, title: str = "") -> AttentionView:
    """The page's data for ``node`` of the task's graph.

    Raises:
        ValueError: a node id that is not in the graph; a model without attention (``gcn``,
            ``mlp``).
    """
    import networkx as nx

    graph = task._load()
    node = task.command_inputs([], {"nodes": [node]})[0]
    model.eval()
    res = model(task._batch(graph, torch.tensor([node])), need_weights=True)
    if not res.attention:
        raise ValueError(
            f"{task._label()}: a {task.model_cfg.kind} model has no attention weights to show"
        )
    nodes = neighbourhood(graph.edge_index, node)
    pos = torch.full((graph.num_nodes,), -1, dtype=torch.long)
    pos[torch.tensor(nodes)] = torch.arange(len(nodes))
    weights = dense_attention(res.attention, nodes, graph.num_nodes)
    masked = [absent_pairs(edges, nodes, self_loops=False) for edges, _ in res.attention]
    g = nx.Graph()
    g.add_nodes_from(range(len(nodes)))
    src, dst = pos[graph.edge_index[0]], pos[graph.edge_index[1]]
    inside = (src >= 0) & (dst >= 0) & (src != dst)
    drawn = torch.stack([src[inside], dst[inside]]).T.tolist()
    g.add_edges_from(drawn)
    layout = nx.spring_layout(g, seed=0)
    xy = np.array([layout[p] for p in range(len(nodes))], dtype=np.float64)
    xy = (xy - xy.min(0)) / np.maximum(xy.max(0) - xy.min(0), 1e-9)
    probs = res.logits.float().softmax(-1)
    pred = probs.argmax(-1)
    k = int(pred[node])
    labels = [str(n) for n in nodes]
    return AttentionView(
        Attention("graph attention", weights, labels, masked=masked),
        title=title or f"{task.name}: node {node}",
        prediction=(
            f"node {node}: predicted {task.classes[k]} (p {float(probs[node, k]):.2f}; "
            f"gold {task.classes[int(graph.y[node])]})"
        ),  # fmt: skip
        modality=Modality(
            "graph",
            {
                "nodes": labels,
                "xy": xy.round(4).tolist(),
                "edges": drawn,
                "center": 0,
                "node_labels": [task.classes[int(pred[n])] for n in nodes],
            },
        ),  # fmt: skip
        notes=[
            f"{len(nodes)} nodes within 2 hops of node {node}; attention exists only along "
            "edges (and self loops): every other pair is masked"
        ],  # fmt: skip
    )
