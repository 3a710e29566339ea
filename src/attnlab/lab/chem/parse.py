"""SMILES and molblocks to sanitised RDKit molecules, with RDKit's own reason on failure.

RDKit reports *why* a SMILES does not parse (or a molecule does not sanitise) only in its
error log, and answers ``None``. Here the log is captured while RDKit works, so a bad input
raises a :class:`MoleculeError` that names the input and quotes RDKit's message, e.g.::

    MoleculeError: SMILES 'C1CC(' does not parse: SMILES Parse Error: syntax error while
    parsing: C1CC( ...

Parsing runs with ``sanitize=False`` and sanitisation separately (``Chem.SanitizeMol``), whose
exception carries the chemistry problem ("Explicit valence for atom # 0 N, 5, is greater than
permitted", "Can't kekulize mol").
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator

from rdkit import Chem, rdBase

__all__ = ["MoleculeError", "fragments", "largest_fragment", "mol_from_smiles", "sanitize",
           "rdkit_log"]  # fmt: skip

# "[02:39:48] " at the start of each RDKit log line: the time says nothing about the input.
_STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] ?", re.MULTILINE)


class MoleculeError(ValueError):
    """An input RDKit cannot turn into a molecule; the message names it and RDKit's reason."""


class _Log:
    """What RDKit logged inside :func:`rdkit_log` (``text`` is set when the block exits)."""

    text: str = ""


@contextlib.contextmanager
def rdkit_log() -> Iterator[_Log]:
    """Capture RDKit's error log for the block (its messages stay off the terminal).

    Uses ``rdBase.CaptureErrorLog`` where RDKit has it (2025.09+); older RDKit logs to
    Python's ``sys.stderr`` for the block, which is redirected.
    """
    log = _Log()
    if hasattr(rdBase, "CaptureErrorLog"):
        with rdBase.CaptureErrorLog() as capture:
            yield log
        log.text = _clean(capture.messages)
        return
    buf = io.StringIO()
    rdBase.LogToPythonStderr()
    try:
        with contextlib.redirect_stderr(buf):
            yield log
    finally:
        rdBase.LogToCppStreams()
        log.text = _clean(buf.getvalue())


def _clean(messages: str) -> str:
    lines = _STAMP.sub("", messages).splitlines()
    return " | ".join(line.strip() for line in lines if line.strip())


def sanitize(mol: Chem.Mol, what: str) -> Chem.Mol:
    """Sanitise ``mol`` in place (valences, aromaticity, ...) and return it.

    Args:
        mol: a molecule parsed with ``sanitize=False``.
        what: names the input in the error (``"SMILES 'CCO'"``, ``"record 3 of x.sdf"``).

    Raises:
        MoleculeError: RDKit refuses the molecule; the message quotes RDKit's reason.
    """
    with rdkit_log():  # the exception carries the message; keep the log quiet
        try:
            Chem.SanitizeMol(mol)
        except Exception as err:  # RDKit raises several MolSanitizeException subclasses
            reason = str(err).strip() or type(err).__name__
            raise MoleculeError(f"{what} is not a valid molecule: {reason}") from None
    return mol


def mol_from_smiles(smiles: str, *, explicit_h: bool = False, what: str = "") -> Chem.Mol:
    """Parse and sanitise a SMILES string.

    Args:
        smiles: the SMILES string.
        explicit_h: add the hydrogens as atoms (``Chem.AddHs``); otherwise they are counted
            on their heavy atom only.
        what: how the error names the input (default ``"SMILES '<smiles>'"``).

    Raises:
        MoleculeError: not a string, empty, holding a space, unparseable or not sanitisable,
            naming the string and RDKit's reason.
    """
    if not isinstance(smiles, str):
        raise MoleculeError(f"SMILES: expected a string, got {type(smiles).__name__} {smiles!r}")
    what = what or f"SMILES {smiles!r}"
    if not smiles.strip():
        raise MoleculeError(f"{what} is empty; give a SMILES string such as 'CCO'")
    space = re.search(r"\s", smiles.strip())
    if space is not None:  # RDKit stops at a space and reads the rest as the molecule's name
        raise MoleculeError(
            f"{what} holds a space at character {space.start()}: a SMILES has none (RDKit "
            "would read what follows as the molecule's name); give one SMILES per input, "
            "fragments joined by '.'"
        )
    with rdkit_log() as log:
        mol = Chem.MolFromSmiles(smiles.strip(), sanitize=False)
    if mol is None:
        raise MoleculeError(f"{what} does not parse: {log.text or 'RDKit gave no reason'}")
    if mol.GetNumAtoms() == 0:
        raise MoleculeError(f"{what} has no atoms")
    mol = sanitize(mol, what)
    return Chem.AddHs(mol) if explicit_h else mol


def fragments(mol: Chem.Mol) -> tuple[Chem.Mol, ...]:
    """The disconnected parts of ``mol`` (a salt ``[Na+].[Cl-]`` has two), in SMILES order."""
    return Chem.GetMolFrags(mol, asMols=True)


def largest_fragment(mol: Chem.Mol) -> Chem.Mol:
    """The fragment with the most heavy atoms (then the most atoms; the first on a tie): the
    parent compound of a salt or a solvate, e.g. ethanol of ``CCO.O``."""
    parts = fragments(mol)
    sizes = [(m.GetNumHeavyAtoms(), m.GetNumAtoms()) for m in parts]
    return parts[max(range(len(parts)), key=lambda k: (sizes[k], -k))]
