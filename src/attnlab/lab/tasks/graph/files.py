"""A user's own graph (``--data.nodes=FILE``): the options and the three layouts, read into one
:class:`RawGraph` (node ids, features, labels, split values).

* a node CSV (``--data.nodes``: a header row; ``id``, ``label``, ``split`` and the features,
  every other column unless ``--data.feature_columns`` names them) with an edge CSV
  (``--data.edges``: ``source``, ``target``, node ids of the node file);
* a ``.npz`` (``numpy.savez``, read without pickles): ``x`` ``(n, f)``, ``edge_index``
  ``(2, E)`` (node positions 0..n-1), ``y`` ``(n,)`` (ints, negative: no label; or strings,
  empty: no label), optional boolean ``train_mask``, ``dev_mask`` (or ``val_mask``),
  ``test_mask`` and ``ids``;
* a ``.pt`` holding a dict of those tensors (``torch.save(data.to_dict(), FILE)`` for PyG's
  ``Data``), read by ``torch.load(weights_only=True)``. A pickled PyG ``Data`` object itself
  is refused: unpickling it runs PyG's code, which the safe loader does not.

A node's split value is ``train``, ``dev`` (or ``val``), ``test``, ``none`` (in no split) or
blank: the labelled nodes left blank are cut into dev / test / train by ``--data.split`` and
``--data.seed``. A node without a label is in the graph (its features and edges count) but in
no split.
"""

from __future__ import annotations

import csv
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from attnlab.lab.data.own import as_options, check_split

__all__ = ["GraphDataOptions", "RawGraph", "as_graph_options", "read_graph", "SPLIT_VALUES"]

#: the split column's values (``val``/``valid``/``validation`` read as ``dev``; blank: cut)
SPLIT_VALUES = {"train": "train", "dev": "dev", "val": "dev", "valid": "dev",
                "validation": "dev", "test": "test", "none": "none", "": ""}  # fmt: skip


@dataclass
class GraphDataOptions:
    """Your own graph (``--data.NAME`` for short).

    Args:
        nodes: the node CSV (id, features..., label, split), a .npz (x, edge_index, y, optional
            train_mask / dev_mask / test_mask) or a .pt dict of those tensors.
        edges: with a node CSV: the edge CSV (source, target: node ids).
        undirected: add each edge's reverse (GAT's and GCN's graphs are symmetric).
        feature_columns: the node CSV's feature columns, comma-separated (none: every column
            but the id, label and split ones).
        id_column: the node CSV's id column.
        label_column: the node CSV's label column (blank: an unlabelled node).
        split_column: the node CSV's split column (train, dev, test, none, or blank: cut).
        source_column: the edge CSV's source column.
        target_column: the edge CSV's target column.
        split: the fractions of the labelled nodes without a split value cut as dev and test.
        seed: seeds that cut.
        normalize: row (divide each node's features by their sum, as GAT and GCN do) or none.
    """

    nodes: str = ""
    edges: str = ""
    undirected: bool = True
    feature_columns: str = ""
    id_column: str = "id"
    label_column: str = "label"
    split_column: str = "split"
    source_column: str = "source"
    target_column: str = "target"
    split: tuple[float, float] = (0.1, 0.1)
    seed: int = 0
    normalize: str = "row"

    def __post_init__(self) -> None:
        check_split(self.split)
        if self.normalize not in ("row", "none"):
            raise ValueError(f"data.normalize: row or none, got {self.normalize!r}")


def as_graph_options(value: Any) -> GraphDataOptions:
    """``value`` (a :class:`GraphDataOptions` or a mapping of its fields) as one."""
    return as_options(GraphDataOptions, value)


class RawGraph(NamedTuple):
    """A graph as read: node ``ids``, features ``x`` ``(n, f)`` float32, ``edge_index``
    ``(2, E)`` (positions, as given), ``labels`` (``""``: none), ``split`` values (normalised:
    train, dev, test, none or ``""``) and ``where`` each node was read (for errors)."""

    ids: list[str]
    x: Tensor
    edge_index: Tensor
    labels: list[str]
    split: list[str]
    where: list[str]


