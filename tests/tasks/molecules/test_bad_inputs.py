"""``predict`` and ``show`` of a molecule run on SMILES that RDKit reads differently from what
was meant, or that lie outside what the model was trained on (issue 32: ``"CC O"`` was
predicted as ``"CC"``, salts and unknown elements silently)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnlab.lab.cli import main

SMILES = ["C", "CC", "CCC", "CCCC", "CO", "CCO", "CCCO", "CC(C)O", "c1ccccc1", "Cc1ccccc1",
          "Oc1ccccc1", "CC(=O)O", "CC(=O)C", "CN", "CCN", "ClC", "ClCC", "OCCO", "CCOCC", "C=C"]  # fmt: skip
TINY = ["--model.dim=16", "--model.depth=1", "--model.heads=2", "--model.dropout=0.0",
        "--train.epochs=2", "--train.batch_size=8", "--train.device=cpu", "--train.log_every=0"]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory, no_mirror) -> Path:
    root = tmp_path_factory.mktemp("freesolv-bad")
    rows = ["smiles,expt"] + [f"{s},{-0.2 * len(s) + 0.1 * i:.3f}" for i, s in enumerate(SMILES)]
    (root / "tiny.csv").write_text("\n".join(rows) + "\n")
    out = root / "run"
    assert main(["train", "freesolv", f"--task_options.file={root / 'tiny.csv'}", *TINY,
                 f"--out_dir={out}"]) == 0  # fmt: skip
    return out


def predict(cli, run, *args):
    ran = cli("predict", run, "--json", *args)
    assert ran.rc == 0, ran.err
    return ran, [json.loads(line) for line in ran.out.splitlines()]


BAD = {
    "CC O": ["SMILES 'CC O' holds a space at character 2", "name"],
    "C C": ["SMILES 'C C' holds a space at character 1"],
    "C1CC(": ["SMILES 'C1CC(' does not parse"],
    "[Na+].[Cl-]": ["2 disconnected fragments", "'[Na+]', '[Cl-]'", "--fragments largest"],
    "CCO.O": ["2 disconnected fragments", "--fragments whole"],
    "": ["SMILES '' is empty"],
}


@pytest.mark.parametrize("smiles", list(BAD))
def test_predict_refuses(run, cli, smiles):
    cli("predict", run, smiles).user_error("predict", *BAD[smiles])


@pytest.mark.parametrize("smiles", ["CC O", "[Na+].[Cl-]"])
def test_show_refuses_and_writes_nothing(run, cli, tmp_path, smiles):
    out = tmp_path / "mol.png"
    cli("show", run, smiles, "--out", out).user_error("show", *BAD[smiles][:1])
    assert not out.exists()


def test_fragments_largest_predicts_the_parent_and_says_what_was_dropped(run, cli):
    ran, [salt] = predict(cli, run, "CCO.O", "--fragments", "largest")
    _, [alone] = predict(cli, run, "CCO")
    assert salt["hydration_free_energy"] == alone["hydration_free_energy"]
    [warning] = ran.warnings()
    assert (
        "SMILES 'CCO.O' has 2 fragments: predicting for the largest, 'CCO'; dropped 'O'" in warning
    )


def test_fragments_whole_predicts_all_parts_as_one_graph(run, cli):
    ran, [whole] = predict(cli, run, "--fragments", "whole", "CCO.O")
    _, [alone] = predict(cli, run, "CCO")
    assert whole["hydration_free_energy"] != alone["hydration_free_energy"]
    assert ran.warnings() == []


@pytest.mark.parametrize(("smiles", "atom"), [("[He]", "atom 0 (He): element=He"),
                                              ("C[Se]C", "atom 1 (Se): element=Se")])  # fmt: skip
def test_atoms_outside_the_vocabulary_are_predicted_with_a_warning(run, cli, smiles, atom):
    ran, [record] = predict(cli, run, smiles)
    assert record["smiles"] == smiles
    [warning] = ran.warnings()
    assert atom in warning and "outside the atom vocabulary" in warning and "'other'" in warning


def test_a_known_molecule_gets_no_warning(run, cli):
    ran, _ = predict(cli, run, "CCO", "c1ccccc1O")
    assert ran.warnings() == []


def test_in_a_terminal_a_warning_is_one_line_naming_the_command(run):
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "attnlab", "predict", str(run), "[He]"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[He]\t")
    assert done.stderr.splitlines() == [
        "attnlab predict: warning: SMILES '[He]': atom 0 (He): element=He: outside the atom "
        "vocabulary (attnlab.lab.chem.ATOM_FEATURES), read as 'other'"
    ]


def test_explicit_hydrogens_and_charges_in_the_vocabulary_give_no_warning():
    from attnlab.lab.chem import mol_from_smiles, outside_vocabulary

    assert outside_vocabulary(mol_from_smiles("CO", explicit_h=True)) == []  # H: UNSPECIFIED
    assert outside_vocabulary(mol_from_smiles("C[N+](C)(C)C")) == []
    assert outside_vocabulary(mol_from_smiles("[O-2]")) == ["atom 0 (O): charge=-2"]
