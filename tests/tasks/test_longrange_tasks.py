"""``listops``, ``recall`` and ``positions`` as tasks: registered, tiny versions train through
the command line, learn what they can in a few seconds, and predict."""

from __future__ import annotations

import json

import pytest

from attnlab.lab.cli import main
from attnlab.lab.tasks import TASKS

TINY_MODEL = [
    "--model.input.dim=32", "--model.encoder.depth=1", "--model.encoder.heads=2",
    "--model.encoder.ff_hidden=64",
]  # fmt: skip
TRAIN = ["--train.device=cpu", "--train.log_every=0", "--train.batch_size=16"]
LISTOPS = [
    "--task_options.train=48", "--task_options.dev=8", "--task_options.test=8",
    "--task_options.max_depth=4", "--task_options.max_args=4",
    "--task_options.min_length=10", "--task_options.max_length=40",
]  # fmt: skip


@pytest.mark.parametrize("name", ["listops", "recall", "positions"])
def test_registered_with_the_alphabet_as_vocabulary(name):
    task = TASKS.get(name)()
    model = task.build_model(task.default_model_config())  # no data needed for the vocabulary
    assert task.labels == list("0123456789")
    assert len(task.vocab) == 2 + len(task.alphabet)  # <pad>, <unk> and the alphabet
    assert sum(p.numel() for p in model.parameters()) > 0


@pytest.fixture(scope="module")
def listops_run(tmp_path_factory, no_mirror):
    out = tmp_path_factory.mktemp("listops") / "run"
    args = [
        "train",
        "listops",
        *LISTOPS,
        *TINY_MODEL,
        *TRAIN,
        "--train.epochs=1",
        f"--out_dir={out}",
    ]
    assert main(args) == 0
    return out


def test_listops_trains_from_its_cache_and_predicts_with_the_answer(listops_run, no_mirror, capsys):
    cfg = json.loads((listops_run / "config.json").read_text())
    assert cfg["task_options"]["max_length"] == 40
    assert list((no_mirror / "cache" / "listops").iterdir())  # written to ATTNLAB_CACHE
    capsys.readouterr()
    assert main(["predict", str(listops_run), "--json", "[MAX 2 9 [MIN 4 7 ] 0 ]"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["answer"] == "9" and record["label"] in list("0123456789")


def test_positions_learns_the_offset(tmp_path, capsys):
    """k=1 at length 8: a tiny rotary Transformer beats chance (10%) by far in a few seconds."""
    out = tmp_path / "run"
    args = [
        "train", "positions", "--task_options.train=400", "--task_options.dev=100",
        "--task_options.test=100", "--task_options.length=8", "--task_options.k=1",
        *TINY_MODEL, *TRAIN, "--train.epochs=6", "--train.lr=3e-3", f"--out_dir={out}",
    ]  # fmt: skip
    assert main(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["test"]["accuracy"] > 0.5


def test_positions_test_length_and_a_learned_table_beyond_it(tmp_path, capsys):
    """A learned position table cannot index beyond max_len: the error names the fix."""
    out = tmp_path / "run"
    args = [
        "train", "positions", "--task_options.train=32", "--task_options.dev=8",
        "--task_options.test=8", "--task_options.length=8", "--task_options.test_length=16",
        *TINY_MODEL, *TRAIN, "--train.epochs=1", "--model.encoder.positional=learned",
        "--model.encoder.max_len=8", f"--out_dir={out}",
    ]  # fmt: skip
    assert main(args) != 0
    err = capsys.readouterr().err
    assert "max_len" in err
