"""Host memory: keep what a training step frees for the next step, instead of faulting it in again.

PyTorch's CPU tensors come straight from ``malloc``, and glibc's ``malloc`` hands large blocks
back to the kernel when they are freed: blocks over its mmap threshold (dynamic, 128 KiB at
first) are unmapped, and free memory at the top of the heap is trimmed. The next step then
allocates the same sizes again and pays a page fault per 4 KiB page on first touch. A ListOps
step (batches of 32 trees of 500-2,000 tokens) made 39,000-45,000 such faults: an elementwise
pass over a ``(32, 1948, 64)`` float32 tensor took 16-30 ms inside the step against 1-2 ms
warm (BENCHMARKS.md, "Training speed").

:func:`keep_freed_memory` sets glibc's mmap threshold to its 64-bit maximum (32 MiB) and turns
trimming off, so blocks up to 32 MiB are reused from the heap. The cost: the process keeps the
heap it has grown instead of returning it, and blocks that were mapped apart now share the
heap, where fragmentation can raise the peak a little. It is what Intel's PyTorch launcher gets
by preloading jemalloc or tcmalloc, without a preload. The trainer and the report's timing pass
call it, once per process (forked workers inherit it); nothing changes where the C library is
not glibc, where another allocator is loaded (:func:`allocator`), where the user has tuned
glibc's ``malloc`` already (a ``MALLOC_*`` variable, or ``GLIBC_TUNABLES``), or with
``ATTNLAB_MALLOC=default``.

Blocks over 32 MiB still come and go: glibc maps each afresh, and ``mallopt`` cannot raise that
ceiling. The efficient kernels' ListOps steps, whose ``(32, 4, 2000, 256)`` feature maps are
250 MiB each, made 0.6-2 million faults a step that way. Turning glibc's mappings off altogether
(``M_MMAP_MAX`` 0) stopped them but let its heap fragment: a BigBird run grew to 12.4 GiB
resident in 150 steps, where it had needed 5. jemalloc keeps large blocks in extents it reuses,
and with its purging off (:data:`JEMALLOC_CONF`) the same run held 4.6 GiB and faulted nothing
again (its defaults purge freed pages after 10 s: slower than glibc). It must be loaded before
the process starts, so :func:`jemalloc_env` gives the variables for a child process where the
system has the library (Debian's ``libjemalloc2``), and the ``attnlab`` command's long runs
(``demo``, ``train``, ``pretrain``, ``report``, ``bench``) start themselves again with them
(:func:`restart_with_jemalloc`), the report's worker processes inheriting them. Every task's default step ran 1.03-1.17x as fast on it (BENCHMARKS.md,
"Training speed").
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import platform
import sys

__all__ = ["JEMALLOC_CONF", "allocator", "jemalloc_env", "keep_freed_memory",
           "release_freed_memory", "restart_with_jemalloc"]  # fmt: skip

logger = logging.getLogger(__name__)

# mallopt parameters, from glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): larger blocks are
#: always mapped afresh
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
#: M_TRIM_THRESHOLD's "never trim" (``man mallopt``)
NO_TRIM = -1

#: jemalloc's settings for a training process: freed pages are kept, never purged to the
#: system, so each step reuses the last one's
JEMALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"

#: the commands whose runs are long enough to pay for starting again (a second or two); bench
#: among them, so that it times the steps ``train`` runs
LONG_COMMANDS = ("demo", "train", "pretrain", "report", "bench")
#: jemalloc's MALLCTL_ARENAS_ALL: "arena.<i>.purge" with it purges every arena
ARENAS_ALL = 4096
#: a symbol each other allocator exports, by which :func:`allocator` knows it is loaded
ALLOCATOR_SYMBOLS = {"jemalloc": "mallctl", "tcmalloc": "tc_malloc", "mimalloc": "mi_malloc"}

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Make glibc's ``malloc`` keep freed blocks of up to 32 MiB for reuse (module docstring).

    Returns:
        Whether the settings are in force: True once applied in this process; False where the
        allocator is not glibc's (a process started on jemalloc, as the long commands are
        where the system has it), the user tuned glibc's (any ``MALLOC_*`` variable but
        jemalloc's ``MALLOC_CONF``, or ``GLIBC_TUNABLES``), or ``ATTNLAB_MALLOC=default``.
    """
    global _done
    if _done is None:
        _done = _apply()
    return _done


