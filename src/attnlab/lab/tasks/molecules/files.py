"""A user's own molecules (``--data.train=FILE.csv``): the options, the CSV of SMILES and targets,
regression or classification, the invalid SMILES skipped, and the splits a run keeps.

A file is a CSV with a header row; ``--data.smiles_column`` (``smiles``) holds a SMILES string
and ``--data.target_column`` (``target``) the value to predict: a number (regression) or any
label (classification). ``--data.kind=auto`` decides from the train file: every target a
number and more than :data:`REGRESSION_DISTINCT` distinct values is a regression, anything else
a classification (``0``/``1`` targets are two classes).

A SMILES RDKit refuses stops the run with one line naming the file, the row and RDKit's reason;
with ``--data.skip_invalid=true`` it is left out, counted in a warning and listed in the run's
``RUN/data/skipped.csv`` (file, row, SMILES, reason). A run keeps its splits in ``RUN/data/`` as
CSVs of the same layout (``smiles``, ``target``, ``row``: where the molecule came from).
"""

from __future__ import annotations

import csv
import io
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from rdkit import Chem

from attnlab.lab.chem import MoleculeError, mol_from_smiles, scaffold_split
from attnlab.lab.data.own import SPLITS, FileSplits, as_options, complete_splits

__all__ = ["KINDS", "REGRESSION_DISTINCT", "MoleculeDataOptions", "MoleculeRow",
           "as_molecule_options", "cut_molecules", "read_molecules", "render_rows",
           "render_skipped", "resolve_kind", "target_value", "warn_skipped"]  # fmt: skip

KINDS = ("auto", "regression", "classification")
#: ``--data.kind=auto``: numeric targets with more distinct values than this are a regression
REGRESSION_DISTINCT = 10


@dataclass
class MoleculeDataOptions(FileSplits):
    """Your own molecules (``--data.NAME`` for short): CSVs of a SMILES and a target column.

    Args:
        train: the training CSV (none: the task's dataset).
        dev: the dev CSV (none: cut from train, see split).
        test: the test CSV (none: cut from train, see split).
        split: the fractions of the train file cut as dev and test when those files are not
            given (0 cuts none); the cut splits are saved in the run.
        seed: seeds the random cut of dev and test from train.
        split_by: random (seeded) or scaffold (Bemis-Murcko: no ring system on two sides;
            deterministic) for the cut of dev and test.
        smiles_column: the column holding the SMILES.
        target_column: the column holding the value (a number) or the label (any string).
        kind: regression, classification, or auto: regression when every train target is a
            number and there are more than 10 distinct ones, else classification.
        skip_invalid: leave out SMILES RDKit refuses (counted, and listed in the run's
            data/skipped.csv) instead of stopping.
    """

    split_by: str = "random"
    smiles_column: str = "smiles"
    target_column: str = "target"
    kind: str = "auto"
    skip_invalid: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind not in KINDS:
            raise ValueError(f"data.kind: one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.split_by not in ("random", "scaffold"):
            raise ValueError(f"data.split_by: random or scaffold, got {self.split_by!r}")


def as_molecule_options(value: Any) -> MoleculeDataOptions:
    """``value`` (a :class:`MoleculeDataOptions` or a mapping of its fields) as one."""
    return as_options(MoleculeDataOptions, value)


class MoleculeRow(NamedTuple):
    """One molecule of a file: its RDKit molecule, SMILES, target as written, and ``where``
    (``FILE: row N``) it came from."""

    mol: Chem.Mol
    smiles: str
    target: str
    where: str


def read_molecules(
    path: str, options: MoleculeDataOptions, split: str, skipped: list[tuple[str, ...]],
    *, smiles_column: str | None = None, target_column: str | None = None,
) -> list[MoleculeRow]:  # fmt: skip
    """The molecules of one CSV; an invalid SMILES raises, or with ``skip_invalid`` is appended
    to ``skipped`` as ``(file, row, smiles, reason)``.

    Raises:
        FileNotFoundError: no such file (naming the option).
        ValueError: one line naming the file (and row): a missing column, an empty target, a
            SMILES RDKit refuses (its reason), no molecule.
    """
    smiles_column = smiles_column or options.smiles_column
    target_column = target_column or options.target_column
    if not Path(path).is_file():
        raise FileNotFoundError(f"--data.{split}: no such file {path}")
    rows: list[MoleculeRow] = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in (smiles_column, target_column) if c not in header]
        if missing:
            raise ValueError(
                f"{path}: no column {' or '.join(map(repr, missing))} (the header has "
                f"{', '.join(header) or 'nothing'}); name yours with --data.smiles_column / "
                "--data.target_column"
            )
        for index, row in enumerate(reader, 1):
            where = f"{path}: row {index} (line {reader.line_num})"
            smiles, target = (row[smiles_column] or "").strip(), (row[target_column] or "").strip()
            if not target:
                raise ValueError(f"{where}: empty {target_column!r}; every molecule needs a target")
            try:
                mol = mol_from_smiles(smiles, what=f"SMILES {smiles!r}")
            except MoleculeError as err:
                if not options.skip_invalid:
                    raise ValueError(f"{where}: {err} (--data.skip_invalid=true skips and lists "
                                     "such rows)") from None  # fmt: skip
                skipped.append((path, str(index), smiles, str(err)))
                continue
            rows.append(MoleculeRow(mol, smiles, target, where))
    if not rows:
        raise ValueError(f"{path}: no valid molecule in the file")
    return rows


