"""The layers of docs/ARCHITECTURE.md, checked: no module imports a module of a higher layer
(every import counts, inside functions too), so the library never depends on the lab above it.

Layer of each top-level module or package of ``attnlab`` (0 = foundations ... 8 = entry points;
the package's ``__init__`` re-exports, above all of them).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "attnlab"

LAYERS = {
    "_version": 0, "masks": 0, "numerics": 0, "registry": 0, "provenance": 0, "sizes": 0,
    "functional": 1, "positional": 1,
    "kernels": 2, "backends": 2, "efficient": 2,
    "attention": 3, "attention_config": 3, "attention_checks": 3,
    "blocks": 4, "convert": 4, "graph": 4,
    "models": 5,
    "tasks": 6, "data": 6, "audio": 6, "images": 6, "speechgen": 6, "chem": 6, "viz": 6,
    "train": 7,
    "cli": 8, "commands": 8, "demo": 8, "bench": 8, "__main__": 8,
    "__init__": 9,
}  # fmt: skip


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int | None:
    """The layer of ``attnlab.x...`` (None: not attnlab's)."""
    parts = module.split(".")
    if parts[0] != "attnlab":
        return None
    return LAYERS.get(parts[1] if len(parts) > 1 else "__init__", LAYERS["__init__"])


def _imports(path: Path):
    """``(line, module)`` of every import of ``path``, relative ones resolved."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (
                package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            )
            name = ".".join([*base, *([node.module] if node.module else [])])
            if name == "attnlab":  # from attnlab import x: the submodule x, or the package
                yield from ((node.lineno, f"attnlab.{a.name}") for a in node.names)
            else:
                yield node.lineno, name


FILES = sorted(SRC.rglob("*.py"))


def test_every_module_has_a_layer():
    missing = {_module(f).split(".")[1] for f in FILES if "." in _module(f)} - set(LAYERS)
    assert not missing, f"add these to LAYERS (and docs/ARCHITECTURE.md): {sorted(missing)}"


@pytest.mark.parametrize("path", FILES, ids=[_module(f) for f in FILES])
def test_no_import_runs_up_a_layer(path):
    mine = _layer(_module(path))
    upward = [f"line {line}: {name} (layer {_layer(name)})" for line, name in _imports(path)
              if (_layer(name) or 0) > mine]  # fmt: skip
    assert not upward, f"{_module(path)} (layer {mine}) imports upward: {upward}"
