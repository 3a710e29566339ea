"""docs/ARCHITECTURE.md and docs/LAB.md kept true to the code: every file or folder they name
exists, and the layer table gives every module the layer tests/test_layers.py checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.test_layers import LAYERS

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "attnlab"
DOCS = [ROOT / "docs" / "ARCHITECTURE.md", ROOT / "docs" / "LAB.md"]
#: where a path named in the docs may lie: the lab's, the library's, the repository's
BASES = [SRC / "lab", SRC, ROOT]
PATH = re.compile(r"`([A-Za-z_][\w./-]*(?:\.py|\.md|/))`")


def _paths(doc: Path) -> list[str]:
    return sorted({m for m in PATH.findall(doc.read_text()) if "CACHE" not in m})


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_named_exists(doc):
    names = _paths(doc)
    assert len(names) > 20, "the pattern finds the paths the page names"
    every_file = {p.name for p in SRC.rglob("*.py")}
    missing = []
    for name in names:
        if "/" in name.rstrip("/"):  # a path: under one of the bases
            found = any((base / name).exists() for base in BASES)
        else:  # a bare name (`model.py` in the paragraph of its package): somewhere in src
            found = name.rstrip("/") in every_file or any((b / name).exists() for b in BASES)
        if not found:
            missing.append(name)
    assert not missing, f"{doc.name} names files that do not exist: {missing}"


def _table_layers() -> dict[str, int]:
    """The layer table of ARCHITECTURE.md as ``{key of LAYERS: layer}``."""
    rows = [line for line in DOCS[0].read_text().splitlines() if re.match(r"\| \d+ \|", line)]
    layers = {}
    for row in rows:
        number, modules = row.split("|")[1:3]
        for name in re.findall(r"`([^`]+)`", modules):
            key = name.removesuffix("/").removesuffix(".py").replace("/", ".")
            layers[key] = int(number)
    return layers


def test_layer_table_matches_the_checked_layers():
    table = _table_layers()
    checked = {k: v for k, v in LAYERS.items() if k not in ("lab", "__init__")}
    assert len(table) > 20, "the pattern finds the table's modules"
    assert table == checked
