"""Log levels for a while: the demos run the trainer without its per-evaluation lines, and
leave the level as they found it (a library call must not change a process's logging)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["quiet_logs"]


@contextlib.contextmanager
def quiet_logs(name: str = "attnlab", level: int = logging.WARNING) -> Iterator[None]:
    """Logger ``name`` at ``level`` inside the block, its own level restored after."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)
