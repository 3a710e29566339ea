"""Sizes in bytes, for people: ``512 bytes``, ``3.4 MiB``, ``16.0 GiB`` (binary units)."""

from __future__ import annotations

__all__ = ["format_bytes"]


def format_bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit that keeps the number >= 1, one decimal."""
    if n < 1024:
        return f"{int(n)} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            break
    return f"{n:.1f} {unit}"
