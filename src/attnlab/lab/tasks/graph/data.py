"""The graphs of the node-classification tasks: one :class:`NodeGraph` per dataset.

* ``cora``, ``citeseer``: the Planetoid public split, read from the registered dataset files by
  the restricted unpickler (:mod:`attnlab.lab.data.readers.planetoid`), features row-normalised as
  GAT and GCN do.
* ``karate``: networkx's Zachary karate club (34 members, 78 friendships), labelled by the club
  each member joined after the split ("Mr. Hi" or "Officer"); features are one-hot node ids
  (Kipf & Welling's demo). Semi-supervised split: the 4 lowest ids of each club train, the next
  3 of each are dev, the remaining 20 test.

Legend: ``n`` nodes, ``f`` features, ``E`` edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

__all__ = ["NodeGraph", "PLANETOID_CLASSES", "KARATE_CLASSES", "load_graph"]

#: class names of the Planetoid graphs, in label order (Kipf's / PyG's label ids)
PLANETOID_CLASSES: dict[str, list[str]] = {
    "cora": [
        "Case_Based", "Genetic_Algorithms", "Neural_Networks", "Probabilistic_Methods",
        "Reinforcement_Learning", "Rule_Learning", "Theory",
    ],
    "citeseer": ["Agents", "AI", "DB", "IR", "ML", "HCI"],
}  # fmt: skip
KARATE_CLASSES = ["Mr. Hi", "Officer"]
_KARATE_PER_CLASS = (4, 3)  # (train, dev) nodes per club; the rest are test


@dataclass
class NodeGraph:
    """A graph whose nodes are classified, with its split.

    Attributes:
        name: dataset name.
        x: ``(n, f)`` float32 node features (already normalised): a sparse COO tensor for
            the Planetoid bag-of-words graphs (~1% non-zero), dense for karate.
        y: ``(n,)`` int64 labels.
        edge_index: ``(2, E)`` int64 ``(source, destination)``, symmetric, no self loops.
        splits: ``{"train", "dev", "test"}`` -> int64 node ids.
        classes: label names.
    """

    name: str
    x: Tensor
    y: Tensor
    edge_index: Tensor
    splits: dict[str, Tensor]
    classes: list[str]
    _eigvecs: dict[int, Tensor] = field(default_factory=dict, repr=False)

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    def eigvecs(self, k: int) -> Tensor:
        """The ``(n, k)`` Laplacian eigenvectors (computed once per ``k``)."""
        if k not in self._eigvecs:
            from attnlab.positional import laplacian_eigenvectors

            self._eigvecs[k] = laplacian_eigenvectors(self.edge_index, self.num_nodes, k)
        return self._eigvecs[k]


def _planetoid(name: str) -> NodeGraph:
    from attnlab.lab.data import fetch
    from attnlab.lab.data.readers.planetoid import read_planetoid, row_normalize

    g = read_planetoid(fetch(name), name)
    splits = {"train": g.train_index, "dev": g.val_index, "test": g.test_index}
    x = row_normalize(g.x).to_sparse().coalesce()  # the models multiply it sparse
    return NodeGraph(name, x, g.y, g.edge_index, splits,
                     list(PLANETOID_CLASSES[name]))  # fmt: skip


def _karate() -> NodeGraph:
    import networkx as nx

    g = nx.karate_club_graph()
    n = g.number_of_nodes()
    y = torch.tensor([KARATE_CLASSES.index(g.nodes[i]["club"]) for i in range(n)])
    src, dst = zip(*g.edges(), strict=True)
    edges = torch.tensor([src + dst, dst + src])
    key = torch.unique(edges[1] * n + edges[0])  # sorted by (destination, source)
    edge_index = torch.stack([key % n, key // n])
    train, dev = [], []
    for c in range(len(KARATE_CLASSES)):
        members = (y == c).nonzero().view(-1).tolist()
        n_train, n_dev = _KARATE_PER_CLASS
        train += members[:n_train]
        dev += members[n_train : n_train + n_dev]
    test = sorted(set(range(n)) - set(train) - set(dev))
    splits = {"train": torch.tensor(sorted(train)), "dev": torch.tensor(sorted(dev)),
              "test": torch.tensor(test)}  # fmt: skip
    return NodeGraph("karate", torch.eye(n), y, edge_index, splits, list(KARATE_CLASSES))


_LOADERS = {"cora": lambda: _planetoid("cora"), "citeseer": lambda: _planetoid("citeseer"),
            "karate": _karate}  # fmt: skip


def load_graph(name: str) -> NodeGraph:
    """The graph of dataset ``name`` (``cora``, ``citeseer`` or ``karate``).

    Raises:
        ValueError: an unknown name (lists the valid ones).
        attnlab.lab.data.DatasetUnavailable: a Planetoid file is not in the mirror / cache.
    """
    if name not in _LOADERS:
        raise ValueError(f"unknown graph {name!r}; valid choices: {', '.join(_LOADERS)}")
    return _LOADERS[name]()
