"""Reader of labelled-sentence tables: CSV, TSV (a header row naming the columns) and JSON
lines (one object per line), a sentence and its label in named columns.

The sentence is split on whitespace into its tokens; the label is kept as a string, whatever it
spells (``positive``, ``3``, ``LOC``), for the task to map to its classes. Each row comes with
its line number, so that a task can name the line of a label it refuses.

Malformed input raises ``ValueError`` naming the file, the line and what was expected.
"""

from __future__ import annotations

import csv
import json
import os
from typing import NamedTuple

from attnlab.lab.data.readers.base import StrPath

__all__ = ["TABLE_FORMATS", "LabelledRow", "table_format", "read_labelled_table"]

#: the table formats and the extensions that mean them
TABLE_FORMATS = {"csv": (".csv",), "tsv": (".tsv", ".tab"), "jsonl": (".jsonl", ".ndjson")}


class LabelledRow(NamedTuple):
    """One sentence of a table: its tokens, its label as written, and its line in the file."""

    tokens: tuple[str, ...]
    label: str
    line: int


def table_format(path: StrPath) -> str | None:
    """``csv``, ``tsv`` or ``jsonl`` from the file's extension, or None."""
    name = os.fspath(path).lower()
    return next((f for f, exts in TABLE_FORMATS.items() if name.endswith(exts)), None)


def read_labelled_table(
    path: StrPath, text_column: str = "text", label_column: str = "label", fmt: str | None = None
) -> list[LabelledRow]:
    """The labelled sentences of a CSV, TSV or JSON-lines file.

    Args:
        path: the file (UTF-8).
        text_column: the column (the key, for JSON lines) holding the sentence.
        label_column: the column holding its label.
        fmt: ``csv``, ``tsv`` or ``jsonl``; None: from the extension (:func:`table_format`).

    Raises:
        FileNotFoundError: no such file.
        ValueError: an unknown format; an empty file; a missing column; a row with another
            number of fields than the header; an empty sentence or label; a line of JSON lines
            that is not a JSON object. The message names the file and the line.
    """
    fmt = fmt or table_format(path)
    if fmt not in TABLE_FORMATS:
        raise ValueError(
            f"{path}: expected a table of sentences and labels: a .csv, .tsv or .jsonl file "
            f"(or --data.format=csv|tsv|jsonl), got {os.path.basename(path)!r}"
        )
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")
    with open(path, encoding="utf-8", newline="") as fh:
        rows = _json_rows(fh, path) if fmt == "jsonl" else _delimited_rows(fh, path, fmt)
        out = [_row(path, line, record, text_column, label_column) for line, record in rows]
    if not out:
        with open(path, encoding="utf-8", errors="replace") as fh:
            what = "no sentences" if any(line.strip() for line in fh) else "empty file"
        raise ValueError(f"{path}: {what}: expected {_expected(fmt, text_column, label_column)}")
    return out


def _expected(fmt: str, text_column: str, label_column: str) -> str:
    if fmt == "jsonl":
        return f'one JSON object per line, e.g. {{"{text_column}": "...", "{label_column}": "..."}}'
    sep = "," if fmt == "csv" else "<TAB>"
    columns = f"{text_column}{sep}{label_column}"
    return f"a header row naming the columns ({columns}), then one row per sentence"


def _json_rows(fh, path: StrPath):
    for line, text in enumerate(fh, 1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{path}:{line}: not valid JSON ({err.msg}): {text.strip()[:80]!r}"
            ) from None
        if not isinstance(record, dict):
            raise ValueError(
                f"{path}:{line}: expected a JSON object with the sentence and its label, got "
                f"{type(record).__name__} {text.strip()[:80]!r}"
            )
        yield line, record


def _delimited_rows(fh, path: StrPath, fmt: str):
    reader = csv.reader(fh, delimiter="," if fmt == "csv" else "\t")
    try:
        header = next((row for row in reader if any(f.strip() for f in row)), None)
        if header is None:
            return
        header = [h.strip() for h in header]
        for row in reader:
            if not any(f.strip() for f in row):
                continue
            if len(row) != len(header):
                raise ValueError(
                    f"{path}:{reader.line_num}: expected {len(header)} fields like the header "
                    f"({', '.join(header)}), got {len(row)}: {row!r}"[:300]
                )
            yield reader.line_num, {"__header__": header, **dict(zip(header, row))}
    except csv.Error as err:
        raise ValueError(f"{path}:{reader.line_num}: malformed {fmt.upper()} row: {err}") from None


def _row(
    path: StrPath, line: int, record: dict, text_column: str, label_column: str
) -> LabelledRow:
    header = record.pop("__header__", None)
    for column, option in ((text_column, "text_column"), (label_column, "label_column")):
        if column not in record:
            if header is not None:
                raise ValueError(
                    f"{path}:1: the header has no column {column!r} (columns: "
                    f"{', '.join(header)}); name the right one with --data.{option}"
                )
            raise ValueError(
                f"{path}:{line}: no key {column!r} (keys: {', '.join(map(str, record))}); name "
                f"the right one with --data.{option}"
            )
    text, label = record[text_column], record[label_column]
    if not isinstance(text, str) or not text.split():
        raise ValueError(f"{path}:{line}: expected a sentence in {text_column!r}, got {text!r}")
    if isinstance(label, bool) or not isinstance(label, str | int) or not str(label).strip():
        raise ValueError(f"{path}:{line}: expected a label in {label_column!r}, got {label!r}")
    return LabelledRow(tuple(text.split()), str(label).strip(), line)
