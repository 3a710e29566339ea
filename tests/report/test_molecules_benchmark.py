"""``benchmarks/molecules.py``: its attention runs are ``attnlab report`` jobs with claim 13's
structure options, trained once and read back; its baselines get the run's own splits."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from attnlab.lab.report import execute
from attnlab.lab.report.claims import MoleculeBonds
from attnlab.lab.report.jobs import Job, job_dir
from attnlab.lab.tasks import TASKS
from attnlab.lab.train.config import resolve_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import molecules  # noqa: E402

#: the script's defaults
ARGS = argparse.Namespace(dim=64, depth=3, heads=4, dropout=0.1, pooling="attention", epochs=60,
                          lr=1e-3, batch_size=32, weight_decay=0.01, warmup=0.05, patience=0)  # fmt: skip


@pytest.mark.parametrize("structure", molecules.STRUCTURES)
def test_a_job_trains_what_the_script_trained_with_claim_13s_options(structure):
    before = ["--model.dim=64", "--model.ff_hidden=128", "--model.depth=3", "--model.heads=4",
              "--model.dropout=0.1", "--model.pooling=attention", "--train.epochs=60",
              "--train.lr=0.001", "--train.batch_size=32", "--train.weight_decay=0.01",
              "--train.warmup_fraction=0.05", "--train.patience=0", "--train.device=cpu",
              "--train.log_every=0", "--task_options.seed=3", "--task_options.split=scaffold",
              f"--model.structure={structure}"]  # fmt: skip
    job = molecules.attention_job("freesolv", structure, "scaffold", 3, ARGS)
    assert job.key == Job("freesolv", tuple(before), 3).key  # the key covers the resolved config
    assert set(MoleculeBonds.STRUCTURES[structure][1]) <= set(job.options)


def test_a_finished_job_is_read_back_and_its_task_has_the_runs_splits(
    data_mirror, tmp_path, monkeypatch
):
    monkeypatch.setenv("ATTNLAB_DATA", str(data_mirror))  # FreeSolv
    argv = ["--splits", "random", "--seeds", "1", "--structures", "none", "--dim", "16",
            "--depth", "1", "--heads", "2", "--epochs", "1", "--no-baselines",
            "--out", str(tmp_path)]  # fmt: skip
    assert molecules.main(argv) == 0
    first = json.loads((tmp_path / "results.json").read_text())["runs"]
    monkeypatch.setattr(execute, "run_one", lambda *a: pytest.fail("a finished job ran again"))
    assert molecules.main(argv) == 0
    assert json.loads((tmp_path / "results.json").read_text())["runs"] == first
    (record,) = first
    assert record["model"] == "none" and record["test"]["rmse"] > 0

    args = argparse.Namespace(**{**vars(ARGS), "dim": 16, "depth": 1, "heads": 2, "epochs": 1})
    job = molecules.attention_job("freesolv", "none", "random", 1, args)
    assert record["command"] == job.command()
    task = molecules.task_of(job_dir(tmp_path, job))
    fresh = TASKS.get("freesolv")()
    fresh.setup(resolve_config(task="freesolv", overrides=list(job.options)).task_options)
    for split in ("train", "dev", "test"):  # seed 1's random split, as the run had it
        assert [e.smiles for e in task.splits()[split]] == [e.smiles for e in fresh.splits()[split]]
    assert len(task.splits()["test"]) == record["test"]["reference_count"]
