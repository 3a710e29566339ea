"""One's own molecules, no code (issue 37): ``molecule-property`` reads a CSV of SMILES and
targets (a regression or a classification, ``--data.kind=auto`` deciding from train), and
``freesolv`` / ``solubility`` take ``--data.*``; dev and test cut by a seed or by scaffold and
kept in the run; invalid SMILES refused naming file, row and RDKit's reason, or skipped and
listed; train -> eval -> predict -> show from the run alone; a bad file is one line naming it,
and nothing is written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from attnlab.lab.chem import scaffold
from attnlab.lab.tasks.molecules.files import (
    MoleculeDataOptions,
    cut_molecules,
    read_molecules,
    resolve_kind,
)
from attnlab.lab.tasks.molecules.tasks import FreeSolvOptions, FreeSolvTask

TINY = ["--model.dim=16", "--model.depth=1", "--model.heads=2", "--model.ff_hidden=32",
        "--train.max_steps=3", "--train.eval_every=3", "--train.batch_size=8",
        "--train.device=cpu", "--train.log_every=0"]  # fmt: skip
RINGS = ["", "c1ccccc1", "C1CCCCC1", "c1ccncc1"]


def molecules(n: int = 40) -> list[tuple[str, float]]:
    """``n`` distinct SMILES (chains on a few ring systems) and a made-up additive value."""
    out = []
    for i in range(n):
        ring, chain = RINGS[i % 4], "C" * (1 + i // 4)
        tail = "O" if i % 3 == 0 else "N" if i % 3 == 1 else ""
        out.append((ring + chain + tail, round(-0.5 * len(chain) + (1.5 if tail else 0.0)
                                               - 0.1 * (i % 4), 3)))  # fmt: skip
    return out


def write_csv(path: Path, rows: list[tuple], header: tuple[str, ...] = ("smi", "y")) -> Path:
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_auto_is_a_regression_only_for_many_distinct_numbers():
    assert resolve_kind("auto", [str(i / 3) for i in range(11)]) == "regression"
    assert resolve_kind("auto", [str(i) for i in range(10)]) == "classification"  # 10 values
    assert resolve_kind("auto", ["0", "1", "1", "0"]) == "classification"
    assert resolve_kind("auto", ["a", *map(str, range(20))]) == "classification"
    assert resolve_kind("regression", ["0", "1"]) == "regression"


def test_the_scaffold_cut_keeps_each_ring_system_on_one_side(tmp_path):
    path = write_csv(tmp_path / "m.csv", molecules())
    options = MoleculeDataOptions(smiles_column="smi", target_column="y", split=(0.2, 0.2),
                                  split_by="scaffold")  # fmt: skip
    rows = read_molecules(str(path), options, "train", [])
    splits, sources = cut_molecules({"train": rows}, {"train": str(path)}, options)
    sides = {s: {scaffold(r.mol) for r in split} for s, split in splits.items()}
    assert sum(len(s) for s in splits.values()) == 40 and all(splits.values())
    assert not sides["train"] & sides["dev"] and not sides["train"] & sides["test"]
    assert sources["test"].startswith(f"cut from {path} by scaffold")


def test_molecule_regression_round_trip_from_the_run_alone(cli, tmp_path):
    data = write_csv(tmp_path / "mine.csv", molecules())
    run = tmp_path / "run"
    ran = cli("train", "molecule-property", f"--data.train={data}", "--data.smiles_column=smi",
              "--data.target_column=y", *TINY, f"--out_dir={run}")  # fmt: skip
    assert ran.rc == 0, ran.err
    manifest = json.loads((run / "data" / "splits.json").read_text())
    assert manifest["examples"] == {"train": 32, "dev": 4, "test": 4}
    assert json.loads((run / "metrics.json").read_text())["metric_name"] == "rmse"
    data.rename(tmp_path / "elsewhere.csv")  # the run must not need the original file

    ran = cli("eval", run, "--split", "test")
    assert ran.rc == 0 and ran.out.startswith('molecule-property test split: {"rmse"'), ran.err
    ran = cli("predict", run, "CCO", "--index", "1", "--json")
    assert ran.rc == 0, ran.err
    records = [json.loads(line) for line in ran.out.splitlines()]
    assert isinstance(records[-1]["value"], float) and records[-1]["smiles"] == "CCO"
    ran = cli("show", run, "CCCO", "--out", tmp_path / "m.png")
    assert ran.rc == 0 and (tmp_path / "m.png").is_file(), ran.err


def test_molecule_classification_skips_and_lists_invalid_smiles(cli, tmp_path):
    rows = [(s, "soluble" if y > -2 else "insoluble") for s, y in molecules(30)]
    data = write_csv(tmp_path / "c.csv", [*rows[:5], ("C1CC", "soluble"), *rows[5:]])
    run = tmp_path / "run"
    ran = cli("train", "molecule-property", f"--data.train={data}", "--data.smiles_column=smi",
              "--data.target_column=y", "--data.skip_invalid=true", *TINY, f"--out_dir={run}")  # fmt: skip
    assert ran.rc == 0, ran.err
    assert any("skipped 1 invalid SMILES" in w for w in ran.warnings())
    skipped = list(csv.reader((run / "data" / "skipped.csv").open()))
    assert skipped[0] == ["file", "row", "smiles", "reason"]
    assert skipped[1][1:3] == ["6", "C1CC"] and "unclosed ring" in skipped[1][3]
    assert json.loads((run / "metrics.json").read_text())["metric_name"] == "accuracy"
    data.unlink()
    ran = cli("predict", run, "CCO", "--json")
    assert ran.rc == 0, ran.err
    assert set(json.loads(ran.out)["probabilities"]) == {"insoluble", "soluble"}
    ran = cli("show", run, "--index", "0", "--out", tmp_path / "c.png")
    assert ran.rc == 0 and (tmp_path / "c.png").is_file(), ran.err


def test_freesolv_reads_its_own_layout_with_data_options(tmp_path):
    rows = [(f"m{i}", s, y) for i, (s, y) in enumerate(molecules(20))]
    train = write_csv(tmp_path / "train.csv", rows[:14], ("iupac", "smiles", "expt"))
    dev = write_csv(tmp_path / "dev.csv", rows[14:17], ("iupac", "smiles", "expt"))
    test = write_csv(tmp_path / "test.csv", rows[17:], ("iupac", "smiles", "expt"))
    task = FreeSolvTask()
    task.setup(FreeSolvOptions(data=MoleculeDataOptions(train=str(train), dev=str(dev),
                                                        test=str(test), target_column="expt")))  # fmt: skip
    assert [len(task.splits()[s]) for s in ("train", "dev", "test")] == [14, 3, 3]
    assert task.kind == "regression" and task.splits()["test"][0].target == rows[17][2]
    assert task.metric_name == "rmse" and task.mean is not None


@pytest.mark.parametrize(
    ("files", "options", "fragments"),
    [
        ({"train": "good.csv"}, ["--data.target_column=logS"],
         ["good.csv: no column 'logS' (the header has smi, y)"]),
        ({"train": "bad.csv"}, [],
         ["bad.csv: row 3 (line 4): SMILES 'C(C' does not parse", "--data.skip_invalid=true"]),
        ({"train": "empty.csv"}, [], ["empty.csv: row 2 (line 3): empty 'y'"]),
        ({"train": "labels.csv", "test": "unseen.csv"}, [],
         ["unseen.csv: row 1 (line 2): label 'purple' of the test split is not one of the labels"]),
        ({"train": "labels.csv"}, ["--data.kind=regression"],
         ["labels.csv: row 1 (line 2): 'y': expected a number (the task is a regression)"]),
        ({}, [], ["'molecule-property' trains on your own molecules: give --data.train"]),
    ],
)  # fmt: skip
def test_bad_molecule_files_are_one_line_and_nothing_is_written(
    cli, tmp_path, files, options, fragments
):
    good = molecules(12)
    write_csv(tmp_path / "good.csv", good)
    write_csv(tmp_path / "bad.csv", [*good[:2], ("C(C", 1.0), *good[2:]])
    write_csv(tmp_path / "empty.csv", [good[0], (good[1][0], ""), *good[2:]])
    write_csv(tmp_path / "labels.csv", [(s, "red" if i % 2 else "blue") for i, (s, _) in
                                        enumerate(good)])  # fmt: skip
    write_csv(tmp_path / "unseen.csv", [("CCO", "purple")])
    given = [f"--data.{split}={tmp_path / name}" for split, name in files.items()]
    run = tmp_path / "run"
    cli("train", "molecule-property", *given, "--data.smiles_column=smi",
        "--data.target_column=y", *options, *TINY, f"--out_dir={run}").user_error(
        "train", *fragments
    )  # fmt: skip
    assert not run.exists()