def read_graph(options: GraphDataOptions) -> RawGraph:
    """The graph of the user's files (module docstring).

    Raises:
        FileNotFoundError: no such file (naming the option).
        ValueError: one line naming the file (and row): a missing column or array, a feature
            that is not a number, an unknown split value, a duplicate id, an edge naming an
            unknown node, a PyG ``Data`` pickle.
    """
    path = Path(options.nodes)
    if not path.is_file():
        raise FileNotFoundError(f"--data.nodes: no such file {options.nodes}")
    if path.suffix in (".npz", ".pt"):
        if options.edges:
            raise ValueError(f"--data.edges: a {path.suffix} file holds its edges (edge_index); "
                             "give --data.edges with a node CSV only")  # fmt: skip
        arrays = _npz(path) if path.suffix == ".npz" else _pt(path)
        return _from_arrays(path, arrays)
    if not options.edges:
        raise ValueError(f"--data.edges: a node CSV ({path}) needs an edge CSV (source,target)")
    return _from_csv(path, Path(options.edges), options)


def _from_csv(path: Path, edges_path: Path, o: GraphDataOptions) -> RawGraph:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = list(reader.fieldnames or [])
        _require(path, header, [o.id_column, o.label_column], "--data.id_column / label_column")
        named = [c.strip() for c in o.feature_columns.split(",") if c.strip()]
        _require(path, header, named, "--data.feature_columns")
        special = {o.id_column, o.label_column, o.split_column}
        features = named or [c for c in header if c not in special]
        if not features:
            raise ValueError(f"{path}: no feature column (the header has {', '.join(header)})")
        ids, rows, labels, split, where = [], [], [], [], []
        seen: dict[str, str] = {}
        for i, row in enumerate(reader, 1):
            at = f"{path}: row {i} (line {reader.line_num})"
            node = (row[o.id_column] or "").strip()
            if not node or node in seen:
                raise ValueError(f"{at}: {'empty' if not node else 'duplicate'} node id "
                                 f"{node!r}" + (f" (first at {seen[node]})" if node else ""))  # fmt: skip
            seen[node] = at
            try:
                rows.append([float(row[c]) for c in features])
            except (TypeError, ValueError):
                bad = next(c for c in features if not _is_float(row[c]))
                raise ValueError(f"{at}: feature {bad!r}: expected a number, got "
                                 f"{row[bad]!r}") from None  # fmt: skip
            ids.append(node)
            labels.append((row[o.label_column] or "").strip())
            split.append(_split_value((row.get(o.split_column) or "").strip().lower(), at))
            where.append(at)
    if not ids:
        raise ValueError(f"{path}: no nodes")
    index = {node: k for k, node in enumerate(ids)}
    src, dst = [], []
    if not edges_path.is_file():
        raise FileNotFoundError(f"--data.edges: no such file {edges_path}")
    with open(edges_path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        _require(edges_path, list(reader.fieldnames or []), [o.source_column, o.target_column],
                 "--data.source_column / target_column")  # fmt: skip
        for i, row in enumerate(reader, 1):
            for column, out in ((o.source_column, src), (o.target_column, dst)):
                node = (row[column] or "").strip()
                if node not in index:
                    raise ValueError(f"{edges_path}: row {i} (line {reader.line_num}): {column} "
                                     f"{node!r} is not a node id of {path}")  # fmt: skip
                out.append(index[node])
    x = torch.tensor(rows, dtype=torch.float32)
    return RawGraph(ids, x, torch.tensor([src, dst], dtype=torch.long).view(2, -1), labels,
                    split, where)  # fmt: skip


def _require(path: Path, header: list[str], columns: list[str], option: str) -> None:
    missing = [c for c in columns if c not in header]
    if missing:
        raise ValueError(f"{path}: no column {' or '.join(map(repr, missing))} (the header has "
                         f"{', '.join(header) or 'nothing'}); name yours with {option}")  # fmt: skip


def _is_float(text: Any) -> bool:
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


def _split_value(value: str, where: str) -> str:
    if value not in SPLIT_VALUES:
        raise ValueError(f"{where}: split {value!r}: expected train, dev (or val), test, none "
                         "or blank (cut by --data.split)")  # fmt: skip
    return SPLIT_VALUES[value]


def _npz(path: Path) -> dict[str, np.ndarray]:
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a .npz file numpy can read (numpy.savez's zip of arrays)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {k: archive[k] for k in archive.files}
    except ValueError as err:
        raise ValueError(f"{path}: a .npz numpy cannot read without pickles ({err}); save "
                         "numeric or string arrays") from None  # fmt: skip
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise ValueError(f"{path}: not a .npz file numpy can read ({err})") from None


def _pt(path: Path) -> dict[str, np.ndarray]:
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # the safe unpickler refuses any class it does not know
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"{path}: not a dict of tensors torch.load(weights_only=True) can read ({reason}); "
            "a PyG Data object is refused (unpickling it runs PyG's code): save "
            "torch.save(data.to_dict(), FILE) or numpy arrays in a .npz"
        ) from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: expected a dict of tensors (torch.save(data.to_dict(), FILE)), "
                         f"got {type(loaded).__name__}")  # fmt: skip
    return {str(k): v.numpy() if isinstance(v, Tensor) else np.asarray(v)
            for k, v in loaded.items()}  # fmt: skip


