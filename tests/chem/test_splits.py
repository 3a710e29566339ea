"""Random and scaffold splits; Morgan fingerprints."""

from __future__ import annotations

import pytest

from attnlab.lab.chem import (
    mol_from_smiles,
    morgan_fingerprints,
    random_split,
    read_csv,
    scaffold,
    scaffold_split,
)


def test_scaffold_of_known_molecules():
    assert scaffold(mol_from_smiles("CC(=O)Oc1ccccc1C(=O)O")) == "c1ccccc1"
    assert scaffold(mol_from_smiles("CCCO")) == ""
    assert scaffold(mol_from_smiles("Cc1ccc(cc1)C1CCCCC1")) == "c1ccc(C2CCCCC2)cc1"


def test_random_split_partitions_and_is_seeded():
    a = random_split(50, seed=3)
    assert sorted(a[0] + a[1] + a[2]) == list(range(50))
    assert (len(a[0]), len(a[1]), len(a[2])) == (40, 5, 5)
    assert a == random_split(50, seed=3) and a != random_split(50, seed=4)


def test_fractions_checked():
    with pytest.raises(ValueError, match="sum of 1"):
        random_split(10, (0.5, 0.1, 0.1))


def test_scaffold_split_never_shares_a_scaffold(data_mirror):
    mols = [r.mol for r in read_csv(data_mirror / "molecules/freesolv.csv",
                                    target_column="expt").records]  # fmt: skip
    train, dev, test = scaffold_split(mols)
    assert sorted(train + dev + test) == list(range(len(mols)))
    sides = [{scaffold(mols[i]) for i in part} for part in (train, dev, test)]
    assert not (sides[0] & sides[1] or sides[0] & sides[2] or sides[1] & sides[2])
    assert len(train) <= 0.8 * len(mols) and len(test) > 0.05 * len(mols)


def test_morgan_fingerprints():
    fp = morgan_fingerprints([mol_from_smiles("CCO"), mol_from_smiles("CCO")], bits=512)
    assert fp.shape == (2, 512) and set(fp.ravel().tolist()) <= {0.0, 1.0}
    assert (fp[0] == fp[1]).all() and fp[0].sum() > 0
