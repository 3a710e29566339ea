"""Node classification on graphs: ``cora``, ``citeseer`` (Planetoid) and ``karate``.

:mod:`.data` loads the graphs, :mod:`.models` holds the node classifiers selected by
``--model.kind`` (``gat``, ``gatv2``, ``graph_attention``, ``full_lappe``, ``full_edge_bias``,
``gcn``, ``mlp``), :mod:`.task` the full-batch tasks, :mod:`.draw` the ``attnlab show`` picture.
"""

from attnlab.lab.tasks.graph.data import NodeGraph, load_graph
from attnlab.lab.tasks.graph.models import (
    MODEL_KINDS,
    GraphModelConfig,
    NodeOutput,
    build_node_model,
)
from attnlab.lab.tasks.graph.task import CiteSeerTask, CoraTask, GraphOptions, KarateTask, NodeTask

__all__ = [
    "MODEL_KINDS",
    "CiteSeerTask",
    "CoraTask",
    "GraphModelConfig",
    "GraphOptions",
    "KarateTask",
    "NodeGraph",
    "NodeOutput",
    "NodeTask",
    "build_node_model",
    "load_graph",
]
