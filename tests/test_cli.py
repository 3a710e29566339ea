"""The ``attnlab`` command line end to end, on a tiny budget of real data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from attnlab.cli import main
from attnlab.tasks import TASKS

MIRROR = os.environ.get("ATTNLAB_DATA") or str(Path(__file__).resolve().parents[2] / "shared/data")
needs_data = pytest.mark.skipif(
    not (Path(MIRROR) / "ud/en_atis-ud-train.conllu").is_file(),
    reason="needs the dataset mirror (set ATTNLAB_DATA)",
)

TINY = [
    "--task_options.corpus=ud-atis", "--task_options.max_train_sentences=300",
    "--train.epochs=4", "--train.batch_size=32", "--train.lr=5e-3", "--model.input.dim=32",
    "--model.encoder.depth=1", "--model.encoder.heads=2", "--model.encoder.ff_hidden=64",
]  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    os.environ.setdefault("ATTNLAB_DATA", MIRROR)
    out = tmp_path_factory.mktemp("cli") / "pos"
    if not (Path(MIRROR) / "ud/en_atis-ud-train.conllu").is_file():
        pytest.skip("needs the dataset mirror (set ATTNLAB_DATA)")
    assert main(["train", "pos", *TINY, f"--out_dir={out}"]) == 0
    return out


@needs_data
def test_train_writes_config_metrics_and_checkpoints(run_dir):
    for name in ("config.json", "metrics.csv", "metrics.json", "best.pt", "last.pt"):
        assert (run_dir / name).is_file(), name
    cfg = json.loads((run_dir / "config.json").read_text())
    assert cfg["task"] == "pos" and cfg["model"]["encoder"]["heads"] == 2
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert 0.5 < metrics["test"]["accuracy"] <= 1.0  # well above the majority tag (about 0.25)


@needs_data
def test_predict_text_json_and_stdin(run_dir, capsys, monkeypatch):
    assert main(["predict", str(run_dir), "I saw a saw ."]) == 0
    line = capsys.readouterr().out.strip()
    assert [p.rsplit("/", 1)[0] for p in line.split()] == ["I", "saw", "a", "saw", "."]
    assert main(["predict", str(run_dir), "--json", "show me flights"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["tokens"] == ["show", "me", "flights"] and len(obj["tags"]) == 3
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("list flights\nto boston\n"))
    assert main(["predict", str(run_dir), "-"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 2


@needs_data
def test_eval_on_a_conllu_file_and_on_a_split(run_dir, capsys):
    assert main(["eval", str(run_dir), "--data", f"{MIRROR}/ud/en_atis-ud-dev.conllu"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out.split(": ", 1)[1])["tokens"] == 6644.0
    assert main(["eval", str(run_dir / "best.pt")]) == 0
    assert "pos test split" in capsys.readouterr().out


@needs_data
def test_show_writes_a_png(run_dir, tmp_path):
    png = tmp_path / "saw.png"
    assert main(["show", str(run_dir), "I", "saw", "a", "saw", ".", "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_task_and_option_list_the_valid_ones(capsys):
    assert main(["train", "nosuchtask"]) == 2
    assert "valid choices" in capsys.readouterr().err
    assert main(["train", "pos", "--train.nosuchoption=3"]) == 2
    err = capsys.readouterr().err
    assert "nosuchoption" in err and "lr" in err


def test_tasks_lists_the_registry(capsys):
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    for name in TASKS.names():
        assert name in out


def test_attention_alias_and_space_separated_values():
    from attnlab.commands import normalize_overrides

    assert normalize_overrides(["--attention.kernel", "performer", "--train.lr=1e-3"]) == [
        "--model.encoder.kernel=performer",
        "--train.lr=1e-3",
    ]
    with pytest.raises(ValueError, match="expected an option"):
        normalize_overrides(["stray"])
