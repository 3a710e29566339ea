"""IDX files (MNIST / Fashion-MNIST), parsed by hand with checks.

The format (LeCun et al.): a 4-byte magic number ``0x00 0x00 TYPE NDIM`` (``TYPE`` 0x08 is
unsigned bytes, the only type these datasets use), then ``NDIM`` big-endian ``uint32`` sizes,
then the ``prod(sizes)`` values. Files may be gzip-compressed (``.gz``: detected by their own
magic bytes, not the name). Every inconsistency (a wrong magic number, a type other than
unsigned bytes, a size that disagrees with the data, a truncated or corrupt gzip stream) raises
:class:`IdxError`, a ``ValueError`` that names the file.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["IdxError", "read_idx", "write_idx"]

_GZIP_MAGIC = b"\x1f\x8b"
_UBYTE = 0x08


class IdxError(ValueError):
    """An IDX file that cannot be read as one (the message names the file and the reason)."""


def _raw_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if not data.startswith(_GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (EOFError, OSError, zlib.error) as err:  # truncated stream, bad CRC, bad deflate data
        raise IdxError(f"{path}: corrupt or truncated gzip data ({err})") from None


def read_idx(path: str | Path, *, ndim: int | None = None) -> Tensor:
    """The array stored in an IDX file (optionally gzipped), as a ``uint8`` tensor.

    Args:
        path: the file.
        ndim: the number of dimensions expected (3 for images ``(n, rows, cols)``, 1 for
            labels ``(n,)``); None accepts any.

    Returns:
        A ``uint8`` tensor of the file's sizes.

    Raises:
        IdxError: the file is not IDX, not unsigned bytes, not ``ndim``-dimensional, or its
            length disagrees with its header (truncated, or trailing bytes).
        FileNotFoundError: no such file.
    """
    path = Path(path)
    data = _raw_bytes(path)
    if len(data) < 4:
        raise IdxError(f"{path}: {len(data)} bytes, too short for an IDX header (4-byte magic)")
    zero, kind, dims = struct.unpack(">HBB", data[:4])
    if zero != 0:
        raise IdxError(
            f"{path}: bad magic number 0x{data[:4].hex()}; an IDX file starts 0x0000TTDD "
            "(TT the value type, DD the number of dimensions)"
        )
    if kind != _UBYTE:
        raise IdxError(f"{path}: value type 0x{kind:02x}; expected 0x08 (unsigned bytes)")
    if ndim is not None and dims != ndim:
        raise IdxError(f"{path}: {dims} dimensions; expected {ndim}")
    header = 4 + 4 * dims
    if len(data) < header:
        raise IdxError(f"{path}: truncated header ({len(data)} bytes, expected {header})")
    sizes = struct.unpack(f">{dims}I", data[4:header])
    expected = header + int(np.prod(sizes, dtype=np.int64))
    if len(data) != expected:
        what = "truncated" if len(data) < expected else "has trailing bytes"
        raise IdxError(
            f"{path}: {what}: sizes {sizes} need {expected} bytes, the file has {len(data)}"
        )
    array = np.frombuffer(data, dtype=np.uint8, offset=header).reshape(sizes)
    return torch.from_numpy(array.copy())


def write_idx(path: str | Path, array: Tensor, *, compress: bool | None = None) -> Path:
    """Write a ``uint8`` array as an IDX file (gzipped when ``compress``, default: the name
    ends in ``.gz``); the inverse of :func:`read_idx`, for fixtures and exports."""
    path = Path(path)
    array = torch.as_tensor(array)
    if array.dtype != torch.uint8:
        raise ValueError(f"array: expected dtype uint8, got {array.dtype}")
    header = struct.pack(">HBB", 0, _UBYTE, array.dim())
    header += struct.pack(f">{array.dim()}I", *array.shape)
    data = header + array.contiguous().numpy().tobytes()
    if path.suffix == ".gz" if compress is None else compress:
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path
