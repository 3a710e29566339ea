"""The run directory: checked before anything loads, locked while a run uses it, and never
holding two runs at once.

:func:`open_run_dir` (rank 0 does the work; every rank gets the verdict) runs, in order:

1. **Check** ``out_dir``: a directory (created if missing) where a file can be written, before
   any data is loaded, so a typo or a read-only path fails at once, naming the path and why.
2. **Lock** it: an exclusive ``flock`` on ``out_dir/.lock`` held for the life of the run. The
   file names the holder (pid, host, start time, command), so a second run into the directory
   fails saying who holds it. The kernel drops the lock when its process dies, however it
   dies: a lock file left by a dead process is taken over, with a warning naming it.
3. **Clean** the temporary files that killed atomic writes of the run's files left behind.
4. **Decide** from what the directory holds:

   ====================  ==========  ======================================================
   the directory holds   flags       outcome
   ====================  ==========  ======================================================
   no run files          (none)      a new run
   a run                 (none)      :class:`RunError`: ``--overwrite`` or ``--resume``
   a run                 overwrite   the old run's files are removed, then a new run
   ``last.pt``           resume      the run continues from it
   no ``last.pt``        resume      :class:`RunError` naming the path: nothing to resume
   ====================  ==========  ======================================================

Removing the old run's files *before* the new run writes any (``best.pt`` first: it is what
``predict`` serves) means an interrupted overwrite leaves part of the old run or part of the
new one, never ``best.pt`` of one beside ``config.json`` of the other.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from attnlab.lab.train.atomic import TEMP_SUFFIX, remove_stale_temp_files
from attnlab.lab.train.distributed import DistEnv, broadcast_object
from attnlab.lab.train.errors import RunError
from attnlab.lab.train.tensorboard import TENSORBOARD_DIR

try:  # POSIX; elsewhere runs are not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "RUN_FILES",
    "EPOCH_SNAPSHOTS",
    "LOCK_NAME",
    "RunLock",
    "RunDirectory",
    "check_out_dir",
    "open_run_dir",
]

logger = logging.getLogger(__name__)

#: the files a run writes, in the order an overwrite removes them (what predict serves first)
RUN_FILES = ("best.pt", "last.pt", "metrics.json", "metrics.csv", "config.json")
#: the glob of the epoch snapshots ``train.keep_epochs`` keeps (``epoch-005.pt``); an overwrite
#: removes them first, so that no old run's epoch is averaged with the new run's
EPOCH_SNAPSHOTS = "epoch-*.pt"
LOCK_NAME = ".lock"
_PROBE = ".attnlab-probe"


def check_out_dir(path: str | Path, *, must_exist: bool = False) -> bool:
    """Make sure ``path`` is a directory this process can write to, creating it if missing.

    Args:
        path: the run directory.
        must_exist: refuse to create it (resuming: a missing directory is a typo, not a run).

    Returns:
        Whether the directory was created.

    Raises:
        RunError: naming ``path`` and the reason (a file is in the way, permission denied,
            read-only file system, ...).
    """
    path = Path(path)
    created = False
    try:
        if path.exists() and not path.is_dir():
            raise RunError(f"out_dir {path}: exists and is not a directory")
        if not path.exists():
            if must_exist:
                raise RunError(
                    f"resume: {path} does not exist, so there is no run to continue; check "
                    "--out_dir, or start a new run without --resume"
                )
            ancestor = path.parent
            while not ancestor.exists() and ancestor != ancestor.parent:
                ancestor = ancestor.parent
            if not ancestor.is_dir():
                raise RunError(f"out_dir {path}: cannot create it ({ancestor} is not a directory)")
            path.mkdir(parents=True, exist_ok=True)
            created = True
        fd, probe = tempfile.mkstemp(dir=path, prefix=f"{_PROBE}.", suffix=TEMP_SUFFIX)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        action = "create it" if not path.is_dir() else "write there"
        raise RunError(f"out_dir {path}: cannot {action} ({err.strerror or err})") from err
    return created


class RunLock:
    """An exclusive, non-blocking ``flock`` on a lock file that names its holder.

    The file is removed on :meth:`release` (so a finished run leaves no trace); a process that
    opened it just before finds, after locking, that the path names another file (or none) and
    tries again. A lock still held when the object is garbage-collected or the interpreter exits
    is released then.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> dict[str, Any] | None:
        """Take the lock; return the previous holder's record if it was left by a dead process
        (taken over), else None.

        Raises:
            RunError: another live process holds it (the message names it).
        """
        if fcntl is None or self.held:  # pragma: no cover
            return None
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunError(
                    f"{self.path.parent} is in use by another run ({_describe(holder)}); wait "
                    "for it to finish, stop it, or choose another --out_dir"
                ) from None
            try:  # the file we locked must still be the one at the path
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _read_holder(fd)
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        os.fsync(fd)
        self._fd = fd
        self._finalizer = weakref.finalize(self, _unlock, fd, str(self.path))
        return previous or None

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        if self._finalizer is not None:
            self._finalizer()
        self._fd = self._finalizer = None