def _from_arrays(path: Path, a: dict[str, np.ndarray]) -> RawGraph:
    missing = [k for k in ("x", "edge_index", "y") if k not in a]
    if missing:
        raise ValueError(f"{path}: no array {' or '.join(map(repr, missing))} (it holds "
                         f"{', '.join(sorted(a)) or 'nothing'}); expected x (n, f), edge_index "
                         "(2, E), y (n,) and optional train_mask / dev_mask / test_mask")  # fmt: skip
    x, edges, y = a["x"], a["edge_index"], a["y"]
    n = len(x)
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.number):
        raise ValueError(f"{path}: x: expected numbers (n, f), got {x.dtype} {x.shape}")
    if y.shape != (n,):
        raise ValueError(f"{path}: y: expected one label per node ({n},), got shape {y.shape}")
    if edges.ndim != 2 or edges.shape[0] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise ValueError(f"{path}: edge_index: expected integers (2, E), got {edges.dtype} "
                         f"{edges.shape}")  # fmt: skip
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        bad = int(np.argmax((edges < 0).any(0) | (edges >= n).any(0)))
        raise ValueError(f"{path}: edge_index column {bad} ({edges[0, bad]} -> {edges[1, bad]}) "
                         f"names a node outside 0..{n - 1}")  # fmt: skip
    if np.issubdtype(y.dtype, np.integer):
        labels = [str(v) if v >= 0 else "" for v in y.tolist()]
    else:
        labels = [str(v).strip() for v in y.tolist()]
    split = [""] * n
    for name, key in (("train", "train_mask"), ("dev", "dev_mask"), ("dev", "val_mask"),
                      ("test", "test_mask")):  # fmt: skip
        if key in a:
            mask = a[key].astype(bool)
            if mask.shape != (n,):
                raise ValueError(f"{path}: {key}: expected ({n},), got shape {mask.shape}")
            for i in np.flatnonzero(mask).tolist():
                split[i] = name
    if any(k in a for k in ("train_mask", "dev_mask", "val_mask", "test_mask")):
        split = [s or "none" for s in split]  # masks given: a node in none is in no split
    ids = [str(v) for v in a["ids"].tolist()] if "ids" in a else [str(i) for i in range(n)]
    where = [f"{path}: node {i}" for i in range(n)]
    return RawGraph(ids, torch.from_numpy(x.astype(np.float32)), torch.from_numpy(
        edges.astype(np.int64)), labels, split, where)  # fmt: skip
