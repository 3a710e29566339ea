"""Nested, typed config dataclasses from strings and dicts, and back; ``--help`` text from them.

The machinery behind ``--train.lr=1e-3`` and ``--model.encoder.heads=8`` (minGPT style): a
dotted path walks nested dataclasses (and free-form dicts), the text is converted to the
field's declared type, and an unknown name raises a ``ValueError`` that lists the valid names at
that level. Objects are never mutated: every change returns a new object built with
``dataclasses.replace``, so each dataclass's ``__post_init__`` validation runs again.

The overrides of one command line are gathered into one nested change and applied at once, as
a config file is (:func:`merge`), so their order never matters: ``--a.x=1 --a.y=2`` builds
section ``a`` once with both values, and its validation sees the final combination.

Field types understood: ``int``, ``float``, ``bool``, ``str``, ``pathlib.Path``,
``Literal[...]``, ``X | None`` (text ``none``/``null``), unions tried left to right
(``int | float``), ``tuple[X, ...]``, ``tuple[X, Y]``, ``list[X]`` (text ``1,2`` or ``[1, 2]``),
``dict`` (JSON text, or one key at a time: ``--a.options.key=3``), nested dataclasses, and
``Any``: a field typed ``Any`` is handled by the type of its *current value* (a dataclass is
walked strictly, a dict freely). Free-form dicts accept new keys; text for them is read as a JSON
literal (``3``, ``true``, ``[1, 2]``) and falls back to the plain string.

**Sections chosen by kind.** A dataclass with a ``kind`` field and a ``switch_kind(name)``
method (e.g. :class:`~attnlab.models.EncoderConfig`) is one of several dataclasses, one per
kind. Setting ``kind`` (on the command line, in a file, in ``config.json``) first swaps the
dataclass for that kind's (keeping the fields both share), *then* applies the section's other
settings, whatever their order; a setting the new kind lacks is an error naming the kind, its
valid fields, and the kinds that have the setting. Its class may offer ``kinds() -> {name:
class}`` (listed by ``--help``) and ``migrate(data) -> data``, which moves old field names (and
old ``config.json`` sections) to today's spelling before they are checked.

**Why not a library.** tyro 1.0, draccus 0.11 and jsonargparse 4.53 all install, and each was
tried on this project's needs; none keeps today's behaviour:

* The model and task-option sections belong to the task chosen at run time (``RunConfig.model``
  is typed ``Any``; ``attnlab train pos`` and the tests' toy task have different dataclasses),
  and some sections are free-form dicts (``kernel_options``, a task's dict options) that take
  new keys one at a time (``--model.encoder.attention.kernel_options.features=128``). All three
  parse from static annotations; draccus rejects ``kernel_options.features=3`` ("unrecognized
  arguments") and tyro wants the whole dict as ``--x KEY VALUE`` pairs.
* Polymorphic encoders by ``--model.encoder.kind=cnn``: draccus's ``ChoiceRegistry`` fixes the
  key to ``type``, and with a registry-typed field even ``--model.encoder.kernel_options=...``
  fails unless ``type`` is repeated ("Expected a dict with a 'type' key"); tyro turns unions into
  positional subcommands (``model.encoder:cnn-encoder-config``) and then refuses
  ``--model.encoder.heads=8`` without that subcommand; jsonargparse selects by class path
  (``--model.encoder=CNNEncoderConfig``) and is order-dependent: ``--model.encoder=CNN...
  --model.encoder.heads=8`` silently yields the *transformer* config with 8 heads.
* Errors: an unknown option is argparse's "unrecognized arguments" (draccus), a 30-line
  union report (jsonargparse) or a SystemExit with a rich panel (tyro) instead of a
  ``ValueError`` naming the option and the valid names at its level, which the CLI, config
  files and ``RunConfig.from_dict`` share. Old spellings (``--attention.kernel``, flat
  ``encoder.kernel`` in old ``config.json`` files) need the same hooks in any case.

Keeping these ~550 lines costs less than bending one of them to these cases.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import json
import re
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

__all__ = [
    "apply_overrides",
    "parse_override",
    "merge",
    "to_dict",
    "from_dict",
    "convert",
    "describe_options",
]

C = TypeVar("C")

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_NONE = {"none", "null"}


def is_config(obj: Any) -> bool:
    """Whether ``obj`` is a dataclass *instance*."""
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)


def chosen_by_kind(obj: Any) -> bool:
    """Whether ``obj`` is a config section chosen by its ``kind`` (see the module docstring)."""
    return is_config(obj) and hasattr(obj, "kind") and callable(getattr(obj, "switch_kind", None))


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """``{field name: resolved type}`` of the init fields of dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.init}


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def _level(obj: Any, where: str) -> str:
    what = type(obj).__name__
    if chosen_by_kind(obj):
        what += f", kind {obj.kind!r}"
    return f"{where!r} ({what})" if where else f"the top level ({what})"


