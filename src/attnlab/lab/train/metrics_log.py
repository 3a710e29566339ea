"""Run outputs beside the checkpoints: ``metrics.csv`` (one row per evaluation) and
``metrics.json`` (the final summary). Both are rewritten atomically as a whole, so a resumed run
regenerates them from its checkpointed history and never duplicates rows."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnlab.lab.train.atomic import atomic_write_text

__all__ = ["write_metrics_csv", "write_metrics_json", "read_metrics_csv"]


def write_metrics_csv(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``rows`` as CSV; columns are the union of the rows' keys in first-seen order."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _fmt(v) for k, v in row.items()})
    return atomic_write_text(path, buf.getvalue())


def read_metrics_csv(path: str | Path) -> list[dict[str, float | str]]:
    """Rows of a ``metrics.csv``, numbers as floats (empty cells stay empty strings)."""
    with Path(path).open(newline="") as f:
        return [{k: _num(v) for k, v in row.items()} for row in csv.DictReader(f)]


def write_metrics_json(path: str | Path, summary: Mapping[str, Any]) -> Path:
    """Write ``summary`` as indented JSON (NaN/inf become ``null``)."""
    return atomic_write_text(path, json.dumps(_clean(summary), indent=2) + "\n")


def _fmt(value: Any) -> Any:
    return f"{value:.6g}" if isinstance(value, float) else value


def _num(text: str) -> float | str:
    try:
        return float(text)
    except ValueError:
        return text


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value
