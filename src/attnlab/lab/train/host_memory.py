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
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

__all__ = ["keep_freed_memory"]

logger = logging.getLogger(__name__)

# mallopt parameters, from glibc's <malloc.h>
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): larger blocks are
#: always mapped afresh
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
#: M_TRIM_THRESHOLD's "never trim" (``man mallopt``)
NO_TRIM = -1

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
