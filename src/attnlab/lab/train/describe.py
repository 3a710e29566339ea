"""The text of ``attnlab train TASK --help``: every option of a config, from its dataclasses.

Each field becomes ``--dotted.name TYPE (default: value)`` with the one-line description from the
``Args:`` section of its dataclass's docstring; a section chosen by kind (see
:mod:`attnlab.lab.train.merge`) lists the fields of its current kind and names the other kinds.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import re
import textwrap
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

from attnlab.lab.train.merge import chosen_by_kind, field_types, is_config, to_dict, type_name

__all__ = ["describe_options"]


def describe_options(cfg: Any, *, width: int = 100, aliases: Mapping[str, str] = {}) -> str:  # noqa: B006 (read only)
    """Every option of ``cfg`` as ``--dotted.name TYPE (default: value)`` and a one-line
    description, section by section: the text of ``attnlab train TASK --help``.

    Descriptions come from the ``Args:`` sections of the dataclasses' docstrings; defaults are
    the current values of ``cfg`` (the task's defaults with any file and overrides applied).
    A section chosen by kind lists the fields of its current kind and names the other kinds.

    Args:
        cfg: a config dataclass instance (e.g. a resolved ``RunConfig``).
        width: wrap descriptions at this many characters.
        aliases: ``{dotted path: short name}`` of sections listed under their short name
            (``{"task_options.data": "data"}``: ``--data.train``).
    """
    lines: list[str] = []
    _describe(cfg, "", lines, width, aliases)
    return "\n".join(lines).rstrip() + "\n"


def _describe(obj: Any, where: str, lines: list[str], width: int,
              aliases: Mapping[str, str]) -> None:  # fmt: skip
    docs = _arg_docs(type(obj))
    hints = field_types(type(obj))
    groups = []
    for name, tp in hints.items():
        value = getattr(obj, name)
        path = f"{where}.{name}" if where else name
        if is_config(value) or (tp is Any and isinstance(value, Mapping)):
            groups.append((name, value, path))
            continue
        label = _type_label(tp, value)
        if name == "kind" and chosen_by_kind(obj) and hasattr(obj, "kinds"):
            label = " | ".join(obj.kinds())
        _option(lines, f"--{path}", label, value, docs.get(name, ""), width)
    for name, value, path in groups:
        doc = docs.get(name, "")
        if is_config(value):
            summary = _summary(type(value))
            kind = f" [kind {value.kind!r}]" if chosen_by_kind(value) else ""
            shown = f"{aliases[path]} ({path})" if path in aliases else path
            lines += ["", f"{shown}{kind}: {doc or summary}".rstrip()]
            _describe(value, aliases.get(path, path), lines, width, aliases)
        else:  # a free-form dict (a task's options given as a dict)
            lines += ["", f"{path}: {doc or 'free-form settings'}".rstrip()]
            for key, item in value.items():
                _option(lines, f"--{path}.{key}", _type_label(Any, item), item, "", width)
            _option(lines, f"--{path}.NAME", "JSON", None, "any further setting", width)


def _option(lines: list[str], name: str, label: str, value: Any, doc: str, width: int) -> None:
    if value is None:
        default = "none"
    else:
        default = value if isinstance(value, str) else json.dumps(to_dict(value))
    lines.append(f"  {name} {label}  (default: {default})")
    if doc:
        lines += textwrap.wrap(doc, width, initial_indent=" " * 6, subsequent_indent=" " * 6)


def _type_label(tp: Any, value: Any = None) -> str:
    """A reader's name for a field type: ``int``, ``int | None``, ``a | b`` (choices)."""
    origin = get_origin(tp)
    if tp is Any:
        return type(value).__name__ if isinstance(value, str | bool | int | float) else "JSON"
    if origin in (Union, types.UnionType):
        return " | ".join(_type_label(a) for a in get_args(tp))
    if origin is Literal:
        return " | ".join(str(c) for c in get_args(tp))
    if tp is type(None):
        return "none"
    if tp is dict or origin is dict:
        return "JSON-object"
    if origin in (tuple, list):
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"{_type_label(args[0])},..."
        return ",".join(_type_label(a) for a in args) if args else "list"
    return type_name(tp)


_ROLE = re.compile(r":\w+:`~?([^`]+)`")  # :class:`~a.b.C` -> a.b.C (shortened below)
_ARG = re.compile(r"^(\w+(?:\s*,\s*\w+)*)\s*:\s*(.*)$")


def _clean(text: str) -> str:
    text = _ROLE.sub(lambda m: m.group(1).rsplit(".", 1)[-1], text)
    return " ".join(text.replace("``", "").split())


def _summary(cls: type) -> str:
    doc = inspect.getdoc(cls) or ""
    return _clean(doc.split("\n\n")[0])


@functools.cache
def _arg_docs(cls: type) -> dict[str, str]:
    """``{field: one-line description}`` from the ``Args:`` sections of ``cls`` and its bases
    (Google style: ``name: text`` with indented continuation lines)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        docs.update(_parse_args(inspect.cleandoc(klass.__doc__ or "")))
    return docs


def _parse_args(doc: str) -> dict[str, str]:
    out: dict[str, str] = {}
    lines = doc.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Args:")
    except StopIteration:
        return out
    indent = None
    names: list[str] = []
    groups: dict[str, list[str]] = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth < indent:
            break
        match = _ARG.match(line.strip()) if depth == indent else None
        if match:
            names = [n.strip() for n in match.group(1).split(",")]
            for name in names:
                groups[name] = names
                out[name] = match.group(2)
        elif names:
            for name in names:
                out[name] += " " + line.strip()
    return {k: _shared_by(k, groups, _clean(v)) for k, v in out.items()}


def _shared_by(name: str, groups: dict[str, list[str]], text: str) -> str:
    """``text`` of an ``a, b: text`` entry with ``(respectively a, b)``, which tells its options
    apart, so that neither reads as the other's copy."""
    names = groups.get(name, [name])
    if len(names) < 2:
        return text
    return f"{text.rstrip('. ')} (respectively {', '.join(names)})."
