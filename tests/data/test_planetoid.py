"""The Planetoid reader: sizes and split of the mirror's Cora and CiteSeer, equality with
PyG's processing, and the restricted unpickler refusing code."""

from __future__ import annotations

import importlib.util
import io
import os
import pickle

import pytest
import torch

from attnlab.lab.data.readers.planetoid import (
    PLANETOID_PARTS,
    RestrictedUnpickler,
    UnsafePickleError,
    read_planetoid,
    restricted_load,
    row_normalize,
)

# name: (nodes, features, classes, undirected edges * 2, train size)
SIZES = {"cora": (2708, 1433, 7, 10556, 140), "citeseer": (3327, 3703, 6, 9104, 120)}


@pytest.fixture(scope="module", params=sorted(SIZES))
def planetoid(request, data_mirror_or_none):
    if data_mirror_or_none is None:
        pytest.skip("no data mirror: set ATTNLAB_DATA or provide ../shared/data")
    return read_planetoid(data_mirror_or_none / "planetoid", request.param)


def test_sizes_and_public_split(planetoid):
    n, f, c, e, n_train = SIZES[planetoid.name]
    assert planetoid.x.shape == (n, f) and planetoid.x.dtype == torch.float32
    assert planetoid.y.shape == (n,) and planetoid.num_classes == c
    assert planetoid.edge_index.shape == (2, e)
    assert torch.equal(planetoid.train_index, torch.arange(n_train))
    assert torch.equal(planetoid.val_index, torch.arange(n_train, n_train + 500))
    assert planetoid.test_index.numel() == 1000
    splits = torch.cat([planetoid.train_index, planetoid.val_index, planetoid.test_index])
    assert splits.unique().numel() == splits.numel()  # disjoint


def test_edges_symmetric_without_self_loops(planetoid):
    src, dst = planetoid.edge_index
    n = planetoid.num_nodes
    assert not bool((src == dst).any())
    forward = set((dst * n + src).tolist())
    assert forward == set((src * n + dst).tolist())
    assert len(forward) == src.numel()  # no duplicates
    assert torch.equal(dst * n + src, (dst * n + src).sort().values)  # by (destination, source)


def test_citeseer_isolated_test_nodes_padded(planetoid):
    if planetoid.name != "citeseer":
        pytest.skip("only CiteSeer lists test nodes without features")
    empty = planetoid.x.sum(1) == 0
    assert int(empty.sum()) == 15
    assert not bool(torch.isin(empty.nonzero().view(-1), planetoid.test_index).any())
    assert bool((planetoid.y[empty] == 0).all())


def test_equal_to_pyg_processing(planetoid, data_mirror_or_none, tmp_path):
    if importlib.util.find_spec("torch_geometric") is None:
        pytest.skip("torch_geometric is not installed (optional peer: pip install attnlab[peers])")
    from torch_geometric.io.planetoid import read_planetoid_data

    for part in PLANETOID_PARTS:  # PyG reads a folder: symlinks to the mirror's files
        name = f"ind.{planetoid.name}.{part}"
        os.symlink(data_mirror_or_none / "planetoid" / name, tmp_path / name)
    ref = read_planetoid_data(str(tmp_path), planetoid.name)
    assert torch.equal(planetoid.x, ref.x)
    assert torch.equal(planetoid.y, ref.y)
    n = planetoid.num_nodes
    ours, theirs = (e[1] * n + e[0] for e in (planetoid.edge_index, ref.edge_index))
    assert torch.equal(ours.sort().values, theirs.sort().values)
    for index, mask in [(planetoid.train_index, ref.train_mask),
                        (planetoid.val_index, ref.val_mask),
                        (planetoid.test_index, ref.test_mask)]:  # fmt: skip
        assert torch.equal(index.sort().values, mask.nonzero().view(-1))


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_malicious_pickle_refused(tmp_path):
    path = tmp_path / "ind.cora.x"
    path.write_bytes(pickle.dumps(_Evil(), protocol=2))
    with pytest.raises(UnsafePickleError, match=r"refusing to load (posix|os|nt)\.system"):
        restricted_load(path)


def test_builtins_eval_refused():
    data = pickle.dumps(eval, protocol=2)  # a bare reference to builtins.eval
    with pytest.raises(UnsafePickleError, match=r"refusing to load (__builtin__|builtins)\.eval"):
        RestrictedUnpickler(io.BytesIO(data)).load()


def test_allowed_classes_load(tmp_path):
    import numpy as np
    import scipy.sparse as sp

    for obj in (np.arange(6.0).reshape(2, 3), sp.csr_matrix(np.eye(3))):
        path = tmp_path / "obj.pkl"
        path.write_bytes(pickle.dumps(obj, protocol=4))  # 2 would need _codecs.encode
        loaded = restricted_load(path)
        dense = loaded.toarray() if hasattr(loaded, "toarray") else loaded
        assert np.array_equal(dense, obj.toarray() if hasattr(obj, "toarray") else obj)


def test_garbage_file_names_itself(tmp_path):
    path = tmp_path / "ind.cora.y"
    path.write_bytes(b"not a pickle at all")
    with pytest.raises(ValueError, match="ind.cora.y"):
        restricted_load(path)


def test_missing_part_listed(tmp_path):
    with pytest.raises(ValueError, match=r"missing file\(s\).*'x'"):
        read_planetoid(tmp_path, "cora")


def test_row_normalize_keeps_zero_rows():
    x = torch.tensor([[1.0, 3.0], [0.0, 0.0], [2.0, 0.0]])
    out = row_normalize(x)
    assert torch.equal(out, torch.tensor([[0.25, 0.75], [0.0, 0.0], [1.0, 0.0]]))