def allocator() -> str:
    """The allocator this process runs on: ``jemalloc``, ``tcmalloc`` or ``mimalloc`` where one
    is loaded (preloaded), else ``glibc`` (``unknown`` off glibc)."""
    with contextlib.suppress(OSError):
        symbols = ctypes.CDLL(None)  # this process's global symbols, preloaded libraries first
        for name, symbol in ALLOCATOR_SYMBOLS.items():
            if hasattr(symbols, symbol):
                return name
    return "glibc" if platform.libc_ver()[0] == "glibc" else "unknown"


def _glibc_tuned() -> bool:
    """Whether the environment tunes glibc's ``malloc`` (``MALLOC_CONF`` is jemalloc's)."""
    env = os.environ
    return "GLIBC_TUNABLES" in env or any(
        name.startswith("MALLOC_") and name != "MALLOC_CONF" for name in env
    )


def _apply() -> bool:
    if os.environ.get("ATTNLAB_MALLOC", "") == "default":
        return False
    if platform.system() != "Linux":
        return False
    if (which := allocator()) != "glibc":
        logger.debug("malloc is %s: left alone", which)
        return False
    if _glibc_tuned():
        logger.debug("malloc left as the environment set it")
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # both set before either is judged: mallopt returns 1 on success
    done = [mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX), mallopt(M_TRIM_THRESHOLD, NO_TRIM)]
    logger.debug("malloc keeps freed blocks up to 32 MiB: %s", done)
    return done == [1, 1]


def release_freed_memory() -> bool:
    """Hand the memory freed so far back to the system: between jobs of one process (the
    report's workers run one after another), where the settings above would otherwise keep the
    largest heap any job has grown. jemalloc's arenas are purged, glibc's heap trimmed
    (``malloc_trim``). Returns whether it could (False on another allocator)."""
    which = allocator()
    try:
        symbols = ctypes.CDLL(None)
        if which == "jemalloc":
            mallctl = symbols.mallctl
            mallctl.argtypes = (ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_size_t)  # fmt: skip
            mallctl.restype = ctypes.c_int
            return mallctl(f"arena.{ARENAS_ALL}.purge".encode(), None, None, None, 0) == 0
        if which == "glibc":
            symbols.malloc_trim.argtypes = (ctypes.c_size_t,)
            symbols.malloc_trim(0)
            return True
    except (OSError, AttributeError):
        pass
    return False


def jemalloc_env() -> dict[str, str]:
    """Variables that start a child process on jemalloc, keeping freed memory (module docstring):
    ``LD_PRELOAD`` and ``MALLOC_CONF``. Empty off Linux, where the system has no jemalloc,
    where this process runs on another allocator already, where the user chose (an
    ``LD_PRELOAD``, ``MALLOC_CONF``, a tuning of glibc's), or with ``ATTNLAB_MALLOC=default``."""
    env = os.environ
    if env.get("ATTNLAB_MALLOC", "") == "default" or platform.system() != "Linux":
        return {}
    if env.get("LD_PRELOAD") or "MALLOC_CONF" in env or _glibc_tuned() or allocator() != "glibc":
        return {}
    library = ctypes.util.find_library("jemalloc")  # e.g. "libjemalloc.so.2", via ldconfig
    return {"LD_PRELOAD": library, "MALLOC_CONF": JEMALLOC_CONF} if library else {}


def restart_with_jemalloc(command: str) -> None:
    """Replace this process by itself started again, with the same interpreter, flags and
    arguments (``sys.orig_argv``), on jemalloc (:func:`jemalloc_env`) when ``command`` is a
    long one; return otherwise, or if it cannot start. The new process has the same id,
    standard streams and environment, plus the two variables (which keep it from starting
    again; if the library then fails to load, it runs on glibc with :func:`keep_freed_memory`).
    """
    extra = jemalloc_env() if command in LONG_COMMANDS else {}
    if not extra:
        return
    logger.debug("starting again on jemalloc (%s)", " ".join(f"{k}={v}" for k, v in extra.items()))
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.flush()
    os.environ.update(extra)
    try:
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    except OSError as err:  # carry on here, on glibc
        for name in extra:
            os.environ.pop(name, None)
        logger.debug("could not start again (%s): staying on glibc's malloc", err)
