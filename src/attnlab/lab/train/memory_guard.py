"""A cap on the memory a process holds, so that one runaway run stops, saved, instead of
swapping the machine to a halt.

A report's g2p run once grew from 2.5 to 21 GiB resident within one training step, on a
24 GiB machine, which stalled until the run was killed by hand; resumed from its checkpoint, it
ran past that step without growing (docs/report.md, the tenth session). Whatever the cause, a
report that runs for days must not depend on it not recurring. :class:`MemoryGuard` watches
the process from a thread, about once a second:

- over ``limit``, it first hands freed memory back to the system
  (:func:`~attnlab.lab.train.host_memory.release_freed_memory`: the long commands run on jemalloc
  with purging off, so a process's resident size is the most it has ever held) and looks again;
- if it is still over, it asks the run to stop as a first Ctrl-C does, without a signal
  (:func:`~attnlab.lab.train.interrupt.request_stop`, so that a real Ctrl-C after it is
  still a first one): the run finishes its step, writes ``last.pt`` and stops (one still
  setting up stops after its first step); :attr:`MemoryGuard.tripped` says why, for the
  caller's message;
- past ``limit * HARD_FACTOR`` (growing faster than a step ends, as that run did), it writes
  one line to stderr and kills the process outright: the run resumes from its last checkpoint.

The memory is what the process holds in RAM and in swap (``VmRSS`` + ``VmSwap`` of
``/proc/self/status``: under pressure the kernel swaps out what it cannot keep resident);
elsewhere the guard does nothing.
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
from attnlab.lab.train.interrupt import request_stop, withdraw_request

__all__ = ["GIB", "HARD_FACTOR", "REASON", "MemoryGuard", "held_bytes", "total_memory_bytes"]

logger = logging.getLogger(__name__)

GIB = 1024**3
#: the guard kills the process outright once it holds this many times its limit
HARD_FACTOR = 1.25
#: what a run stopped by the guard says stopped it ("interrupted by REASON after step ...")
REASON = "the memory limit"


def held_bytes() -> int | None:
    """The bytes this process holds in RAM and swap (``VmRSS`` + ``VmSwap``), or None where
    ``/proc`` does not say."""
    try:
        with open("/proc/self/status") as status:
            fields = dict(line.split(":", 1) for line in status if line.startswith("Vm"))
        return sum(int(fields[name].split()[0]) * 1024 for name in ("VmRSS", "VmSwap")
                   if name in fields) if "VmRSS" in fields else None  # fmt: skip
    except (OSError, ValueError):
        return None


def total_memory_bytes() -> int | None:
    """The memory this process may use in bytes: the machine's, or its container's limit
    where that is lower (cgroup v2 ``memory.max``); None where the system does not say."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None
    try:
        with open("/sys/fs/cgroup/memory.max") as cgroup:
            return min(total, int(cgroup.read().strip()))
    except (OSError, ValueError):  # none, or "max"
        return total


class MemoryGuard:
    """Context manager: while entered, stop this process's run if it holds more than ``limit``
    bytes (module docstring).

    Args:
        limit: the most memory (RAM and swap: :func:`held_bytes`), in bytes.
        interval_s: how often to look.
        held: reads the memory the process holds (tests give their own).
        stop: asks the run to stop (default: :func:`~attnlab.lab.train.interrupt.request_stop`).
        kill: ends the process at once (default: SIGKILL).
    """

    def __init__(
        self,
        limit: int,
        *,
        interval_s: float = 1.0,
        held: Callable[[], int | None] = held_bytes,
        stop: Callable[[], None] | None = None,
        kill: Callable[[], None] | None = None,
    ) -> None:
        if limit <= 0:
            raise ValueError(f"limit: expected a positive number of bytes, got {limit}")
        self.limit, self.interval_s, self._held = limit, interval_s, held
        self._stop_run = stop or (lambda: request_stop(REASON))
        self._kill = kill or (lambda: os.kill(os.getpid(), signal.SIGKILL))
        #: the bytes held that made the guard stop the run, or None
        self.tripped: int | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MemoryGuard:
        if self._held() is None:  # nothing to watch on this system
            return self
        self._thread = threading.Thread(target=self._watch, name="memory-guard", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:  # fmt: skip
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        withdraw_request(REASON)  # one no run took up (the run had ended) stops no other

    def message(self) -> str:
        """What stopped the run, in a sentence (once :attr:`tripped`)."""
        return (f"its process held {self.tripped / GIB:.1f} GiB, over the limit of "
                f"{self.limit / GIB:.1f} GiB")  # fmt: skip

    def _watch(self) -> None:
        while not self._done.wait(self.interval_s):
            if (self._held() or 0) <= self.limit:
                continue
            release_freed_memory()  # what it holds may be memory freed and kept for reuse
            held = self._held() or 0
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
