"""The IDX reader: round trip, gzip, and a clear error for every broken file."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import torch

from attnlab.lab.data.registry import DataFile, get_dataset, resolve_file
from attnlab.lab.images import IdxError, RandomCropFlip, read_idx, write_idx
from attnlab.lab.images.augment import random_crop

FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.mark.parametrize("name", ["x.idx", "x.idx.gz"])
def test_round_trip(tmp_path: Path, name: str) -> None:
    x = torch.randint(0, 256, (5, 4, 3), dtype=torch.uint8)
    path = write_idx(tmp_path / name, x)
    assert path.read_bytes()[:2] == (b"\x1f\x8b" if name.endswith(".gz") else b"\x00\x00")
    assert torch.equal(read_idx(path, ndim=3), x)


def test_wrong_magic_number(tmp_path: Path) -> None:
    path = tmp_path / "bad.idx"
    path.write_bytes(b"\x01\x02\x08\x01" + bytes(8))
    with pytest.raises(IdxError, match=r"bad\.idx: bad magic number 0x01020801"):
        read_idx(path)


def test_wrong_type_and_dims(tmp_path: Path) -> None:
    path = write_idx(tmp_path / "x.idx", torch.zeros(3, dtype=torch.uint8))
    with pytest.raises(IdxError, match="1 dimensions; expected 3"):
        read_idx(path, ndim=3)
    data = bytearray(path.read_bytes())
    data[2] = 0x0D  # float32
    path.write_bytes(bytes(data))
    with pytest.raises(IdxError, match="value type 0x0d; expected 0x08"):
        read_idx(path)


@pytest.mark.parametrize("cut", [2, 7, 20])
def test_truncated_file(tmp_path: Path, cut: int) -> None:
    path = write_idx(tmp_path / "x.idx", torch.zeros(2, 3, 4, dtype=torch.uint8))
    path.write_bytes(path.read_bytes()[:-cut] if cut != 2 else path.read_bytes()[:2])
    with pytest.raises(IdxError, match=r"x\.idx: (truncated|.*too short)"):
        read_idx(path)


def test_trailing_bytes(tmp_path: Path) -> None:
    path = write_idx(tmp_path / "x.idx", torch.zeros(2, 2, dtype=torch.uint8))
    path.write_bytes(path.read_bytes() + b"\x00")
    with pytest.raises(IdxError, match="trailing bytes"):
        read_idx(path)


def test_truncated_gzip(tmp_path: Path) -> None:
    data = gzip.compress(bytes(4 + 4 + 100))
    path = tmp_path / "x.idx.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(IdxError, match=r"x\.idx\.gz: corrupt or truncated gzip"):
        read_idx(path)


def test_installed_copy_is_found_first(tmp_path: Path) -> None:
    """A DataFile's installed copy (a Debian package's) wins when its sha256 matches; one with
    another sha256 is skipped."""
    good = tmp_path / "a.gz"
    good.write_bytes(b"abc")
    sha = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    file = DataFile("x/a.gz", "https://example.invalid/a.gz", sha, installed=(str(good),))
    assert resolve_file(file, mirror=tmp_path / "empty") == good
    good.write_bytes(b"abd")
    with pytest.raises(FileNotFoundError, match="not in the mirror"):
        resolve_file(file, mirror=tmp_path / "empty")


@pytest.mark.skipif(not FASHION.is_dir(), reason="Debian's dataset-fashion-mnist not installed")
def test_fashion_mnist_from_the_debian_package() -> None:
    files = get_dataset("fashion-mnist").files
    labels = read_idx(resolve_file(files["test-labels"]), ndim=1)
    assert labels.shape == (10000,) and int(labels.max()) == 9
    assert torch.bincount(labels.long()).tolist() == [1000] * 10


def test_augmentation_is_a_shift_or_flip_and_identity_in_eval() -> None:
    x = torch.rand(6, 1, 5, 5)
    aug = RandomCropFlip(padding=2)
    assert torch.equal(aug.eval()(x), x)
    torch.manual_seed(0)
    y = aug.train()(x)
    assert y.shape == x.shape
    torch.manual_seed(3)
    z = random_crop(x, 1)
    # each output is the input shifted by at most one pixel (zeros coming in)
    for i in range(6):
        shifts = [torch.nn.functional.pad(x[i], (1, 1, 1, 1))[:, r : r + 5, c : c + 5]
                  for r in range(3) for c in range(3)]  # fmt: skip
        assert any(torch.equal(z[i], s) for s in shifts)


@pytest.mark.compile
def test_augmentation_compiles_for_batches_of_any_size_and_draws_as_eager() -> None:
    # torch.compile(dynamic=True) cannot trace randint of a symbolic batch size: the draws run
    # eagerly, so a compiled model trains on batches of several sizes (fashion crashed)
    aug = RandomCropFlip(padding=2).train()
    compiled = torch.compile(aug, dynamic=True)
    for b in (3, 5, 7):
        x = torch.rand(b, 1, 6, 6)
        torch.manual_seed(b)
        expected = aug(x)
        torch.manual_seed(b)
        assert torch.equal(compiled(x), expected)
