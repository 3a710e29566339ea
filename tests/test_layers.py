"""The layers of docs/ARCHITECTURE.md, checked: no module imports a module of a higher layer
(every import counts, inside functions too), and nothing outside ``attnlab.lab`` imports the
lab, so the library never depends on the lab above it.

Layer of each module or package of the library (``attnlab.x``) and of the lab
(``attnlab.lab.x``): 0 = foundations ... 8 = entry points; the packages' ``__init__``
re-exports above all of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "attnlab"

LAYERS = {
    "_version": 0, "dropout": 0, "masks": 0, "pair_bias": 0, "numerics": 0, "registry": 0, "provenance": 0, "sizes": 0,
    "native": 0,
    "functional": 1, "additive_blocks": 1, "positional": 1,
    "kernels": 2, "backends": 2, "efficient": 2,
    "attention": 3, "attention_config": 3, "attention_checks": 3,
    "blocks": 4, "convert": 4, "graph": 4, "viz": 4,
    "lab.models": 5,
    "lab.tasks": 6, "lab.data": 6, "lab.audio": 6, "lab.images": 6, "lab.speechgen": 6,
    "lab.chem": 6, "lab.viz": 6,
    "lab.train": 7,
    "lab.cli": 8, "lab.commands": 8, "lab.task_flags": 8, "lab.runs": 8, "lab.predictions": 8, "lab.view": 8, "lab.report": 8, "lab.demo": 8, "lab.bench": 8, "__main__": 8,
    "lab": 9, "__init__": 9,
}  # fmt: skip
#: the library modules that may import the lab (and so run up past their layer into it): the
#: ``python -m attnlab`` entry point, and ``attnlab.viz.view`` given a run's path
LAB_ENTRY = {"attnlab.__main__", "attnlab.viz.api"}


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int | None:
    """The layer of ``attnlab.x...`` (None: not attnlab's)."""
    parts = module.split(".")
    if parts[0] != "attnlab":
        return None
    key = ".".join(parts[1:3]) if len(parts) > 2 and parts[1] == "lab" else ".".join(parts[1:2])
    return LAYERS.get(key or "__init__", LAYERS["__init__"])


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


def _key(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[1:3]) if len(parts) > 2 and parts[1] == "lab" else ".".join(parts[1:2])


def test_every_module_has_a_layer():
    missing = {_key(_module(f)) for f in FILES if "." in _module(f)} - set(LAYERS)
    assert not missing, f"add these to LAYERS (and docs/ARCHITECTURE.md): {sorted(missing)}"


@pytest.mark.parametrize("path", FILES, ids=[_module(f) for f in FILES])
def test_no_import_runs_up_a_layer(path):
    mine = _layer(_module(path))
    entry = _module(path) in LAB_ENTRY
    upward = [f"line {line}: {name} (layer {_layer(name)})" for line, name in _imports(path)
              if (_layer(name) or 0) > mine
              and not (entry and name.startswith("attnlab.lab"))]  # fmt: skip
    assert not upward, f"{_module(path)} (layer {mine}) imports upward: {upward}"


LIBRARY = [f for f in FILES if not _module(f).startswith("attnlab.lab")]


@pytest.mark.parametrize("path", LIBRARY, ids=[_module(f) for f in LIBRARY])
def test_nothing_outside_the_lab_imports_the_lab(path):
    if _module(path) in LAB_ENTRY:
        return
    lab = [f"line {line}: {name}" for line, name in _imports(path)
           if name == "attnlab.lab" or name.startswith("attnlab.lab.")]  # fmt: skip
    assert not lab, f"{_module(path)} is the library's and imports the lab: {lab}"
