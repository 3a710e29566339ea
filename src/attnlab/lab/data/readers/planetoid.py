"""The Planetoid citation graphs (Cora, CiteSeer; Yang et al. 2016), read safely.

The ``ind.{name}.{x,y,tx,ty,allx,ally,graph}`` files are Python pickles, and unpickling runs
whatever callables a pickle names: a file from the network could run ``os.system``. They are
therefore read by :class:`RestrictedUnpickler`, whose ``find_class`` admits only the classes
and functions these files need (:data:`ALLOWED_GLOBALS`) and refuses anything else with a
:class:`UnsafePickleError` naming it. ``test.index`` is plain text.

Processing reproduces Kipf's ``gcn/utils.py::load_data`` and PyG's ``read_planetoid_data``:

* nodes are ``allx`` (labelled and unlabelled training nodes) followed by ``tx`` (test nodes),
  and the test rows are moved to the positions ``test.index`` names;
* CiteSeer lists 15 isolated test nodes without features or labels: they are padded with
  zero features and label 0, and belong to no split;
* edges: the ``graph`` dict of lists, self loops removed, made symmetric, de-duplicated, sorted
  by (destination, source);
* the public split: train = the first ``len(y)`` nodes (140 Cora / 120 CiteSeer), val = the
  next 500, test = the 1000 ``test.index`` nodes.

Features are returned raw (binary bag of words); :func:`row_normalize` is GAT's and GCN's
``preprocess_features``.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from attnlab.lab.data.readers.base import StrPath

__all__ = [
    "ALLOWED_GLOBALS",
    "PLANETOID_PARTS",
    "PlanetoidGraph",
    "RestrictedUnpickler",
    "UnsafePickleError",
    "read_planetoid",
    "restricted_load",
    "row_normalize",
]

#: the files of one Planetoid dataset, ``ind.{name}.{part}``
PLANETOID_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


def _numpy_reconstruct() -> Any:
    # numpy >= 2 moved numpy.core to numpy._core (the old name warns); the pickles name the old.
    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct
    return _reconstruct


def _csr_matrix() -> Any:
    from scipy.sparse import csr_matrix  # the pickles name the deprecated scipy.sparse.csr

    return csr_matrix


#: ``(module, name)`` as written in the pickles (Python 2 names) -> a function returning the
#: object. Nothing here runs code on construction beyond building arrays: ``numpy.ndarray`` and
#: ``_reconstruct`` make an empty array that ``__setstate__`` fills with bytes, ``numpy.dtype``
#: parses a type code, ``csr_matrix`` is filled from its pickled ``__dict__``, and
#: ``defaultdict(list)`` / ``list`` hold the adjacency lists.
ALLOWED_GLOBALS: Mapping[tuple[str, str], Any] = {
    ("numpy", "ndarray"): lambda: np.ndarray,
    ("numpy", "dtype"): lambda: np.dtype,
    ("numpy.core.multiarray", "_reconstruct"): _numpy_reconstruct,
    ("numpy._core.multiarray", "_reconstruct"): _numpy_reconstruct,
    ("scipy.sparse.csr", "csr_matrix"): _csr_matrix,
    ("scipy.sparse._csr", "csr_matrix"): _csr_matrix,
    ("collections", "defaultdict"): lambda: __import__("collections").defaultdict,
    ("__builtin__", "list"): lambda: list,
    ("builtins", "list"): lambda: list,
}


class UnsafePickleError(pickle.UnpicklingError):
    """A pickle referenced a class or function outside :data:`ALLOWED_GLOBALS`."""


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only :data:`ALLOWED_GLOBALS` (the Planetoid files' numpy
    arrays, scipy CSR matrices and ``defaultdict(list)``); any other global, such as
    ``os.system`` or ``builtins.eval``, raises :class:`UnsafePickleError` before it can run.

    Args:
        file: a binary file object.
        source: the file's name, for error messages.
    """

    def __init__(self, file: Any, *, source: str = "<pickle>") -> None:
        # latin1: the files are Python 2 pickles whose numpy arrays hold raw bytes in str.
        super().__init__(file, encoding="latin1")
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        factory = ALLOWED_GLOBALS.get((module, name))
        if factory is None:
            allowed = ", ".join(f"{m}.{n}" for m, n in ALLOWED_GLOBALS)
            raise UnsafePickleError(
                f"{self.source}: refusing to load {module}.{name}: a Planetoid pickle holds only "
                f"numpy arrays, scipy CSR matrices and adjacency lists (allowed: {allowed}); "
                "this file is corrupt or not what it claims to be"
            )
        return factory()


def restricted_load(path: StrPath) -> Any:
    """Unpickle ``path`` with :class:`RestrictedUnpickler`.

    Raises:
        UnsafePickleError: the pickle names a global outside :data:`ALLOWED_GLOBALS`.
        ValueError: the file is not a readable pickle (the message names it).
    """
    data = Path(path).read_bytes()
    try:
        return RestrictedUnpickler(io.BytesIO(data), source=str(path)).load()
    except UnsafePickleError:
        raise
    except Exception as err:  # truncated or garbage bytes: several exception types
        raise ValueError(f"{path}: not a readable Planetoid pickle: {err}") from None


