"""A cap on a process's resident memory, so that one runaway run stops, saved, instead of
swapping the machine to a halt.

A report's g2p run once grew from 2.5 to 21 GiB resident within one training step, on a
24 GiB machine, which stalled until the run was killed by hand; resumed from its checkpoint, it
ran past that step without growing (docs/report.md, the tenth session). Whatever the cause, a
report that runs for days must not depend on it not recurring. :class:`MemoryGuard` watches
the process from a thread, about once a second:

- over ``limit``, it first hands freed memory back to the system
  (:func:`~attnlab.lab.train.host_memory.release_freed_memory`: the long commands run on jemalloc
  with purging off, so a process's resident size is the most it has ever held) and looks again;
- if it is still over, it sends the process a SIGINT, which a training run takes as Ctrl-C:
  it finishes its step, writes ``last.pt`` and stops (:mod:`~attnlab.lab.train.interrupt`);
  :attr:`MemoryGuard.tripped` says why, for the caller's message;
- past ``limit * HARD_FACTOR`` (growing faster than a step ends, as that run did), it writes
  one line to stderr and kills the process outright: the run resumes from its last checkpoint.

Resident memory is read from ``/proc/self/statm``; elsewhere the guard does nothing.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import TracebackType

from attnlab.lab.train.host_memory import release_freed_memory

__all__ = ["GIB", "HARD_FACTOR", "MemoryGuard", "resident_bytes", "total_memory_bytes"]

logger = logging.getLogger(__name__)

GIB = 1024**3
#: the guard kills the process outright once it holds this many times its limit
HARD_FACTOR = 1.25


def resident_bytes() -> int | None:
    """This process's resident set size in bytes, or None where ``/proc`` does not say."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def total_memory_bytes() -> int | None:
    """The machine's physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


class MemoryGuard:
    """Context manager: while entered, stop this process's run if it holds more than ``limit``
    bytes (module docstring).

    Args:
        limit: the most resident memory, in bytes.
        interval_s: how often to look.
        rss: reads the resident size (tests give their own).
        stop: asks the run to stop (default: a SIGINT to this process).
        kill: ends the process at once (default: SIGKILL).
    """

    def __init__(
        self,
        limit: int,
        *,
        interval_s: float = 1.0,
        rss: Callable[[], int | None] = resident_bytes,
        stop: Callable[[], None] | None = None,
        kill: Callable[[], None] | None = None,
    ) -> None:
        if limit <= 0:
            raise ValueError(f"limit: expected a positive number of bytes, got {limit}")
        self.limit, self.interval_s, self._rss = limit, interval_s, rss
        self._stop_run = stop or (lambda: os.kill(os.getpid(), signal.SIGINT))
        self._kill = kill or (lambda: os.kill(os.getpid(), signal.SIGKILL))
        #: the resident bytes that made the guard stop the run, or None
        self.tripped: int | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MemoryGuard:
        if self._rss() is None:  # nothing to watch on this system
            return self
        self._thread = threading.Thread(target=self._watch, name="memory-guard", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:  # fmt: skip
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def message(self) -> str:
        """What stopped the run, in a sentence (once :attr:`tripped`)."""
        return (f"its process held {self.tripped / GIB:.1f} GiB, over the limit of "
                f"{self.limit / GIB:.1f} GiB")  # fmt: skip

    def _watch(self) -> None:
        while not self._done.wait(self.interval_s):
            if (self._rss() or 0) <= self.limit:
                continue
            release_freed_memory()  # what it holds may be memory freed and kept for reuse
            held = self._rss() or 0
            if held > self.limit * HARD_FACTOR:
                line = (f"attnlab: this process holds {held / GIB:.1f} GiB, past "
                        f"{HARD_FACTOR:g} x its limit of {self.limit / GIB:.1f} GiB: killed; "
                        "its run resumes from its last checkpoint")  # fmt: skip
                for stream in {sys.stderr, sys.__stderr__} - {None}:  # a job's log, the terminal
                    print(line, file=stream, flush=True)
                self._kill()
                return
            if held > self.limit and self.tripped is None:
                self.tripped = held
                logger.warning("memory: %s; stopping the run", self.message())
                self._stop_run()
