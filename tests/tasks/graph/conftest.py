"""The graph task tests read the shared mirror (Cora, CiteSeer) where one exists, unlike the
text task tests (``../conftest.py`` points ``ATTNLAB_DATA`` at an empty directory): this
fixture replaces that one for this directory. Karate needs no data."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module", autouse=True)
def no_mirror(tmp_path_factory, data_mirror_or_none) -> Path:
    """``ATTNLAB_DATA`` at the shared mirror (or an empty directory when there is none, so
    that the network is never touched); ``ATTNLAB_CACHE`` at an empty directory."""
    root = tmp_path_factory.mktemp("graph-data")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTNLAB_DATA", str(data_mirror_or_none or root / "mirror"))
        mp.setenv("ATTNLAB_CACHE", str(root / "cache"))
        yield root
