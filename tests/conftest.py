"""Shared, seeded fixtures for the tests.

``mask_kind`` parametrises a test over every kind of mask the library builds (and the ways they
compose); ``make_mask(kind, b, h, n)`` renders one for a self-attention problem of ``n`` tokens.
``data_mirror`` is the shared data mirror's directory (the test is skipped without one);
``data_mirror_or_none`` is the same or None, for tests that run either way.

Legend: ``b`` batch, ``h`` heads, ``n`` tokens (queries = keys), ``d`` head dim.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from attnlab import masks
from attnlab.lab.data.registry import DATA_ENV

REPO_ROOT = Path(__file__).resolve().parents[1]

#: every mask kind of the core, alone and composed; None = no mask
MASK_KINDS = [
    "none",
    "causal",
    "local",
    "local_causal",
    "padding",
    "graph",
    "global_tokens",
    "local|global",
    "causal&padding",
    "causal&tensor",
    "tensor",
]


def padding_lengths(b: int, n: int) -> torch.Tensor:
    """Lengths ``n - 5, n - 10, ..., 0``: the last sequence is empty (fully masked rows)."""
    return torch.tensor([max(n - 5 * (i + 1), 1) for i in range(b - 1)] + [0])


def build_mask(kind: str, b: int, h: int, n: int, *, seed: int = 1):
    """A mask of ``kind`` for ``b`` sequences of ``n`` tokens and ``h`` heads (or None)."""
    gen = torch.Generator().manual_seed(seed)
    if kind == "none":
        return None
    if kind == "causal":
        return masks.causal()
    if kind == "local":
        return masks.local(3)
    if kind == "local_causal":
        return masks.local(3, causal=True)
    if kind == "padding":
        return masks.padding(padding_lengths(b, n))
    if kind == "graph":
        # No self loops, ~1.5 in-edges per node: some nodes have none (fully masked rows).
        edges = torch.randint(0, n, (2, (3 * n) // 2), generator=gen)
        return masks.graph(edges, n, self_loops=False)
    if kind == "global_tokens":
        return masks.global_tokens([0, n // 2])
    if kind == "local|global":
        return masks.local(2) | masks.global_tokens([0])
    if kind == "causal&padding":
        return masks.causal() & masks.padding(padding_lengths(b, n))
    if kind == "causal&tensor":
        return masks.causal() & (torch.rand(n, n, generator=gen) < 0.7)
    if kind == "tensor":
        # A plain (b, h, i, j) tensor that differs per sequence and per head; head 0 is also
        # causal, so its block structure differs from the other heads'.
        t = torch.rand(b, h, n, n, generator=gen) < 0.6
        t[:, 0] &= torch.ones(n, n, dtype=torch.bool).tril()
        return t
    raise ValueError(f"unknown mask kind {kind!r}")


@pytest.fixture(autouse=True)
def _seed() -> None:
    """Every test starts from the same random state."""
    torch.manual_seed(0)


@pytest.fixture(scope="module")
def single_thread():
    """One intra-op thread for a module of tiny problems: a thread pool only adds overhead at
    these sizes, and on a busy machine its threads wait on each other (10x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=MASK_KINDS)
def mask_kind(request) -> str:
    return request.param


@pytest.fixture
def make_mask():
    """``make_mask(kind, b, h, n)``: see :func:`build_mask`."""
    return build_mask


# -- the shared data mirror ------------------------------------------------------------------------


def _find_data_mirror() -> Path | None:
    """The shared data mirror: ``$ATTNLAB_DATA``, else ``../shared/data`` beside the repository
    root; None when that directory does not exist."""
    env = os.environ.get(DATA_ENV, "").strip()
    path = Path(env) if env else REPO_ROOT.parent / "shared" / "data"
    return path if path.is_dir() else None


# Looked up once, when the tests are collected: tests that point $ATTNLAB_DATA elsewhere (with
# monkeypatch) must not change where the others find the mirror.
_DATA_MIRROR = _find_data_mirror()


@pytest.fixture(scope="session")
def data_mirror_or_none() -> Path | None:
    """The shared data mirror's directory, or None when there is none."""
    return _DATA_MIRROR


@pytest.fixture
def data_mirror(data_mirror_or_none: Path | None) -> Path:
    """The shared data mirror's directory; skips the test when there is none.

    Use it as an argument, or as ``@pytest.mark.usefixtures("data_mirror")`` for a test that
    reads the mirror through ``$ATTNLAB_DATA``.
    """
    if data_mirror_or_none is None:
        pytest.skip(f"no data mirror: set {DATA_ENV} or provide ../shared/data")
    return data_mirror_or_none
