"""The featuriser on known molecules: atom counts, one-hot positions, distances, vocabulary."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.chem import (
    ATOM_FEATURES,
    NUM_ATOM_FEATURES,
    UNREACHABLE,
    atom_feature_names,
    atom_features,
    featurise,
    mol_from_smiles,
    shortest_paths,
)

NAMES = atom_feature_names()


def hot(features: torch.Tensor, atom: int) -> set[str]:
    """The names of the slots set for one atom."""
    return {NAMES[k] for k in torch.nonzero(features[atom]).flatten().tolist()}


def test_vocabulary_size_and_names():
    assert NUM_ATOM_FEATURES == 39 == len(NAMES)
    assert NAMES[0] == "element=H" and NAMES[-2:] == ["aromatic", "in_ring"]
    for block, vocab in ATOM_FEATURES.items():
        assert f"{block}=other" in NAMES and len(vocab) >= 3


@pytest.mark.parametrize(
    ("smiles", "heavy", "with_h"),
    [("CCO", 3, 9), ("c1ccccc1", 6, 12), ("CC(=O)Oc1ccccc1C(=O)O", 13, 21), ("[Na+].[Cl-]", 2, 2)],
)
def test_atom_counts_with_and_without_explicit_h(smiles, heavy, with_h):
    mol = mol_from_smiles(smiles)
    assert featurise(mol).features.shape == (heavy, NUM_ATOM_FEATURES)
    assert featurise(mol, explicit_h=True).num_atoms == with_h
    assert mol_from_smiles(smiles, explicit_h=True).GetNumAtoms() == with_h


def test_ethanol_one_hot_positions():
    x = atom_features(mol_from_smiles("CCO"))
    assert torch.equal(x.sum(1), torch.full((3,), 5.0))  # 5 blocks, flags off
    assert hot(x, 0) == {"element=C", "degree=1", "charge=0", "hydrogens=3", "hybridisation=SP3"}
    assert hot(x, 1) == {"element=C", "degree=2", "charge=0", "hydrogens=2", "hybridisation=SP3"}
    assert hot(x, 2) == {"element=O", "degree=1", "charge=0", "hydrogens=1", "hybridisation=SP3"}


def test_aromatic_ring_flags_and_charges():
    x = atom_features(mol_from_smiles("c1ccccc1[N+](=O)[O-]"))
    assert hot(x, 0) >= {"element=C", "hybridisation=SP2", "aromatic", "in_ring", "hydrogens=1"}
    assert hot(x, 6) >= {"element=N", "charge=1", "degree=3"} and "in_ring" not in hot(x, 6)
    assert "charge=-1" in hot(x, 8)


def test_other_bucket_for_unknown_values():
    x = atom_features(mol_from_smiles("C[Sn](C)(C)C"))  # tin: not in the element vocabulary
    assert hot(x, 1) >= {"element=other", "degree=4"}
    x = atom_features(mol_from_smiles("[Ca+2]"))
    assert {"element=other", "charge=other", "degree=0"} <= hot(x, 0)


def test_explicit_h_keeps_heavy_atom_hydrogen_count():
    g = featurise(mol_from_smiles("CO"), explicit_h=True)
    assert g.symbols == ["C", "O", "H", "H", "H", "H"]
    assert "hydrogens=3" in hot(g.features, 0) and "degree=4" in hot(g.features, 0)
    assert "element=H" in hot(g.features, 2)


def test_distances_bonds_and_fragments():
    d = shortest_paths(mol_from_smiles("CCCO"))
    expected = torch.tensor([[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]])
    assert torch.equal(d, expected)
    ring = shortest_paths(mol_from_smiles("c1ccccc1"))
    assert ring.max() == 3 and torch.equal(ring, ring.T)
    salt = shortest_paths(mol_from_smiles("[Na+].[Cl-]"))
    assert torch.equal(salt, torch.tensor([[0, UNREACHABLE], [UNREACHABLE, 0]]))


def test_edge_index_is_both_directions_of_each_bond():
    g = featurise(mol_from_smiles("CC(=O)O"))
    edges = set(map(tuple, g.edge_index.t().tolist()))
    assert edges == {(0, 1), (1, 0), (1, 2), (2, 1), (1, 3), (3, 1)}
    assert edges == set(map(tuple, (g.distances == 1).nonzero().tolist()))  # bonds: distance 1
