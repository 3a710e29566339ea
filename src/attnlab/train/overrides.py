"""Nested, typed config dataclasses from strings and dicts, and back.

The machinery behind ``--train.lr=1e-3`` and ``--model.encoder.heads=8`` (minGPT style): a
dotted path walks nested dataclasses (and free-form dicts), the text is converted to the
field's declared type, and an unknown name raises a ``ValueError`` that lists the valid names at
that level. Objects are never mutated: every change returns a new object built with
``dataclasses.replace``, so each dataclass's ``__post_init__`` validation runs again.

Field types understood: ``int``, ``float``, ``bool``, ``str``, ``pathlib.Path``,
``Literal[...]``, ``X | None`` (text ``none``/``null``), unions tried left to right
(``int | float``), ``tuple[X, ...]``, ``tuple[X, Y]``, ``list[X]`` (text ``1,2`` or ``[1, 2]``),
``dict`` (JSON text), nested dataclasses, and ``Any``: a field typed ``Any`` is handled by the
type of its *current value* (a dataclass is walked strictly, a dict freely).

Free-form dicts accept new keys; text for them is read as a JSON literal (``3``, ``true``,
``[1, 2]``) and falls back to the plain string. Strict validation needs a dataclass.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

__all__ = ["apply_overrides", "parse_override", "merge", "to_dict", "from_dict", "convert"]

C = TypeVar("C")

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_NONE = {"none", "null"}


def is_config(obj: Any) -> bool:
    """Whether ``obj`` is a dataclass *instance*."""
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """``{field name: resolved type}`` of the init fields of dataclass ``cls``."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.init}


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")


def _unknown(obj: Any, key: str, where: str) -> ValueError:
    names = list(field_types(type(obj))) if is_config(obj) else sorted(obj)
    path = f"{where}.{key}" if where else key
    level = (
        f"{where!r} ({type(obj).__name__})" if where else f"the top level ({type(obj).__name__})"
    )
    close = difflib.get_close_matches(key, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ValueError(f"unknown setting {path!r}{hint} valid names at {level}: {', '.join(names)}")


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
        return _literal(value) if text else value
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
            return value
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
        return dict(value)
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
    changes only the fields it names.
    """
    if is_config(obj):
        hints = field_types(type(obj))
        changes = {}
        for key, value in data.items():
            if key not in hints:
                raise _unknown(obj, key, where)
            path = f"{where}.{key}" if where else key
            current = getattr(obj, key)
            if isinstance(value, Mapping) and (is_config(current) or isinstance(current, Mapping)):
                changes[key] = merge(current, value, path)
            else:
                changes[key] = convert(value, hints[key], path)
        return dataclasses.replace(obj, **changes)
    if isinstance(obj, Mapping):
        out = dict(obj)
        for key, value in data.items():
            current = out.get(key)
            path = f"{where}.{key}" if where else key
            if isinstance(value, Mapping) and (is_config(current) or isinstance(current, Mapping)):
                out[key] = merge(current, value, path)
            else:
                out[key] = value
        return out  # type: ignore[return-value]
    raise TypeError(f"{where or 'config'}: cannot merge a mapping into a {type(obj).__name__}")


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
    """A copy of ``cfg`` with each ``--dotted.name=value`` override applied, in order.

    Example:
        >>> cfg = apply_overrides(cfg, ["--train.lr=3e-4", "--model.encoder.heads=8"])

    Raises:
        ValueError: an unknown name (the message lists the valid names at that level), a value
            that does not convert to the field's type, or a failed ``__post_init__`` check.
    """
    for item in overrides:
        parts, text = parse_override(item)
        cfg = _set_text(cfg, parts, text, "")
    return cfg


def _set_text(obj: Any, parts: list[str], text: str, where: str) -> Any:
    key, rest = parts[0], parts[1:]
    path = f"{where}.{key}" if where else key
    if is_config(obj):
        hints = field_types(type(obj))
        if key not in hints:
            raise _unknown(obj, key, where)
        current = getattr(obj, key)
        if rest:
            if not (is_config(current) or isinstance(current, Mapping)):
                raise ValueError(
                    f"{path} is a single value ({_type_name(hints[key])}), not a group: "
                    f"it has no setting {rest[0]!r}"
                )
            new = _set_text(current, rest, text, path)
        elif is_config(current):
            names = ", ".join(field_types(type(current)))
            raise ValueError(f"{path} is a group of settings; set one of its fields: {names}")
        elif hints[key] is Any and isinstance(current, str | bool | int | float):
            new = convert(text, type(current), path, text=True)
        else:
            new = convert(text, hints[key], path, text=True)
        return dataclasses.replace(obj, **{key: new})
    if isinstance(obj, Mapping):
        out = dict(obj)
        current = out.get(key)
        if rest:
            if current is None:
                current = {}
            elif not (is_config(current) or isinstance(current, Mapping)):
                raise ValueError(f"{path} is a single value, not a group: no setting {rest[0]!r}")
            out[key] = _set_text(current, rest, text, path)
        elif is_config(current):
            names = ", ".join(field_types(type(current)))
            raise ValueError(f"{path} is a group of settings; set one of its fields: {names}")
        elif isinstance(current, str):
            out[key] = text
        elif isinstance(current, bool | int | float):
            out[key] = convert(text, type(current), path, text=True)
        else:
            out[key] = _literal(text)
        return out
    raise ValueError(f"{where} is a single value, not a group: no setting {key!r}")