def _unknown(obj: Any, key: str, where: str) -> ValueError:
    names = list(field_types(type(obj))) if is_config(obj) else sorted(obj)
    path = f"{where}.{key}" if where else key
    close = difflib.get_close_matches(key, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    other = ""
    if chosen_by_kind(obj) and hasattr(obj, "kinds"):
        owners = [k for k, cls in obj.kinds().items() if key in field_types(cls)]
        if owners:
            other = f" ({key!r} is a setting of kind {' / '.join(repr(k) for k in owners)})"
    return ValueError(
        f"unknown setting {path!r}{hint} valid names at {_level(obj, where)}: "
        f"{', '.join(names)}{other}"
    )


def _literal(text: str) -> Any:
    """A JSON literal if ``text`` is one (``3``, ``0.5``, ``true``, ``[1]``), else the string."""
    low = text.strip().lower()
    if low in _NONE:
        return None
    if low in ("true", "false"):
        return low == "true"
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text


def _split_items(text: str) -> list[str]:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            return [v if isinstance(v, str) else json.dumps(v) for v in json.loads(text)]
        except json.JSONDecodeError:
            text = text[1:-1]
    elif text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    return [item.strip() for item in text.split(",") if item.strip()]


class _Text(str):
    """Command-line text, still to be parsed against its field's type (see :func:`merge`)."""


def _plain(value: Any) -> Any:
    """``value`` with command-line text in nested dicts read as JSON literals."""
    if isinstance(value, _Text):
        return _literal(str(value))
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def convert(value: Any, tp: Any, where: str = "value", *, text: bool = False) -> Any:
    """Convert ``value`` to type ``tp``.

    Args:
        value: the value; a string to *parse* when ``text`` is true (command line), otherwise a
            JSON-like value to *check* (config files, ``from_dict``).
        tp: the declared type.
        where: the dotted name, for error messages.
        text: whether ``value`` is command-line text.

    Raises:
        ValueError: ``value`` does not fit ``tp``; the message names ``where`` and the type.
    """

    def fail(extra: str = "") -> ValueError:
        return ValueError(f"{where}: cannot use {value!r} as {_type_name(tp)}{extra}")

    origin = get_origin(tp)
    if tp is Any or tp is object:
        return _literal(value) if text else _plain(value)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if type(None) in args and (value is None or (text and value.strip().lower() in _NONE)):
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return convert(value, arg, where, text=text)
            except (ValueError, TypeError):
                continue
        raise fail()
    if origin is Literal:
        for choice in get_args(tp):
            if value == choice and type(value) is type(choice):
                return choice
            if text and str(choice) == value.strip():
                return choice
        raise fail(f"; valid choices: {', '.join(repr(c) for c in get_args(tp))}")
    if tp is bool:
        if isinstance(value, bool):
            return value
        if text and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise fail(" (use true/false)")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if text:
            try:
                return int(value.strip().replace("_", ""))
            except ValueError:
                number = _float_or_none(value)
                if number is not None and number.is_integer():
                    return int(number)
        raise fail()
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if text and (number := _float_or_none(value)) is not None:
            return number
        raise fail()
    if tp is str:
        if isinstance(value, str):
            return str(value)
        raise fail()
    if isinstance(tp, type) and issubclass(tp, Path):
        if isinstance(value, str | Path):
            return tp(value)
        raise fail()
    if origin in (tuple, list) or tp in (tuple, list):
        if text:
            items, item_text = _split_items(value), True
        elif isinstance(value, list | tuple):
            items, item_text = list(value), False
        else:
            raise fail(" (expected a list)")
        args = get_args(tp)
        if (origin or tp) is list:
            item_tp = args[0] if args else Any
            return [
                convert(v, item_tp, f"{where}[{i}]", text=item_text) for i, v in enumerate(items)
            ]
        if len(args) == 2 and args[1] is Ellipsis:
            args = (args[0],) * len(items)
        elif not args:
            args = (Any,) * len(items)
        if len(args) != len(items):
            raise fail(f" (expected {len(args)} items, got {len(items)})")
        return tuple(
            convert(v, a, f"{where}[{i}]", text=item_text)
            for i, (v, a) in enumerate(zip(items, args))
        )
    if origin is dict or tp is dict:
        if text:
            try:
                value = json.loads(value)
            except json.JSONDecodeError as err:
                raise fail(f" (expected a JSON object: {err})") from None
        if not isinstance(value, Mapping):
            raise fail(" (expected a mapping)")
        return _plain(dict(value))
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if isinstance(value, Mapping):
            return merge(tp(), value, where)
        names = ", ".join(field_types(tp))
        raise ValueError(f"{where} is a group of settings; set one of its fields: {names}")
    return value  # a type this module does not know: trust the caller


def _float_or_none(text: str) -> float | None:
    try:
        return float(text.strip().replace("_", ""))
    except ValueError:
        return None


# ------------------------------------------------------------------------------ dicts


def merge(obj: C, data: Mapping[str, Any], where: str = "") -> C:
    """A copy of ``obj`` (a dataclass or dict) updated with the nested values of ``data``.

    Dataclasses are strict (an unknown key raises, values are type-checked); dicts are free
    form. A nested mapping is merged into the current nested value, so a partial config file
    changes only the fields it names. A section chosen by kind switches kind first (see the
    module docstring). Each dataclass is rebuilt once, with all of its changes.
    """
    if is_config(obj):
        data = dict(data)
        if chosen_by_kind(obj) and "kind" in data:
            kind = data.pop("kind")
            if not isinstance(kind, str):
                raise ValueError(f"{where}.kind: expected a name, got {kind!r}")
            try:
                obj = obj.switch_kind(str(kind).strip())
            except ValueError as err:
                raise ValueError(f"{where}.kind: {err}") from None
        migrate = getattr(type(obj), "migrate", None)
        if callable(migrate) and data:
            data = migrate(data)
        hints = field_types(type(obj))
        changes = {}
        for key, value in data.items():
            if key not in hints:
                raise _unknown(obj, key, where)
            path = f"{where}.{key}" if where else key
            changes[key] = _merged(getattr(obj, key), value, hints[key], path)
        return dataclasses.replace(obj, **changes)
    if isinstance(obj, Mapping):
        out = dict(obj)
        for key, value in data.items():
            path = f"{where}.{key}" if where else key
            out[key] = _merged(out.get(key), value, None, path)
        return out  # type: ignore[return-value]
    raise TypeError(f"{where or 'config'}: cannot merge a mapping into a {type(obj).__name__}")


def _merged(current: Any, value: Any, tp: Any, path: str) -> Any:
    """The new value of a field (type ``tp``; None: a free-form dict's key) now ``current``."""
    free = tp is None or tp is Any
    if isinstance(value, Mapping):
        if is_config(current) or isinstance(current, Mapping):
            return merge(current, value, path)
        if current is None and free:
            return merge({}, value, path)
        if current is not None and not free and not _takes_mapping(tp):
            raise ValueError(
                f"{path} is a single value ({_type_name(tp)}), not a group: it has no setting "
                f"{next(iter(value), '')!r}"
            )
    if isinstance(value, _Text):
        text = str(value)
        if is_config(current):
            names = ", ".join(field_types(type(current)))
            raise ValueError(f"{path} is a group of settings; set one of its fields: {names}")
        if free and isinstance(current, str):
            return text
        if free and isinstance(current, bool | int | float):
            return convert(text, type(current), path, text=True)
        return convert(text, Any if free else tp, path, text=True)
    return convert(value, Any if free else tp, path)


def _takes_mapping(tp: Any) -> bool:
    if get_origin(tp) in (Union, types.UnionType):
        return any(_takes_mapping(arg) for arg in get_args(tp))
    return tp is dict or get_origin(tp) is dict or dataclasses.is_dataclass(tp)


def to_dict(obj: Any) -> Any:
    """Plain JSON-friendly data: dataclasses and mappings become dicts, tuples become lists."""
    if is_config(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def from_dict(cls: type[C], data: Mapping[str, Any]) -> C:
    """``cls()`` (its defaults) merged with ``data``; the inverse of :func:`to_dict`."""
    return merge(cls(), data)


# ------------------------------------------------------------------------------ overrides


def parse_override(item: str) -> tuple[list[str], str]:
    """``"--train.lr=1e-3"`` -> ``(["train", "lr"], "1e-3")``; a bare ``--train.bf16`` means
    ``true``."""
    body = item.lstrip("-")
    name, sep, value = body.partition("=")
    if not name or any(not part for part in name.split(".")):
        raise ValueError(f"malformed override {item!r}; expected --section.name=value")
    return name.split("."), value if sep else "true"


def apply_overrides(cfg: C, overrides: Sequence[str]) -> C:
    """A copy of ``cfg`` with the ``--dotted.name=value`` overrides applied.

    The overrides are gathered into one nested change and merged at once (:func:`merge`), so
    their order does not matter (a later value of the same name wins), ``kind`` is applied
    before a section's other settings, and each section's validation sees its final values.

    Example:
        >>> cfg = apply_overrides(cfg, ["--train.lr=3e-4", "--model.encoder.heads=8"])

    Raises:
        ValueError: an unknown name (the message lists the valid names at that level), a value
            that does not convert to the field's type, or a failed ``__post_init__`` check.
    """
    tree: dict[str, Any] = {}
    for item in overrides:
        parts, text = parse_override(item)
        node = tree
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if isinstance(child, _Text):
                raise ValueError(
                    f"{item}: {'.'.join(parts[: i + 1])} was given a value by an earlier "
                    "override; it cannot also be a group"
                )
            node = node.setdefault(part, {})
        if isinstance(node.get(parts[-1]), dict):
            raise ValueError(
                f"{item}: earlier overrides set settings inside {'.'.join(parts)}; set the "
                "group or its settings, not both"
            )
        node[parts[-1]] = _Text(text)
    return merge(cfg, tree)


# ------------------------------------------------------------------------------ --help


def describe_options(cfg: Any, *, width: int = 100) -> str:
    """Every option of ``cfg`` as ``--dotted.name TYPE (default: value)`` and a one-line
    description, section by section: the text of ``attnlab train TASK --help``.

    Descriptions come from the ``Args:`` sections of the dataclasses' docstrings; defaults are
    the current values of ``cfg`` (the task's defaults with any file and overrides applied).
    A section chosen by kind lists the fields of its current kind and names the other kinds.

    Args:
        cfg: a config dataclass instance (e.g. a resolved ``RunConfig``).
        width: wrap descriptions at this many characters.
    """
    lines: list[str] = []
    _describe(cfg, "", lines, width)
    return "\n".join(lines).rstrip() + "\n"


def _describe(obj: Any, where: str, lines: list[str], width: int) -> None:
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
            lines += ["", f"{path}{kind}: {doc or summary}".rstrip()]
            _describe(value, path, lines, width)
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
    return _type_name(tp)


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
                out[name] = match.group(2)
        elif names:
            for name in names:
                out[name] += " " + line.strip()
    return {k: _clean(v) for k, v in out.items()}
