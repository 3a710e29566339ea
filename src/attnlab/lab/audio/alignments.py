"""Time alignments of recordings: Praat TextGrid files (long or short text format, an interval
tier) and HTK label files (``.lab``: ``start end label`` lines, times in 100 ns units, or in
seconds when written with a decimal point).

Both become contiguous ``(label, start, end)`` segments in seconds from 0: a gap between two
labelled spans (or before the first) becomes a segment of the ``empty`` label, and so does an
interval whose text is empty.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["ALIGNMENT_SUFFIXES", "read_alignment"]

#: the file name endings read as alignments (lower case)
ALIGNMENT_SUFFIXES = (".textgrid", ".lab")
_TOKEN = re.compile(r'"((?:[^"]|"")*)"|(<exists>|<absent>)|(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)')
_INDEX = re.compile(r"\[\s*\d+\s*\]")  # the long format's "item [1]:", "intervals [3]:"


def read_alignment(
    path: str | os.PathLike[str], *, tier: str = "", empty: str = "sil"
) -> list[tuple[str, float, float]]:
    """The segments of a ``.TextGrid`` or ``.lab`` file (module docstring).

    Args:
        path: the file.
        tier: the TextGrid interval tier to read ("": the first interval tier).
        empty: the label of an empty interval or of a gap.

    Raises:
        ValueError: one line naming the file (and the line of a ``.lab``): not a TextGrid, no
            such tier, a line that is not ``start end label``, times that go back, no segment.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    if path.suffix.lower() == ".textgrid":
        spans = _textgrid(text, str(path), tier)
    else:
        spans = _htk(text, str(path))
    segments: list[tuple[str, float, float]] = []
    end = 0.0
    for label, start, stop in spans:
        if start < end - 1e-9:
            raise ValueError(f"{path}: segment {label!r} starts at {start:g} s, before the "
                             f"previous one ends ({end:g} s)")  # fmt: skip
        if start > end + 1e-9:
            segments.append((empty, end, start))
        if stop > start:
            segments.append((label.strip() or empty, start, stop))
            end = stop
    if not segments:
        raise ValueError(f"{path}: no labelled segment")
    return segments


def _textgrid(text: str, name: str, tier: str) -> list[tuple[str, float, float]]:
    tokens = [m.group(1).replace('""', '"') if m.group(1) is not None else m.group(2) or
              float(m.group(3)) for m in _TOKEN.finditer(_INDEX.sub(" ", text))]  # fmt: skip
    if tokens[:2] != ["ooTextFile", "TextGrid"]:
        raise ValueError(f'{name}: not a Praat TextGrid (expected File type = "ooTextFile", '
                         'Object class = "TextGrid" in text format)')  # fmt: skip
    try:
        pos = 4
        if tokens[pos] == "<absent>":
            raise ValueError(f"{name}: the TextGrid has no tiers")
        pos += 1 if tokens[pos] == "<exists>" else 0
        count, pos = int(tokens[pos]), pos + 1
        names = []
        for _ in range(count):
            kind, label, pos = tokens[pos], tokens[pos + 1], pos + 4
            n, pos = int(tokens[pos]), pos + 1
            width = 3 if kind == "IntervalTier" else 2
            items, pos = tokens[pos : pos + width * n], pos + width * n
            names.append(label)
            if kind == "IntervalTier" and (not tier or tier == label):
                return [(str(items[i + 2]), float(items[i]), float(items[i + 1]))
                        for i in range(0, len(items), 3)]  # fmt: skip
    except (IndexError, TypeError, ValueError) as err:
        if str(err).startswith(name):
            raise
        raise ValueError(f"{name}: a truncated or malformed TextGrid ({err})") from None
    wanted = f"no interval tier named {tier!r}" if tier else "no interval tier"
    raise ValueError(f"{name}: {wanted} (tiers: {', '.join(map(str, names)) or 'none'}); "
                     "--data.tier names one")  # fmt: skip


def _htk(text: str, name: str) -> list[tuple[str, float, float]]:
    spans = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0] == ".":  # a blank line, or the end of a master label file
            continue
        try:
            start, stop = fields[0], fields[1]
            per_second = 1.0 if "." in start + stop else 1e7  # HTK: 100 ns units
            span = (fields[2], float(start) / per_second, float(stop) / per_second)
        except (IndexError, ValueError):
            raise ValueError(f"{name}:{number}: expected 'start end label' (times in 100 ns "
                             f"units, or seconds), got {line.strip()!r}") from None  # fmt: skip
        if span[2] < span[1]:
            raise ValueError(f"{name}:{number}: the segment ends ({span[2]:g} s) before it "
                             f"starts ({span[1]:g} s)")  # fmt: skip
        spans.append(span)
    return spans
