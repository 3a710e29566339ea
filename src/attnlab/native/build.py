"""Compiling the C++ operators of :mod:`attnlab.native` on first use.

``torch.utils.cpp_extension.load`` builds this directory's ``.cpp`` files (``bindings.cpp``
makes them one Python module) with the system's C++ compiler (about 60 s on 2 cores, once) into
torch's extensions directory (``TORCH_EXTENSIONS_DIR``, else ``~/.cache/torch_extensions``), and
later processes load the built library. The code is compiled for this machine's CPU
(``-march=native``), so the library's name carries a digest of the CPU's model and flags, of
the torch it is built against, and of the sources (headers included, which torch's own check of
the sources does not read): a home directory shared by machines of different CPUs, or by
environments of different torch versions, keeps one build for each, none runs instructions its
CPU lacks, and a changed source is built again.

Where it cannot be built (no compiler, no Python headers, not Linux) or ``ATTNLAB_NATIVE=0``
asks so, :func:`load` says why once in the log and returns None; the callers then run
PyTorch's own operators, which compute the same thing.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import platform
import shutil
import time
from pathlib import Path
from types import ModuleType

__all__ = ["load", "unavailable_reason"]

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
SOURCES = sorted(HERE.glob("*.cpp"))
HEADERS = sorted(HERE.glob("*.h"))

#: -ffp-contract=off: the forward pass and the backward pass compute ReLU's pre-activation
#: with the same roundings (no fused multiply-add in one loop and not in the other), so the
#: backward recomputes exactly the mask the forward applied.
CFLAGS = ["-O3", "-march=native", "-ffp-contract=off", "-fopenmp"]

#: seconds after which a build directory's lock file is taken for one a killed build left
#: (a build takes about a minute on 2 cores)
STALE_LOCK_S = 600


def _digest() -> str:
    """A digest of this CPU's model name and flags (``/proc/cpuinfo``), of the torch it is
    built against (its version and where it is installed: each environment its own build), and
    of the sources."""
    import torch

    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = [platform.processor()]
    cpu = {line for line in lines if line.startswith(("model name", "flags", "Features"))}
    torch_build = [torch.__version__, str(Path(torch.__file__).parent)]
    digest = hashlib.sha256("\n".join([*sorted(cpu), *torch_build]).encode())
    for path in [*SOURCES, *HEADERS]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _flags() -> list[str]:
    if platform.machine() in ("x86_64", "AMD64"):  # AVX-512 at full width where there is one
        return [*CFLAGS, "-mprefer-vector-width=512"]
    return CFLAGS


def _find_ninja() -> None:
    """Put the ``ninja`` of the Python package (a dependency) on ``PATH`` where no other is,
    as when attnlab runs from a virtual environment that was not activated: torch's builder
    calls ``ninja`` by name."""
    if shutil.which("ninja") is None:
        with contextlib.suppress(ImportError):
            import ninja

            os.environ["PATH"] = os.pathsep.join([ninja.BIN_DIR, os.environ.get("PATH", "")])


def _build_directory(name: str) -> Path:
    """Where the library is built: ``name`` under torch's extensions directory, with a lock
    file left by a build that was killed (older than :data:`STALE_LOCK_S`) removed: torch's
    builder waits for that file to go, with no time limit."""
    from torch.utils.cpp_extension import get_default_build_root

    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    lock = directory / "lock"
    with contextlib.suppress(FileNotFoundError):
        if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            log.warning("attnlab.native: removing %s, left by a build that did not finish", lock)
            lock.unlink()
    return directory


@functools.cache
def _build() -> tuple[ModuleType | None, str | None]:
    if os.environ.get("ATTNLAB_NATIVE", "1") == "0":
        return None, "ATTNLAB_NATIVE=0"
    if platform.system() != "Linux":
        return None, f"built on Linux only, this is {platform.system()}"
    try:
        from torch.utils.cpp_extension import load as build

        _find_ninja()
        log.info("attnlab.native: loading the fused CPU operators (compiled the first time, ~60 s)")
        name = f"attnlab_native_{_digest()}"
        module = build(
            name=name,
            build_directory=str(_build_directory(name)),
            sources=[str(path) for path in SOURCES],
            extra_cflags=_flags(),
            extra_ldflags=["-fopenmp"],
            verbose=False,
        )
    except Exception as e:  # noqa: BLE001 (any failure to build means: use PyTorch's ops)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        reason = f"could not be built ({type(e).__name__}: {first})"
        log.warning("attnlab.native: the fused CPU operators %s; using PyTorch's", reason)
        return None, reason
    return module, None


def load() -> ModuleType | None:
    """The compiled operators, built on the first call; None where they cannot be
    (:func:`unavailable_reason` says why)."""
    return _build()[0]


def unavailable_reason() -> str | None:
    """Why :func:`load` gives None (building them if not yet tried); None when it does not."""
    return _build()[1]
