"""Nested, typed config dataclasses from JSON-like data and command-line text, and back.

:func:`merge` updates a dataclass (or a free-form dict) with nested values, :func:`convert`
turns one value into a field's declared type, :func:`to_dict` / :func:`from_dict` go to plain
data and back. Config files, ``RunConfig.from_dict`` and the command line's overrides
(:mod:`attnlab.lab.train.overrides`) all go through :func:`merge`. Objects are never mutated: every
change returns a new object built with ``dataclasses.replace``, so each dataclass's
``__post_init__`` validation runs again.

Field types understood: ``int``, ``float``, ``bool``, ``str``, ``pathlib.Path``,
``Literal[...]``, ``X | None`` (text ``none``/``null``), unions tried left to right
(``int | float``), ``tuple[X, ...]``, ``tuple[X, Y]``, ``list[X]`` (text ``1,2`` or ``[1, 2]``),
``dict`` (JSON text, or one key at a time: ``--a.options.key=3``), nested dataclasses, and
``Any``: a field typed ``Any`` is handled by the type of its *current value* (a dataclass is
walked strictly, a dict freely). Free-form dicts accept new keys; text for them is read as a JSON
literal (``3``, ``true``, ``[1, 2]``) and falls back to the plain string.

**Sections chosen by kind.** A dataclass with a ``kind`` field and a ``switch_kind(name)``
method (e.g. :class:`~attnlab.lab.models.EncoderConfig`) is one of several dataclasses, one per
kind. Setting ``kind`` (on the command line, in a file, in ``config.json``) first swaps the
dataclass for that kind's (keeping the fields both share), *then* applies the section's other
settings, whatever their order; a setting the new kind lacks is an error naming the kind, its
valid fields, and the kinds that have the setting. Its class may offer ``kinds() -> {name:
class}`` (listed by ``--help``). (Old checkpoints' spellings are rewritten before they get here,
by :mod:`attnlab.lab.train.legacy`.)
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

__all__ = [
    "merge",
    "to_dict",
    "from_dict",
    "convert",
    "is_config",
    "chosen_by_kind",
    "field_types",
    "type_name",
    "CommandLineText",
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


def type_name(tp: Any) -> str:
    """How messages name a type: ``int``, ``Literal['a', 'b']``, ``int | None``."""
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


class CommandLineText(str):
    """Command-line text, still to be parsed against its field's type (see :func:`merge`)."""


def _plain(value: Any) -> Any:
    """``value`` with command-line text in nested dicts read as JSON literals."""
    if isinstance(value, CommandLineText):
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
        return ValueError(f"{where}: cannot use {value!r} as {type_name(tp)}{extra}")

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
        number = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif text:
            number = _float_or_none(value)
        if number is None:
            raise fail()
        if not math.isfinite(number):  # no setting of the lab means anything at nan or inf
            raise fail(" (expected a finite number)")
        return number
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
                f"{path} is a single value ({type_name(tp)}), not a group: it has no setting "
                f"{next(iter(value), '')!r}"
            )
    if isinstance(value, CommandLineText):
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
