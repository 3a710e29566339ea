"""Atomic file writes: a reader (or a crash) never sees a half-written file.

The data goes to a temporary file in the *same directory* (so the rename cannot cross file
systems), is flushed and ``fsync``-ed, then ``os.replace`` swaps it in; the directory is
``fsync``-ed too so the rename survives a power loss. If writing fails, the temporary file is
removed and the previous file is left untouched.

A process killed mid-write (SIGKILL, power loss) cannot remove its temporary file: it stays as
``.<name>.<random>.tmp`` beside ``<name>``. :func:`remove_stale_temp_files` removes those of
given names; a run calls it on start and resume, holding the run directory's lock, so that no
live writer of those names can be hit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from attnlab.lab.train.errors import RunError
from attnlab.sizes import format_bytes

__all__ = [
    "DiskFullError",
    "atomic_write",
    "atomic_write_text",
    "temp_file_pattern",
    "remove_stale_temp_files",
]

TEMP_SUFFIX = ".tmp"


def temp_file_pattern(name: str) -> str:
    """The glob of the temporary files that :func:`atomic_write` uses for a file ``name``."""
    return f".{name}.*{TEMP_SUFFIX}"


class DiskFullError(RunError):
    """The file system filled up (or a quota was reached) while a file was written; the
    previous file of that name, if any, is intact. The message names the directory, the bytes
    needed and the bytes free."""


def atomic_write(
    path: str | Path, write: Callable[[BinaryIO], object], *, size_hint: int | None = None
) -> Path:
    """Call ``write(f)`` on a temporary binary file, then atomically rename it to ``path``.

    Args:
        path: the file to (re)place.
        write: writes the whole content to the binary file it is given.
        size_hint: at least how many bytes ``write`` writes, for the message of a full disk.

    Raises:
        DiskFullError: no space left (``ENOSPC``, or ``EDQUOT``), whatever the writer raised
            about it (``torch.save`` raises a ``RuntimeError`` over the ``OSError``).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600 files
        os.replace(tmp, path)
    except BaseException as err:
        written = os.path.getsize(tmp) if os.path.exists(tmp) else 0
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if _disk_full(err):
            raise DiskFullError(_disk_full_message(path, max(written, size_hint or 0))) from None
        raise
    _fsync_dir(path.parent)
    return path


def _disk_full(err: BaseException | None) -> bool:
    """Whether ``err`` or an exception it arose from (its context or cause) is ENOSPC/EDQUOT."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        err = err.__cause__ or err.__context__
    return False


def _disk_full_message(path: Path, needed: int) -> str:
    free = shutil.disk_usage(path.parent).free
    kept = (f"the previous {path.name} is intact" if path.exists()
            else f"no {path.name} was written")  # fmt: skip
    return (
        f"{path.parent}: no space left on device writing {path.name}: it needs at least "
        f"{format_bytes(needed)}, {format_bytes(free)} free; {kept}. Free some space (or "
        "choose another directory) and run again (a run that saved a last.pt continues with "
        "--resume)"
    )


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``path``."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def remove_stale_temp_files(directory: str | Path, names: Iterable[str]) -> dict[Path, int]:
    """Remove the temporary files that killed :func:`atomic_write` calls left for ``names`` in
    ``directory`` (a name may be a glob: ``epoch-*.pt``); return what was removed, with each
    file's size in bytes.

    Only call it when no other process can be writing those names there (e.g. holding the
    directory's lock): a live writer's temporary file matches the same pattern.
    """
    directory = Path(directory)
    removed: dict[Path, int] = {}
    for name in names:
        for tmp in sorted(directory.glob(temp_file_pattern(name))):
            if tmp.is_file() and not tmp.is_symlink():
                with contextlib.suppress(FileNotFoundError):
                    size = tmp.stat().st_size
                    tmp.unlink()
                    removed[tmp] = size
    return removed


def _fsync_dir(directory: Path) -> None:
    # Not every platform can open a directory (Windows); the rename is still atomic there.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
