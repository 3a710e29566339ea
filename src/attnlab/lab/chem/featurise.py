r"""Atoms as one-hot vectors, and the molecule's bonds and shortest-path distances.

A molecule is a *set* of atoms; each atom is the concatenation of one-hot blocks, one per
property in :data:`ATOM_FEATURES` (each block has an ``"other"`` slot for values outside its
vocabulary), followed by two flags:

=================  ======================================================  =========
block              values (then ``other``)                                  RDKit
=================  ======================================================  =========
``element``        H B C N O F Si P S Cl Br I                               GetSymbol
``degree``         0 1 2 3 4 5 (bonded atoms in the graph)                  GetDegree
``charge``         -1 0 1                                                   GetFormalCharge
``hydrogens``      0 1 2 3 4 (attached H, implicit or explicit)             GetTotalNumHs
``hybridisation``  S SP SP2 SP3 SP3D SP3D2                                  GetHybridization
``aromatic``       flag (one slot, no ``other``)                            GetIsAromatic
``in_ring``        flag (one slot, no ``other``)                            IsInRing
=================  ======================================================  =========

:data:`NUM_ATOM_FEATURES` = 13 + 7 + 4 + 6 + 7 + 1 + 1 = 39. The vocabulary covers every atom
of FreeSolv and the Huuskonen solubility set; e.g. a tin or selenium atom lands in
``element=other``, an unusual hybridisation (``UNSPECIFIED``, ``SP2D``) in
``hybridisation=other``.

With ``explicit_h=True`` the hydrogens become atoms of their own (``Chem.AddHs``): they then
count in ``degree`` of their heavy atom and in the distances, and ``hydrogens`` still counts
them (``GetTotalNumHs(includeNeighbors=True)``), so a heavy atom's vector is the same either way
except for its degree.

Distances are bond counts along shortest paths (``Chem.GetDistanceMatrix``); atoms in
different fragments (a salt) have no path, marked :data:`UNREACHABLE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from rdkit import Chem
from torch import Tensor

__all__ = [
    "ATOM_FEATURES",
    "FLAGS",
    "NUM_ATOM_FEATURES",
    "UNREACHABLE",
    "MolGraph",
    "atom_feature_names",
    "atom_features",
    "featurise",
    "outside_vocabulary",
    "shortest_paths",
]

_HYB = Chem.rdchem.HybridizationType

#: one-hot blocks: name -> vocabulary (each block also has an "other" slot at its end)
ATOM_FEATURES: dict[str, tuple] = {
    "element": ("H", "B", "C", "N", "O", "F", "Si", "P", "S", "Cl", "Br", "I"),
    "degree": (0, 1, 2, 3, 4, 5),
    "charge": (-1, 0, 1),
    "hydrogens": (0, 1, 2, 3, 4),
    "hybridisation": ("S", "SP", "SP2", "SP3", "SP3D", "SP3D2"),
}
#: one-slot flags after the blocks
FLAGS: tuple[str, ...] = ("aromatic", "in_ring")

NUM_ATOM_FEATURES = sum(len(v) + 1 for v in ATOM_FEATURES.values()) + len(FLAGS)

#: the distance between atoms with no path between them (different fragments)
UNREACHABLE = -1

_OFFSETS: dict[str, int] = {}
_start = 0
for _name, _vocab in ATOM_FEATURES.items():
    _OFFSETS[_name] = _start
    _start += len(_vocab) + 1
_FLAG_OFFSET = _start
del _start, _name, _vocab


def atom_feature_names() -> list[str]:
    """The name of every slot, in order: ``"element=C"``, ..., ``"element=other"``, ...,
    ``"aromatic"``, ``"in_ring"``."""
    names = [f"{k}={v}" for k, vocab in ATOM_FEATURES.items() for v in (*vocab, "other")]
    return names + list(FLAGS)


def _properties(atom: Chem.Atom) -> dict[str, object]:
    return {
        "element": atom.GetSymbol(),
        "degree": atom.GetDegree(),
        "charge": atom.GetFormalCharge(),
        "hydrogens": atom.GetTotalNumHs(includeNeighbors=True),
        "hybridisation": str(atom.GetHybridization()),
    }


def atom_features(mol: Chem.Mol) -> Tensor:
    """The atoms of ``mol`` as one-hot vectors ``(n, NUM_ATOM_FEATURES)`` float32 (the module
    docstring lists the slots; :func:`atom_feature_names` names them)."""
    out = np.zeros((mol.GetNumAtoms(), NUM_ATOM_FEATURES), dtype=np.float32)
    for atom in mol.GetAtoms():
        i = atom.GetIdx()
        for name, value in _properties(atom).items():
            vocab = ATOM_FEATURES[name]
            slot = vocab.index(value) if value in vocab else len(vocab)  # else "other"
            out[i, _OFFSETS[name] + slot] = 1.0
        out[i, _FLAG_OFFSET] = float(atom.GetIsAromatic())
        out[i, _FLAG_OFFSET + 1] = float(atom.IsInRing())
    return torch.from_numpy(out)


#: the blocks whose ``other`` slot means an atom of a kind the vocabulary does not know (an
#: element, a charge); the others' ``other`` is ordinary (an explicit hydrogen's hybridisation
#: is ``UNSPECIFIED``, so every explicit-H molecule fills ``hybridisation=other``)
_IDENTITY_BLOCKS = ("element", "charge")


def outside_vocabulary(mol: Chem.Mol) -> list[str]:
    """The atoms of ``mol`` whose element or formal charge is outside :data:`ATOM_FEATURES`'
    vocabularies (read as that block's ``other`` slot), as ``"atom 0 (He): element=He"``."""
    out = []
    for atom in mol.GetAtoms():
        props = _properties(atom)
        odd = [f"{k}={props[k]}" for k in _IDENTITY_BLOCKS if props[k] not in ATOM_FEATURES[k]]
        if odd:
            out.append(f"atom {atom.GetIdx()} ({atom.GetSymbol()}): {', '.join(odd)}")
    return out


def shortest_paths(mol: Chem.Mol) -> Tensor:
    """Bond counts along shortest paths ``(n, n)`` int64: 0 on the diagonal, 1 between bonded
    atoms, :data:`UNREACHABLE` between atoms of different fragments."""
    d = Chem.GetDistanceMatrix(mol)  # float; 1e8 between fragments
    reachable = d < mol.GetNumAtoms()  # a real path has at most n - 1 bonds
    return torch.from_numpy(np.where(reachable, d, UNREACHABLE).astype(np.int64))


class MolGraph(NamedTuple):
    """A featurised molecule.

    Attributes:
        features: ``(n, NUM_ATOM_FEATURES)`` float32 one-hot atom vectors.
        distances: ``(n, n)`` int64 shortest-path bond counts (:data:`UNREACHABLE` if none).
        edge_index: ``(2, 2 * bonds)`` int64, each bond in both directions (PyG convention:
            row 0 sources, row 1 targets).
        symbols: the atoms' element symbols (axis labels).
    """

    features: Tensor
    distances: Tensor
    edge_index: Tensor
    symbols: list[str]

    @property
    def num_atoms(self) -> int:
        return len(self.symbols)


def featurise(mol: Chem.Mol, *, explicit_h: bool = False) -> MolGraph:
    """``mol`` as a :class:`MolGraph`; with ``explicit_h`` the hydrogens become atoms.

    Args:
        mol: a sanitised RDKit molecule (hydrogens implicit or explicit).
        explicit_h: add hydrogens as atoms (``Chem.AddHs``) before featurising.
    """
    if explicit_h:
        mol = Chem.AddHs(mol)
    bonds: Sequence[tuple[int, int]] = [
        (b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()
    ]
    both = [(i, j) for i, j in bonds] + [(j, i) for i, j in bonds]
    edge_index = torch.tensor(both, dtype=torch.long).reshape(-1, 2).t().contiguous()  # (2, E)
    symbols = [a.GetSymbol() for a in mol.GetAtoms()]
    return MolGraph(atom_features(mol), shortest_paths(mol), edge_index, symbols)
