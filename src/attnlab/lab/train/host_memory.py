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
not glibc, where another allocator is preloaded (``LD_PRELOAD``), where the user has tuned
``malloc`` already (any ``MALLOC_*`` variable, or ``GLIBC_TUNABLES``), or with
``ATTNLAB_MALLOC=default``.

Blocks over 32 MiB still come and go: glibc maps each afresh, and ``mallopt`` cannot raise that
ceiling. The efficient kernels' ListOps steps, whose ``(32, 4, 2000, 256)`` feature maps are
250 MiB each, made 0.6-2 million faults a step that way. Turning glibc's mappings off altogether
(``M_MMAP_MAX`` 0) stopped them but let its heap fragment: a BigBird run grew to 12.4 GiB
resident in 150 steps, where it had needed 5. jemalloc keeps large blocks in extents it reuses,
and with its purging off (:data:`JEMALLOC_CONF`) the same run held 4.6 GiB and faulted nothing
again. It must be loaded before the process starts, so :func:`jemalloc_env` gives the variables
for a child process where the system has the library (Debian's ``libjemalloc2``), and the
``attnlab`` command's long runs (``demo``, ``train``, ``pretrain``, ``report``) start
themselves again with them (:func:`restart_with_jemalloc`), the report's worker processes
inheriting them. Every task's default step ran 1.03-1.17x as fast on it (BENCHMARKS.md,
"Training speed").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform
import sys
from collections.abc import Sequence

__all__ = ["JEMALLOC_CONF", "jemalloc_env", "keep_freed_memory", "restart_with_jemalloc"]

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

#: the commands whose runs are long enough to pay for starting again (a second or two)
LONG_COMMANDS = ("demo", "train", "pretrain", "report")

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Make glibc's ``malloc`` keep freed blocks of up to 32 MiB for reuse (module docstring).

    Returns:
        Whether the settings are in force: True once applied in this process, False where the
        C library is not glibc, the user set malloc's behaviour, or ``ATTNLAB_MALLOC=default``.
    """
    global _done
    if _done is None:
        _done = _apply()
    return _done


def _user_chose() -> bool:
    """Whether the environment sets malloc's behaviour, or preloads another allocator."""
    env = os.environ
    return (any(name.startswith("MALLOC_") for name in env) or "GLIBC_TUNABLES" in env
            or any(a in env.get("LD_PRELOAD", "") for a in ("jemalloc", "tcmalloc", "mimalloc")))  # fmt: skip


def _apply() -> bool:
    if os.environ.get("ATTNLAB_MALLOC", "") == "default":
        return False
    if _user_chose():
        logger.debug("malloc left as the environment set it")
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
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


def jemalloc_env() -> dict[str, str]:
    """Variables that start a child process on jemalloc, keeping freed memory (module docstring):
    ``LD_PRELOAD`` and ``MALLOC_CONF``. Empty where the system has no jemalloc, the user set
    malloc's behaviour (:func:`_user_chose`), or ``ATTNLAB_MALLOC=default``."""
    if os.environ.get("ATTNLAB_MALLOC", "") == "default" or _user_chose():
        return {}
    if platform.system() != "Linux" or os.environ.get("LD_PRELOAD"):
        return {}
    library = ctypes.util.find_library("jemalloc")  # e.g. "libjemalloc.so.2", via ldconfig
    return {"LD_PRELOAD": library, "MALLOC_CONF": JEMALLOC_CONF} if library else {}


def restart_with_jemalloc(command: str, argv: Sequence[str]) -> None:
    """Replace this process by ``attnlab ARGV`` (or ``python -m attnlab ARGV``, as it was
    started) on jemalloc (:func:`jemalloc_env`) when ``command`` is a long one; return
    otherwise. The new process has the same id, environment (plus the two variables, which
    also keep it from starting again), standard streams and arguments."""
    extra = jemalloc_env() if command in LONG_COMMANDS else {}
    if not extra:
        return
    logger.debug("starting again on jemalloc (%s)", " ".join(f"{k}={v}" for k, v in extra.items()))
    os.environ.update(extra)
    sys.stdout.flush()
    sys.stderr.flush()
    script = sys.argv[0]  # the attnlab script, or attnlab/__main__.py under python -m
    again = ["-m", "attnlab"] if script.endswith("__main__.py") else [script]
    os.execv(sys.executable, [sys.executable, *again, *argv])
