"""``freesolv`` and ``solubility`` end to end on tiny local files: train, eval, predict, show;
their options and bad inputs. The registered datasets are read in ``test_mirror_tasks``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from attnlab.lab.cli import main
from attnlab.lab.tasks import TASKS
from attnlab.lab.tasks.molecules import FreeSolvTask, SolubilityTask

PNG = b"\x89PNG\r\n\x1a\n"
#: 20 small molecules with made-up hydration energies (expt) and a "physics" calc
SMILES = ["C", "CC", "CCC", "CCCC", "CO", "CCO", "CCCO", "CC(C)O", "c1ccccc1", "Cc1ccccc1",
          "Oc1ccccc1", "CC(=O)O", "CC(=O)C", "CN", "CCN", "ClC", "ClCC", "OCCO", "CCOCC", "C=C"]  # fmt: skip
TINY = [
    "--model.dim=16", "--model.depth=1", "--model.heads=2", "--model.dropout=0.0",
    "--train.epochs=3", "--train.batch_size=8", "--train.device=cpu", "--train.log_every=0",
]  # fmt: skip


def write_csv(path: Path, bad: str = "") -> Path:
    rows = ["smiles,expt,calc"]
    for i, s in enumerate(SMILES):
        expt = -0.5 * s.count("O") - 0.2 * len(s) + 0.1 * i
        rows.append(f"{s},{expt:.3f},{expt + 0.3:.3f}")
    if bad:
        rows.append(f"{bad},-1.0,-1.0")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory, no_mirror) -> Path:
    root = tmp_path_factory.mktemp("freesolv")
    data = write_csv(root / "tiny.csv")
    out = root / "run"
    assert main(["train", "freesolv", f"--task_options.file={data}", *TINY,
                 "--model.structure=spd", f"--out_dir={out}"]) == 0  # fmt: skip
    return out


def test_registered():
    assert TASKS.get("freesolv") is FreeSolvTask and TASKS.get("solubility") is SolubilityTask


def test_train_reports_rmse_and_calc_on_the_same_molecules(run):
    metrics = json.loads((run / "metrics.json").read_text())
    test = metrics["test"]
    assert math.isfinite(test["rmse"]) and test["reference_count"] == 2.0  # 10% of 20
    assert test["reference_rmse"] == pytest.approx(0.3, abs=1e-5)  # calc = expt + 0.3


def test_predict_prints_the_property(run, capsys):
    assert main(["predict", str(run / "best.pt"), "CCO", "c1ccccc1O"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["CCO", "c1ccccc1O"]
    assert all(line.endswith("kcal/mol") for line in lines)
    assert main(["predict", str(run / "best.pt"), "CCO", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["smiles"] == "CCO" and isinstance(record["hydration_free_energy"], float)


def test_predict_bad_smiles_names_it(run, capsys):
    assert main(["predict", str(run / "best.pt"), "C1CC("]) != 0
    err = capsys.readouterr().err
    assert "SMILES 'C1CC(' does not parse" in err and "Parse Error" in err


@pytest.mark.parametrize(
    "flags", [[], ["--shade-layer", "1", "--shade-head", "2"], ["--layer", "1"]]
)
def test_show_draws_a_png(run, tmp_path, flags):
    out = tmp_path / "aspirin.png"
    assert main(["show", str(run / "best.pt"), "CC(=O)Oc1ccccc1C(=O)O", "--out", str(out),
                 *flags]) == 0  # fmt: skip
    assert out.read_bytes()[:8] == PNG


def test_show_bad_layer(run, tmp_path, capsys):
    assert main(["show", str(run / "best.pt"), "CCO", "--out", str(tmp_path / "x.png"),
                 "--shade-layer", "5"]) != 0  # fmt: skip
    assert "--shade-layer: expected a layer from 1 to 1, got 5" in capsys.readouterr().err


def test_eval_on_a_file(run, tmp_path, capsys):
    data = write_csv(tmp_path / "eval.csv")
    assert main(["eval", str(run / "best.pt"), "--data", str(data)]) == 0
    assert '"rmse"' in capsys.readouterr().out


def test_bad_record_stops_setup_unless_skipped(tmp_path):
    data = write_csv(tmp_path / "bad.csv", bad="C1CC(")
    task = FreeSolvTask()
    with pytest.raises(ValueError, match=r"record 21 .*C1CC\(.*skip_invalid"):
        task.setup({"file": str(data)})
    with pytest.warns(UserWarning, match="skipped 1 invalid record"):
        task.setup({"file": str(data), "skip_invalid": True})
    assert sum(len(v) for v in task.splits().values()) == 20


def test_scaffold_split_option_and_bad_split(tmp_path):
    data = write_csv(tmp_path / "m.csv")
    task = FreeSolvTask()
    task.setup({"file": str(data), "split": "scaffold"})
    assert sum(len(v) for v in task.splits().values()) == 20
    with pytest.raises(ValueError, match="task_options.split: expected 'random' or 'scaffold'"):
        FreeSolvTask().setup({"file": str(data), "split": "time"})


def test_explicit_h_mismatch_with_checkpoint(tmp_path):
    data = write_csv(tmp_path / "m.csv")
    task = FreeSolvTask()
    task.setup({"file": str(data), "explicit_h": True})
    state = task.state_dict()
    again = FreeSolvTask()
    again.load_state_dict(state)
    assert again.parse_input("CO").example.graph.num_atoms == 6  # hydrogens as trained
    with pytest.raises(ValueError, match="explicit_h=False, but the model was trained"):
        again.setup({"file": str(data)})


def test_show_title_gives_the_prediction(run, tmp_path, capsys, monkeypatch):
    """The molecule's picture says what the model predicts, in the property's units."""
    from matplotlib.figure import Figure

    figures: list[Figure] = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: figures.append(self))
    assert main(["predict", str(run / "best.pt"), "CCO", "--json"]) == 0
    value = json.loads(capsys.readouterr().out)["hydration_free_energy"]
    assert main(["show", str(run / "best.pt"), "CCO", "--out", str(tmp_path / "x.png")]) == 0
    title = figures[-1]._suptitle.get_text()
    assert title.startswith("freesolv: CCO\npredicted hydration_free_energy: ")
    assert title.endswith(" kcal/mol")
    assert float(title.split(": ")[-1].split()[0]) == pytest.approx(value, abs=0.006)
