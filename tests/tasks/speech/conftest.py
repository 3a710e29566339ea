"""The speech tests read a handful of FSDD recordings from the shared data mirror (skipped
without one): this overrides the task tests' empty-mirror fixture."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module", autouse=True)
def no_mirror(tmp_path_factory, data_mirror_or_none) -> Path:
    root = tmp_path_factory.mktemp("speech-cache")
    with pytest.MonkeyPatch.context() as mp:
        if data_mirror_or_none is not None:
            mp.setenv("ATTNLAB_DATA", str(data_mirror_or_none))
        mp.setenv("ATTNLAB_CACHE", str(root / "cache"))
        yield root


@pytest.fixture
def recordings(data_mirror) -> Path:
    return data_mirror / "fsdd" / "recordings"
