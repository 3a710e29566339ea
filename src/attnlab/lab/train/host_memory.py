"""Host memory: keep what a training step frees for the next step, instead of faulting it in again.

PyTorch's CPU tensors come straight from ``malloc``, and glibc's ``malloc`` hands large blocks
back to the kernel when they are freed: blocks over its mmap threshold (dynamic, 128 KiB at
first) are unmapped, and free memory at the top of the heap is trimmed. The next step then
allocates the same sizes again and pays a page fault per 4 KiB page on first touch. A ListOps
step (batches of 32 trees of 500-2,000 tokens) made 39,000-45,000 such faults: an elementwise
pass over a ``(32, 1948, 64)`` float32 tensor took 16-30 ms inside the step against 1-2 ms
warm (BENCHMARKS.md, "Training speed").

:func:`keep_freed_memory` sets glibc's mmap threshold to its 64-bit maximum (32 MiB) and stops
trimming, so blocks up to 32 MiB are reused from the heap. The cost: the process keeps its peak
heap instead of returning it (the peak itself does not grow). It is what Intel's PyTorch
launcher gets by preloading jemalloc or tcmalloc, without a preload. The trainer calls it once
per process; nothing changes where the C library is not glibc, or where the user has tuned
``malloc`` already (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_TOP_PAD_`` or ``GLIBC_TUNABLES`` set), or with ``ATTNLAB_MALLOC=default``.
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
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
#: glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX): larger blocks are
#: always mapped afresh
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
#: free memory kept at the heap's top before any is returned (largest int mallopt takes)
TRIM_THRESHOLD = 2**31 - 1
#: extra heap asked of the kernel on each growth, so that growing steps do not sbrk per block
TOP_PAD = 64 * 1024 * 1024
#: environment variables that mean the user chose malloc's behaviour
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                 "GLIBC_TUNABLES")  # fmt: skip

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


def _apply() -> bool:
    if os.environ.get("ATTNLAB_MALLOC", "") == "default":
        return False
    if any(name in os.environ for name in USER_SETTINGS):
        logger.debug("malloc left as the environment set it")
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX), (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                (M_TOP_PAD, TOP_PAD))  # fmt: skip
    applied = all(mallopt(param, value) == 1 for param, value in settings)
    logger.debug("malloc keeps freed blocks up to 32 MiB: %s", applied)
    return applied