def warn_skipped(skipped: list[tuple[str, ...]]) -> None:
    """One warning counting the rows left out (``--data.skip_invalid``)."""
    if skipped:
        first = "; ".join(f"{f}: row {r}: {why}" for f, r, _, why in skipped[:3])
        warnings.warn(f"skipped {len(skipped)} invalid SMILES (--data.skip_invalid=true; listed "
                      f"in the run's data/skipped.csv): {first}", stacklevel=3)  # fmt: skip


def resolve_kind(kind: str, targets: list[str]) -> str:
    """``regression`` or ``classification``: ``kind`` unless ``auto`` (module docstring)."""
    if kind != "auto":
        return kind
    numbers = [_number(t) for t in targets]
    if all(x is not None for x in numbers) and len(set(numbers)) > REGRESSION_DISTINCT:
        return "regression"
    return "classification"


def _number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def target_value(row: MoleculeRow, column: str) -> float:
    """The numeric target of a regression row.

    Raises:
        ValueError: not a finite number (naming the row).
    """
    x = _number(row.target)
    if x is None:
        raise ValueError(f"{row.where}: {column!r}: expected a number (the task is a regression), "
                         f"got {row.target!r}")  # fmt: skip
    return x


def cut_molecules(
    read: dict[str, list[MoleculeRow]], files: dict[str, str], options: MoleculeDataOptions
) -> tuple[dict[str, list[MoleculeRow]], dict[str, str]]:
    """The three splits, dev and test not given cut from train (random by seed, or by
    scaffold), and where each came from."""
    if options.split_by == "random":
        splits, sources, _ = complete_splits(read, files, options.split, options.seed)
        return splits, sources
    train = read["train"]
    dev_f, test_f = (0.0 if s in read else f for s, f in zip(("dev", "test"), options.split))
    parts = scaffold_split([r.mol for r in train], (1.0 - dev_f - test_f, dev_f, test_f))
    splits = {s: [train[i] for i in idx] for s, idx in zip(SPLITS, parts)}
    splits.update({s: read[s] for s in ("dev", "test") if s in read})
    how = f"by scaffold (--data.split={options.split[0]},{options.split[1]})"
    sources = {s: files.get(s) or f"cut from {files['train']} {how}" for s in SPLITS}
    return splits, sources


def render_rows(rows: list[MoleculeRow]) -> str:
    """A split as the CSV a run keeps (``smiles``, ``target``, ``row``)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["smiles", "target", "row"])
    writer.writerows([r.smiles, r.target, r.where] for r in rows)
    return buf.getvalue()


def render_skipped(skipped: list[tuple[str, ...]]) -> str:
    """The rows left out by ``--data.skip_invalid`` as ``RUN/data/skipped.csv``."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["file", "row", "smiles", "reason"])
    writer.writerows(skipped)
    return buf.getvalue()
