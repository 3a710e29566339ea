"""``--train.tensorboard=true``: event files whose scalars are the run's own numbers (the dev
metrics of ``metrics.csv``, the test metrics of ``metrics.json``), kept consistent over
``--resume`` and ``--overwrite``, and a clear error without the package."""

from __future__ import annotations

import builtins

import pytest

from attnlab.lab.train.metrics_log import read_metrics_csv

from .helpers import Crash, CrashingToy, run
from .toy_task import ToyTask

pytest.importorskip("tensorboard", reason="the optional extra attnlab[tensorboard] is absent")


def read_scalars(run_dir) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the run's event files, as ``{tag: [(step, value), ...]}`` in step order
    (purged events left out, as TensorBoard shows them)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), purge_orphaned_data=True)
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_the_events_hold_the_dev_and_test_metrics_of_the_run(tmp_path):
    result = run(tmp_path, "--train.tensorboard=true", "--train.log_every=2")
    scalars = read_scalars(tmp_path)
    rows = read_metrics_csv(tmp_path / "metrics.csv")
    assert len(rows) == 3  # an evaluation per epoch
    for metric in ("accuracy", "loss"):
        expected = [(int(r["step"]), pytest.approx(r[f"dev_{metric}"], rel=1e-5)) for r in rows]
        assert scalars[f"dev/{metric}"] == expected
    assert [v for _, v in scalars["dev/train_loss"]] == pytest.approx(
        [r["train_loss"] for r in rows], rel=1e-5
    )
    last = int(rows[-1]["step"])
    assert scalars["test/accuracy"] == [(last, pytest.approx(result.test["accuracy"], rel=1e-5))]
    steps = [step for step, _ in scalars["train/loss"]]
    assert steps == list(range(2, last + 1, 2))  # every log_every steps
    assert {"train/lr", f"train/{ToyTask().unit}_per_s"} <= set(scalars)


def test_resume_purges_the_events_of_the_segment_that_was_cut_short(tmp_path):
    with pytest.raises(Crash):  # in epoch 3: steps 13-14 are lost
        run(tmp_path, "--train.tensorboard=true", "--train.log_every=1", task=CrashingToy(15))
    assert not (tmp_path / "metrics.json").exists()  # the run did not finish
    before = read_scalars(tmp_path)["train/loss"]
    run(tmp_path, "--train.tensorboard=true", "--train.log_every=1", resume=True)
    scalars = read_scalars(tmp_path)
    steps = [step for step, _ in scalars["train/loss"]]
    assert steps == sorted(set(steps)), "a step logged twice: the lost segment was not purged"
    assert before[-1][0] == 14  # logged, then lost: last.pt holds step 12
    rows = read_metrics_csv(tmp_path / "metrics.csv")
    assert [s for s, _ in scalars["dev/accuracy"]] == [int(r["step"]) for r in rows]


def test_overwrite_starts_the_curves_afresh(tmp_path):
    run(tmp_path, "--train.tensorboard=true")
    run(tmp_path, "--train.tensorboard=true", "--train.overwrite=true", "--train.epochs=1")
    scalars = read_scalars(tmp_path)
    assert len(scalars["dev/accuracy"]) == 1  # the first run's three evaluations are gone


def test_a_new_run_never_shows_the_curves_of_a_folder_left_behind(tmp_path):
    run(tmp_path, "--train.tensorboard=true")
    for name in ("best.pt", "last.pt", "metrics.json", "metrics.csv", "config.json"):
        (tmp_path / name).unlink()  # the run deleted by hand, its tensorboard/ left
    run(tmp_path, "--train.tensorboard=true", "--train.epochs=1")
    assert len(read_scalars(tmp_path)["dev/accuracy"]) == 1


def test_without_the_package_the_run_fails_before_it_starts_naming_the_extra(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name == "tensorboard" or name.startswith("tensorboard."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(ImportError, match=r"attnlab\[tensorboard\]"):
        run(tmp_path / "run", "--train.tensorboard=true")
    assert not (tmp_path / "run").exists()  # nothing written


def test_off_by_default(tmp_path):
    run(tmp_path)
    assert not (tmp_path / "tensorboard").exists()