def _unlock(fd: int, path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)  # while still holding it: nobody can lock the name in between
    with contextlib.suppress(OSError):
        os.close(fd)


def _read_holder(fd: int) -> dict[str, Any]:
    for _ in range(5):  # a holder that just locked may not have written its record yet
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(os.pread(fd, 4096, 0).decode() or "null")
            if isinstance(data, dict):
                return data
        time.sleep(0.02)
    return {}


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "pid unknown"
    text = f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
    text += f", started {holder.get('started', '?')}"
    if holder.get("command"):
        text += f": {holder['command']}"
    return text


class RunDirectory:
    """An opened run directory (:func:`open_run_dir`); :meth:`release` when the run ends."""

    def __init__(self, path: Path, *, created: bool = False, lock: RunLock | None = None) -> None:
        self.path, self.created, self.lock = path, created, lock

    def release(self) -> None:
        """Drop the lock; remove the directory if this run created it and wrote nothing
        (e.g. the data failed to load). Idempotent."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None
            if self.created:
                with contextlib.suppress(OSError):
                    self.path.rmdir()  # only succeeds when empty


def _open(path: Path, *, resume: bool, overwrite: bool) -> RunDirectory:
    created = check_out_dir(path, must_exist=resume)
    lock = RunLock(path / LOCK_NAME)
    try:
        stale = lock.acquire()
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                path.rmdir()
        raise
    run_dir = RunDirectory(path, created=created, lock=lock)
    try:
        if stale:
            logger.warning(
                "%s: took over the lock left by a process that is gone (%s)",
                path, _describe(stale),
            )  # fmt: skip
        removed = remove_stale_temp_files(path, (*RUN_FILES, EPOCH_SNAPSHOTS, _PROBE))
        if removed:
            logger.warning(
                "%s: removed %d temporary file(s) left by interrupted writes (%.1f MB): %s",
                path, len(removed), sum(removed.values()) / 1e6,
                ", ".join(p.name for p in removed),
            )  # fmt: skip
        snapshots = sorted(p.name for p in path.glob(EPOCH_SNAPSHOTS))
        existing = [name for name in RUN_FILES if (path / name).exists()]
        if resume:
            if not (path / "last.pt").is_file():
                holds = f"it holds {', '.join(sorted(existing))}" if existing else "it holds no run"
                raise RunError(
                    f"resume: no {path / 'last.pt'} to continue ({holds}); check --out_dir, or "
                    "start a new run without --resume"
                )
        elif existing or snapshots:
            existing = [*snapshots, *existing]
            if not overwrite:
                raise RunError(
                    f"{path} already holds a run ({', '.join(sorted(existing))}); pass "
                    "--overwrite (train.overwrite=true) to replace it, --resume to continue it, "
                    "or choose another --out_dir"
                )
            for name in existing:  # snapshots, then RUN_FILES order (config.json last)
                (path / name).unlink()
            if (path / TENSORBOARD_DIR).is_dir():  # the old run's curves would mix with the new
                shutil.rmtree(path / TENSORBOARD_DIR)
                existing.append(TENSORBOARD_DIR + "/")
            logger.warning(
                "%s: overwrite: removed the previous run (%s)", path, ", ".join(existing)
            )
    except BaseException:
        run_dir.release()
        raise
    return run_dir


def open_run_dir(
    path: str | Path, env: DistEnv, *, resume: bool = False, overwrite: bool = False
) -> RunDirectory:
    """Check, lock and prepare the run directory ``path`` (see the module docstring).

    Collective under DDP: rank 0 does the work and holds the lock; every rank raises the same
    :class:`RunError` if it fails, so no rank is left waiting in a collective.

    Args:
        path: the run directory (``cfg.out_dir``).
        env: this process's place in the run.
        resume: continue the run in ``path`` (its ``last.pt`` must exist).
        overwrite: replace a run that ``path`` already holds.

    Raises:
        RunError: ``resume`` and ``overwrite`` together, or any refusal above.
    """
    path = Path(path)
    if resume and overwrite:
        raise RunError("resume and overwrite exclude each other: continue the run, or replace it")
    run_dir, failure, message = RunDirectory(path), None, None
    if env.is_main:
        try:
            run_dir = _open(path, resume=resume, overwrite=overwrite)
        except Exception as err:  # the other ranks must stop too, whatever it was
            failure, message = err, str(err)
    message = broadcast_object(message, env)
    if failure is not None:
        raise failure
    if message is not None:
        raise RunError(f"rank 0: {message}")
    return run_dir
