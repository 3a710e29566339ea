"""A tiny name -> object registry, one per axis (scores, normalisations, backends, ...).

Strings become objects only at the config/CLI boundary; an unknown name raises a
``ValueError`` that lists the valid choices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects of one kind.

    Args:
        kind: what the registry holds, used in error messages (e.g. ``"score"``).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T] | T:
        """Register ``obj`` under ``name``; usable as a decorator when ``obj`` is omitted."""

        def add(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._items[name] = item
            return item

        return add if obj is None else add(obj)

    def get(self, name: str) -> T:
        """The object registered as ``name``; an unknown name lists the valid ones."""
        if not isinstance(name, str) or name not in self._items:
            raise ValueError(
                f"unknown {self.kind} {name!r}; valid choices: {', '.join(sorted(self._items))}"
            )
        return self._items[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)
