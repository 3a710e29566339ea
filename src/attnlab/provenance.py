"""What code wrote a file: attnlab's version and, in a git checkout, its commit.

Checkpoints carry it (``written_by``), so that a checkpoint whose weights no longer fit the
model its config builds can say which side is older: the checkpoint's code or the code reading
it.
"""

from __future__ import annotations

import functools
import subprocess
import time
from pathlib import Path
from typing import Any

from ._version import __version__

__all__ = ["provenance", "code_identity"]


@functools.cache
def code_identity() -> dict[str, Any]:
    """``{"attnlab": version, "commit": hash, "commit_time": unix seconds, "dirty": bool}`` of
    the running code; the git fields only where the package lies in a git checkout (an
    editable install), computed once per process."""
    out: dict[str, Any] = {"attnlab": __version__}
    root = Path(__file__).resolve().parent
    try:
        top = Path(_git(root, "rev-parse", "--show-toplevel"))
        if (top / "src" / "attnlab").resolve() != root:  # installed inside another repository
            return out
        head = _git(root, "log", "-1", "--format=%H %ct")
        dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no", "--", "."))
    except (OSError, subprocess.SubprocessError):
        return out
    if head:
        commit, stamp = head.split()
        out.update(commit=commit, commit_time=int(stamp), dirty=dirty)
    return out


def provenance() -> dict[str, Any]:
    """:func:`code_identity` plus ``time``, the moment of the call (unix seconds)."""
    return {**code_identity(), "time": int(time.time())}


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10,
                          check=True)  # fmt: skip
    return done.stdout.strip()