class PlanetoidGraph(NamedTuple):
    """One Planetoid graph with its public split.

    Attributes:
        name: ``"cora"`` or ``"citeseer"``.
        x: ``(n, f)`` float32 raw features.
        y: ``(n,)`` int64 labels (0 for CiteSeer's padded isolated test nodes).
        edge_index: ``(2, E)`` int64 ``(source, destination)``, symmetric, no self loops.
        train_index, val_index, test_index: int64 node ids of the public split.
    """

    name: str
    x: Tensor
    y: Tensor
    edge_index: Tensor
    train_index: Tensor
    val_index: Tensor
    test_index: Tensor

    @property
    def num_nodes(self) -> int:
        return self.x.shape[0]

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1


def _dense(matrix: Any, path: Path) -> np.ndarray:
    array = matrix.toarray() if hasattr(matrix, "toarray") else np.asarray(matrix)
    if array.ndim != 2:
        raise ValueError(f"{path}: expected a 2-D matrix, got shape {array.shape}")
    return array.astype(np.float32)


def _edges(graph: Mapping[int, list[int]], num_nodes: int, path: Path) -> Tensor:
    if not isinstance(graph, Mapping):
        raise ValueError(f"{path}: expected a dict of adjacency lists, got {type(graph).__name__}")
    src = [int(s) for s, nbrs in graph.items() for _ in nbrs]
    dst = [int(d) for nbrs in graph.values() for d in nbrs]
    edges = torch.tensor([src + dst, dst + src], dtype=torch.long)  # both directions
    if edges.numel() and (int(edges.min()) < 0 or int(edges.max()) >= num_nodes):
        raise ValueError(f"{path}: node ids outside 0..{num_nodes - 1}")
    edges = edges[:, edges[0] != edges[1]]  # no self loops
    key = torch.unique(edges[1] * num_nodes + edges[0])  # sorted by (destination, source)
    return torch.stack([key % num_nodes, key // num_nodes])


def read_planetoid(folder: StrPath | Mapping[str, StrPath], name: str) -> PlanetoidGraph:
    """Read ``ind.{name}.*`` and build the graph with its public split (module docstring).

    Args:
        folder: the directory holding the files, or a mapping ``part -> path`` over
            :data:`PLANETOID_PARTS` (as :func:`attnlab.lab.data.fetch` returns).
        name: ``"cora"`` or ``"citeseer"`` (CiteSeer's isolated test nodes are padded).

    Raises:
        UnsafePickleError: a file names a global outside :data:`ALLOWED_GLOBALS`.
        ValueError: a missing part, or inconsistent sizes.
    """
    if isinstance(folder, Mapping):
        paths = {part: Path(folder[part]) for part in PLANETOID_PARTS if part in folder}
    else:
        paths = {part: Path(folder) / f"ind.{name}.{part}" for part in PLANETOID_PARTS}
    missing = [part for part in PLANETOID_PARTS if part not in paths or not paths[part].is_file()]
    if missing:
        raise ValueError(
            f"planetoid {name!r}: missing file(s) for {missing}; expected ind.{name}.*"
        )
    items = {part: restricted_load(paths[part]) for part in PLANETOID_PARTS if part != "test.index"}
    x, tx, allx = (_dense(items[p], paths[p]) for p in ("x", "tx", "allx"))
    y, ty, ally = (_dense(items[p], paths[p]) for p in ("y", "ty", "ally"))
    test_index = np.loadtxt(paths["test.index"], dtype=np.int64, ndmin=1)
    sorted_test = np.sort(test_index)
    if name.lower() == "citeseer":
        # Isolated test nodes have ids inside the test range but no row in tx / ty.
        lo, span = int(test_index.min()), int(test_index.max() - test_index.min()) + 1
        tx_ext = np.zeros((span, tx.shape[1]), np.float32)
        tx_ext[sorted_test - lo] = tx
        ty_ext = np.zeros((span, ty.shape[1]), np.float32)
        ty_ext[sorted_test - lo] = ty
        tx, ty = tx_ext, ty_ext
    features = np.concatenate([allx, tx])
    features[test_index] = features[sorted_test]
    labels = np.concatenate([ally, ty]).argmax(1)
    labels[test_index] = labels[sorted_test]
    n = features.shape[0]
    if labels.shape[0] != n:
        raise ValueError(f"planetoid {name!r}: {n} feature rows but {labels.shape[0]} labels")
    train = torch.arange(y.shape[0])
    return PlanetoidGraph(
        name=name,
        x=torch.from_numpy(features),
        y=torch.from_numpy(labels.astype(np.int64)),
        edge_index=_edges(items["graph"], n, paths["graph"]),
        train_index=train,
        val_index=torch.arange(y.shape[0], y.shape[0] + 500),
        test_index=torch.from_numpy(np.ascontiguousarray(sorted_test)),
    )


def row_normalize(x: Tensor) -> Tensor:
    """Divide each row by its sum (GAT's and GCN's ``preprocess_features``); all-zero rows
    (CiteSeer's padded nodes) stay zero."""
    sums = x.sum(dim=1, keepdim=True)
    return torch.where(sums > 0, x / sums.clamp_min(torch.finfo(x.dtype).tiny), x)
