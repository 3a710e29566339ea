"""``node-classify``: a label per node of your own graph (full batch, as ``cora``), no code:
``attnlab train node-classify --data.nodes=nodes.csv --data.edges=edges.csv``.

The graph tasks' machinery unchanged (:class:`~.task.NodeTask`: GAT by default, GAT's recipe,
its selection rule, ``--model.kind`` for the others) on the graph of :mod:`.files`: edges made
symmetric (``--data.undirected``), self loops dropped, features divided by their row sum
(``--data.normalize=row``; stored sparse when under 10% are non-zero). The classes are train's
labels (sorted; numerically when all are numbers); a dev or test node with another label is
refused. The run keeps the graph as it trained on it in ``RUN/data/graph.npz`` and each split's
node ids in ``RUN/data/{train,dev,test}.txt``, so ``eval``, ``predict`` and ``show`` (node ids
of your file: ``--node ID`` or bare) need the run alone.
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from attnlab.lab.data.own import (
    SAVED_DIR,
    SPLITS,
    atomic_write,
    check_labels,
    cut_splits,
    label_order,
    save_splits,
    saved_splits,
)
from attnlab.lab.data.readers.planetoid import row_normalize
from attnlab.lab.tasks.base import options_as
from attnlab.lab.tasks.graph.data import NodeGraph
from attnlab.lab.tasks.graph.files import GraphDataOptions, RawGraph, as_graph_options, read_graph
from attnlab.lab.tasks.graph.task import GraphOptions, NodeTask

__all__ = ["NodeClassifyOptions", "NodeClassifyTask"]

_GRAPH = "graph.npz"  # the graph a run trained on, in RUN/data/
_SPARSE_BELOW = 0.1  # features stored sparse when fewer than this share are non-zero


@dataclass
class NodeClassifyOptions(GraphOptions):
    """Options of the ``node-classify`` task (GAT's ``l2`` and ``select``, and your graph).

    Args:
        data: your graph: a node CSV and an edge CSV, or a .npz / .pt of x, edge_index, y and
            optional split masks.
    """

    data: GraphDataOptions = field(default_factory=GraphDataOptions)


class NodeClassifyTask(NodeTask):
    """A label per node of your own graph (full batch), accuracy."""

    name = "node-classify"
    dataset = "own"

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self._index: dict[str, int] = {}
        self._saved: dict[str, Path] | None = None
        self._kept: tuple[GraphDataOptions, dict[str, str], dict[str, list[str]]] | None = None

    @classmethod
    def default_options(cls) -> NodeClassifyOptions:
        return NodeClassifyOptions()

    # ------------------------------------------------------------------ data
    def setup(self, options: NodeClassifyOptions) -> None:
        opts = options_as(NodeClassifyOptions, options)
        self.l2, self.selection = opts.l2, opts.select
        data = as_graph_options(opts.data)
        if self._saved is not None:
            self._load()
            return
        if not data.nodes:
            raise ValueError(
                f"task {self.name!r} trains on your own graph: give --data.nodes=nodes.csv "
                "--data.edges=edges.csv (or --data.nodes=graph.npz), e.g. attnlab train "
                f"{self.name} --data.nodes=nodes.csv --data.edges=edges.csv"
            )
        self._set_graph(self._build(read_graph(data), data))

    def _build(self, raw: RawGraph, data: GraphDataOptions) -> NodeGraph:
        n = len(raw.ids)
        given = {s: [i for i in range(n) if raw.split[i] == s and raw.labels[i]] for s in SPLITS}
        for s in SPLITS:  # a node named in a split needs a label
            unlabelled = [i for i in range(n) if raw.split[i] == s and not raw.labels[i]]
            if unlabelled:
                raise ValueError(f"{raw.where[unlabelled[0]]}: a node of the {s} split without "
                                 "a label")  # fmt: skip
        blank = [i for i in range(n) if raw.split[i] == "" and raw.labels[i]]
        how = "the file's split"
        if blank:
            cut = cut_splits(blank, data.split, data.seed, ["dev", "test"], data.nodes)
            given = {s: sorted(given[s] + cut[s]) for s in SPLITS}
            how = (f"the file's split, and its {len(blank)} labelled nodes without one cut by "
                   f"--data.split={data.split[0]},{data.split[1]}, --data.seed={data.seed}")  # fmt: skip
        if not given["train"]:
            raise ValueError(f"{data.nodes}: no labelled node in the train split")
        if not self.classes:
            self.classes = label_order(raw.labels[i] for i in given["train"])
        for s in ("dev", "test"):
            check_labels(((raw.labels[i], raw.where[i]) for i in given[s]), self.classes, s)
        index = {c: k for k, c in enumerate(self.classes)}
        y = torch.tensor([index.get(label, -1) for label in raw.labels], dtype=torch.long)
        x = row_normalize(raw.x) if data.normalize == "row" else raw.x
        edges = raw.edge_index
        if data.undirected:
            edges = torch.cat([edges, edges.flip(0)], dim=1)
        edges = edges[:, edges[0] != edges[1]]
        key = torch.unique(edges[1] * n + edges[0])  # sorted by (destination, source)
        self.ids = list(raw.ids)
        sources = {s: f"{data.nodes} ({how})" for s in SPLITS}
        self._kept = (data, sources, {s: [raw.ids[i] for i in given[s]] for s in SPLITS})
        splits = {s: torch.tensor(given[s], dtype=torch.long) for s in SPLITS}
        return NodeGraph(Path(data.nodes).stem, x, y, torch.stack([key % n, key // n]), splits,
                         list(self.classes))  # fmt: skip

    def _set_graph(self, graph: NodeGraph) -> None:
        if self.num_features and graph.x.shape[1] != self.num_features:
            raise ValueError(f"{self._label()}: the graph has {graph.x.shape[1]} features; the "
                             f"model was trained with {self.num_features}")  # fmt: skip
        if (graph.x != 0).float().mean() < _SPARSE_BELOW:
            graph.x = graph.x.to_sparse().coalesce()  # the models multiply it sparse
        self.graph, self.num_features = graph, graph.x.shape[1]
        self._index = {node: i for i, node in enumerate(self.ids)}

    def _load(self) -> NodeGraph:
        if self.graph is None:
            if self._saved is None:
                raise ValueError(f"{self._label()}: the graph is your files': give a run "
                                 "(it keeps the graph) or --data.nodes")  # fmt: skip
            path = self._saved["train"].parent / _GRAPH
            with np.load(path, allow_pickle=False) as a:
                self.ids = [str(v) for v in a["ids"].tolist()]
                splits = {s: torch.from_numpy(a[f"{s}_nodes"].astype(np.int64)) for s in SPLITS}
                self._set_graph(NodeGraph(str(a["name"]), torch.from_numpy(a["x"]),
                                          torch.from_numpy(a["y"].astype(np.int64)),
                                          torch.from_numpy(a["edge_index"].astype(np.int64)),
                                          splits, list(self.classes)))  # fmt: skip
        return self.graph

    # ------------------------------------------------------------------ the run's data
    def load_run_data(self, run_dir: str | Path) -> None:
        """Read the graph from what the run ``run_dir`` kept, if it did."""
        self._saved = saved_splits(run_dir)

    def save_run_data(self, run_dir: str | Path) -> None:
        """Keep the graph (``graph.npz``) and each split's node ids in ``run_dir/data/``."""
        if self._kept is None or self.graph is None:
            return
        data, sources, ids = self._kept
        g = self.graph
        x = g.x.to_dense() if g.x.is_sparse else g.x
        buf = io.BytesIO()
        np.savez_compressed(buf, x=x.numpy(), y=g.y.numpy(), edge_index=g.edge_index.numpy(),
                            ids=np.array(self.ids, dtype=str), name=np.array(g.name),
                            **{f"{s}_nodes": g.splits[s].numpy() for s in SPLITS})  # fmt: skip
        (Path(run_dir) / SAVED_DIR).mkdir(parents=True, exist_ok=True)
        atomic_write(Path(run_dir) / SAVED_DIR / _GRAPH, buf.getvalue())
        save_splits(run_dir, ids, lambda nodes: "".join(f"{v}\n" for v in nodes), ".txt",
                    sources, data)  # fmt: skip

    # ------------------------------------------------------------------ commands
    def add_arguments(self, parser: argparse.ArgumentParser, command: str) -> None:
        parser.add_argument("--node", dest="nodes", action="append", default=[],
                            help="a node id of your node file (repeatable)")  # fmt: skip

    def command_inputs(self, texts: Sequence[str], options: Mapping[str, Any]) -> list[int]:
        """Node positions from the ids of the user's file (``--node ID``, then bare ids)."""
        given = [*(options.get("nodes") or []), *(t for text in texts for t in text.split())]
        if not given:
            raise ValueError(f"{self._label()}: no node given: pass --node ID (an id of your "
                             "node file)")  # fmt: skip
        n = self._load().num_nodes
        out = [v if isinstance(v, int) else self.parse_input(v) for v in given]
        for v in out:
            if not 0 <= v < n:
                raise ValueError(f"{self._label()}: node position {v} outside 0..{n - 1}")
        return out

    def parse_input(self, text: str) -> int:
        self._load()
        if text not in self._index:
            some = ", ".join(self.ids[:3])
            raise ValueError(f"{self._label()}: no node {text!r} in the graph (its ids are "
                             f"those of your node file: {some}, ...)")  # fmt: skip
        return self._index[text]

    @torch.no_grad()
    def predict(self, model: nn.Module, inputs: Sequence[int], **options: Any) -> list[dict]:
        """As :meth:`NodeTask.predict`, ``node`` being the id of the user's file (gold
        ``none`` for an unlabelled node)."""
        records = super().predict(model, inputs, **options)
        y = self._load().y
        for record in records:
            i = record["node"]
            record["node"] = self.ids[i]
            if int(y[i]) < 0:
                record["gold"] = "none"
        return records
