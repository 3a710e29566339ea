"""``solubility`` on tiny SDF files (the SMILES field named in different case per file) and,
with the mirror, on the registered dataset's counts."""

from __future__ import annotations

from pathlib import Path

import pytest
from rdkit import Chem

from attnlab.lab.tasks.molecules import SolubilityTask

SMILES = ["CCCC", "CCO", "c1ccccc1", "Oc1ccccc1", "CC(=O)O", "CCN", "ClCCl", "CCCCCC", "OCCO",
          "CCOC(C)=O", "Cc1ccccc1", "CC(C)C"]  # fmt: skip


def write_sdf(path: Path, smiles: list[str], smiles_field: str) -> Path:
    with Chem.SDWriter(str(path)) as writer:
        for i, s in enumerate(smiles):
            mol = Chem.MolFromSmiles(s)
            mol.SetProp("SOL", f"{-0.3 * len(s) + 0.1 * i:.2f}")
            mol.SetProp(smiles_field, s)
            writer.write(mol)
    return path


def test_local_files_and_dev_fraction(tmp_path):
    train = write_sdf(tmp_path / "train.sdf", SMILES[:10], "smiles")
    test = write_sdf(tmp_path / "test.sdf", SMILES[10:], "SMILES")
    task = SolubilityTask()
    task.setup({"train_file": str(train), "test_file": str(test), "dev_fraction": 0.2})
    splits = task.splits()
    assert [len(splits[k]) for k in ("train", "dev", "test")] == [8, 2, 2]
    assert [e.smiles for e in splits["test"]] == SMILES[10:]
    assert task.read_examples(test)[0].target == pytest.approx(-0.3 * 9)  # Cc1ccccc1, first


def test_bad_dev_fraction(tmp_path):
    with pytest.raises(ValueError, match=r"dev_fraction: expected a number in \[0, 1\), got 1.5"):
        SolubilityTask().setup({"dev_fraction": 1.5})


def test_mirror_datasets(data_mirror, monkeypatch):
    monkeypatch.setenv("ATTNLAB_DATA", str(data_mirror))
    task = SolubilityTask()
    task.setup({})
    sizes = {k: len(v) for k, v in task.splits().items()}
    assert sizes == {"train": 1025 - 102, "dev": 102, "test": 257}
    from attnlab.lab.tasks.molecules import FreeSolvTask

    free = FreeSolvTask()
    free.setup({"split": "scaffold"})
    assert sum(len(v) for v in free.splits().values()) == 642
