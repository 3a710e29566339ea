"""Molecule files: a CSV with a SMILES column, or an SDF with property fields.

Both readers return a :class:`MoleculeFile`: the good records and the bad ones that were
skipped. A bad record (a SMILES or molblock RDKit refuses, a missing or non-numeric target) is
an error naming the file, the record number and RDKit's reason, unless ``skip_invalid=True``
is asked for explicitly: then it is left out, listed in ``skipped`` and in a warning, never
dropped silently.

Field names of an SDF are matched without regard to case when there is no exact match: the
Huuskonen solubility files call their SMILES field ``smiles`` in train and ``SMILES`` in test.
"""

from __future__ import annotations

import csv
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from rdkit import Chem

from attnlab.lab.chem.parse import MoleculeError, mol_from_smiles, rdkit_log, sanitize

__all__ = ["MoleculeRecord", "MoleculeFile", "read_csv", "read_sdf", "find_field"]


class MoleculeRecord(NamedTuple):
    """One molecule of a file.

    Attributes:
        mol: the sanitised RDKit molecule, hydrogens implicit.
        smiles: the file's SMILES (CSV column or SDF field), else RDKit's canonical SMILES.
        target: the property to predict.
        name: the molecule's name in the file ("" if none).
        index: the record number in the file, from 1 (a CSV's data rows; an SDF's records).
        extra: other numeric columns asked for (e.g. FreeSolv's ``calc``).
    """

    mol: Chem.Mol
    smiles: str
    target: float
    name: str
    index: int
    extra: Mapping[str, float]


class MoleculeFile(NamedTuple):
    """The records read, and ``(record number, reason)`` of each skipped record."""

    records: list[MoleculeRecord]
    skipped: list[tuple[int, str]]


def _number(value: object, what: str) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise MoleculeError(f"{what}: expected a number, got {value!r}") from None
    if not math.isfinite(x):
        raise MoleculeError(f"{what}: expected a finite number, got {value!r}")
    return x


def _finish(path: Path, records: list, skipped: list, skip_invalid: bool) -> MoleculeFile:
    if skipped:
        listed = "; ".join(f"record {i}: {reason}" for i, reason in skipped[:20])
        more = f" (and {len(skipped) - 20} more)" if len(skipped) > 20 else ""
        warnings.warn(
            f"{path}: skipped {len(skipped)} invalid record(s) (skip_invalid=True): {listed}{more}",
            stacklevel=3,
        )
    if not records:
        raise MoleculeError(f"{path}: no valid molecule in the file")
    return MoleculeFile(records, skipped)


def _record_error(err: MoleculeError, where: str, skip_invalid: bool) -> str:
    """The reason to list when skipping; raise (naming the file) when not."""
    if not skip_invalid:
        raise MoleculeError(
            f"{where}: {err} (pass skip_invalid=True to list and skip bad records)"
        ) from None
    return str(err)


def read_csv(
    path: str | Path,
    *,
    target_column: str,
    smiles_column: str = "smiles",
    name_column: str | None = None,
    extra_columns: Sequence[str] = (),
    skip_invalid: bool = False,
) -> MoleculeFile:
    """Read molecules and a numeric target from a CSV file with a header row.

    Args:
        path: the CSV file.
        target_column: the column to predict (e.g. FreeSolv's ``expt``).
        smiles_column: the SMILES column.
        name_column: a column naming the molecule (e.g. ``iupac``), or None.
        extra_columns: other numeric columns to keep in :attr:`MoleculeRecord.extra`.
        skip_invalid: list and skip bad records instead of raising.

    Raises:
        MoleculeError: a missing column, a bad record (without ``skip_invalid``), no record.
    """
    path = Path(path)
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        wanted = [smiles_column, target_column, *extra_columns]
        missing = [c for c in [*wanted, name_column] if c is not None and c not in header]
        if missing:
            raise MoleculeError(f"{path}: no column(s) {missing}; the header has {header}")
        records: list[MoleculeRecord] = []
        skipped: list[tuple[int, str]] = []
        for index, row in enumerate(reader, 1):
            what = f"record {index} (line {reader.line_num})"
            try:
                smiles = row[smiles_column] or ""
                mol = mol_from_smiles(smiles)
                target = _number(row[target_column], f"{target_column!r}")
                extra = {c: _number(row[c], repr(c)) for c in extra_columns}
            except MoleculeError as err:
                skipped.append((index, _record_error(err, f"{path}: {what}", skip_invalid)))
                continue
            name = row[name_column] if name_column else ""
            records.append(MoleculeRecord(mol, smiles, target, name, index, extra))
    return _finish(path, records, skipped, skip_invalid)


def find_field(mol: Chem.Mol, name: str) -> str | None:
    """The property field of ``mol`` called ``name``: the exact name, else the one field that
    matches ignoring case; None if there is none.

    Raises:
        MoleculeError: several fields match ignoring case and none exactly.
    """
    if mol.HasProp(name):
        return name
    matches = [p for p in mol.GetPropNames() if p.lower() == name.lower()]
    if len(matches) > 1:
        raise MoleculeError(f"fields {matches} all match {name!r} ignoring case; name one exactly")
    return matches[0] if matches else None


def _sdf_record(
    mol: Chem.Mol, what: str, target_field: str, smiles_field: str, name_field: str
) -> tuple[Chem.Mol, str, float, str]:
    mol = Chem.RemoveHs(sanitize(mol, what))  # sanitize=False here would drop the ring info
    field = find_field(mol, target_field)
    if field is None:
        fields = list(mol.GetPropNames())
        raise MoleculeError(f"{what} has no field {target_field!r}; its fields are {fields}")
    target = _number(mol.GetProp(field), f"{what}, field {field!r}")
    smiles_key = find_field(mol, smiles_field)
    smiles = mol.GetProp(smiles_key) if smiles_key else Chem.MolToSmiles(mol)
    name_key = find_field(mol, name_field)
    name = mol.GetProp(name_key) if name_key else (mol.GetProp("_Name") or "")
    return mol, smiles, target, name


def read_sdf(
    path: str | Path,
    *,
    target_field: str,
    smiles_field: str = "smiles",
    name_field: str = "NAME",
    skip_invalid: bool = False,
) -> MoleculeFile:
    """Read molecules (from their molblocks) and a numeric property from an SDF file.

    Args:
        path: the SDF file.
        target_field: the property field to predict (e.g. ``SOL``), any case.
        smiles_field: the field whose SMILES is kept for display (any case; RDKit's canonical
            SMILES when absent). The structure always comes from the molblock.
        name_field: the field naming the molecule (any case; else the molblock's title).
        skip_invalid: list and skip bad records instead of raising.

    Raises:
        MoleculeError: an unreadable record, a missing or non-numeric target (without
            ``skip_invalid``), no record.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SDF file {str(path)!r} does not exist")
    supplier = Chem.SDMolSupplier(str(path), sanitize=False, removeHs=False)
    records: list[MoleculeRecord] = []
    skipped: list[tuple[int, str]] = []
    for index in range(1, len(supplier) + 1):
        what = f"record {index}"
        try:
            with rdkit_log() as log:
                mol = supplier[index - 1]
            if mol is None:
                raise MoleculeError(f"{what} is unreadable: {log.text or 'RDKit gave no reason'}")
            mol, smiles, target, name = _sdf_record(
                mol, what, target_field, smiles_field, name_field
            )
        except MoleculeError as err:
            skipped.append((index, _record_error(err, str(path), skip_invalid)))
            continue
        records.append(MoleculeRecord(mol, smiles, target, name, index, {}))
    return _finish(path, records, skipped, skip_invalid)
