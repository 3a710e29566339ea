"""Run outputs beside the checkpoints: ``metrics.csv`` (one row per evaluation) and
``metrics.json`` (the final summary). Both are rewritten atomically as a whole, so a resumed run
regenerates them from its checkpointed history and never duplicates rows; during a run,
:class:`MetricsCsv` appends each new row instead (rewriting a file of every earlier row at each
evaluation made a run of n evaluations O(n^2): seconds, on a graph's thousand epochs)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnlab.lab.train.atomic import atomic_write_text

__all__ = ["MetricsCsv", "write_metrics_csv", "write_metrics_json", "read_metrics_csv"]


def write_metrics_csv(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write ``rows`` as CSV; columns are the union of the rows' keys in first-seen order."""
    columns = _columns(rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _fmt(v) for k, v in row.items()})
    return atomic_write_text(path, buf.getvalue())


class MetricsCsv:
    """A run's ``metrics.csv``, kept equal to :func:`write_metrics_csv` of its history: the
    whole file, atomically, on the first write and whenever the rows are not the ones written
    plus one, or a new row brings a new column; otherwise the new row, appended."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._columns: list[str] | None = None  # the header written
        self._rows = 0  # rows in the file

    def write(self, rows: Sequence[Mapping[str, Any]]) -> Path:
        """Bring the file to ``rows`` (the run's history so far)."""
        columns = self._columns
        if (
            columns is None
            or len(rows) != self._rows + 1
            or any(k not in columns for k in rows[-1])
        ):
            write_metrics_csv(self.path, rows)
            self._columns = _columns(rows)
        else:
            with self.path.open("a", newline="", encoding="utf-8") as f:
                writer = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
                writer.writerow({k: _fmt(v) for k, v in rows[-1].items()})
        self._rows = len(rows)
        return self.path


def _columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The union of the rows' keys in first-seen order."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    return columns


def read_metrics_csv(path: str | Path) -> list[dict[str, float | str]]:
    """Rows of a ``metrics.csv``, numbers as floats (empty cells stay empty strings). A last
    row without its line end, cut short by a crash while it was appended, is left out."""
    text = Path(path).read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    rows = csv.DictReader(io.StringIO(text, newline=""))
    return [{k: _num(v) for k, v in row.items()} for row in rows]


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
