"""The text commands as a shell runs them: where ``-`` (stdin) and the flags stand never
changes what is read (issue 32: ``attnlab predict RUN --json -`` tagged the word "-"), and a
bad option value is one line naming it, with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import TINY_MODEL, TINY_TRAIN, tagger_options


@pytest.fixture(scope="module")
def tagger(tmp_path_factory, no_mirror) -> Path:
    from attnlab.lab.cli import main

    out = tmp_path_factory.mktemp("tagger-bad") / "pos"
    assert main(["train", "pos", *tagger_options(), *TINY_MODEL, *TINY_TRAIN,
                 "--train.epochs=2", f"--out_dir={out}"]) == 0  # fmt: skip
    return out


def attnlab(*args: object, stdin: str = "") -> subprocess.CompletedProcess:
    """``python -m attnlab ARGS`` in a fresh process, ``stdin`` piped in."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "attnlab", *map(str, args)], input=stdin,
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip


def test_stdin_is_read_wherever_the_dash_stands(tagger):
    lines = "the dog runs .\na cat sleeps .\n"
    orders = [["--json", "-"], ["-", "--json"]]
    outs = []
    for order in orders:
        done = attnlab("predict", tagger, *order, stdin=lines)
        assert done.returncode == 0, done.stderr
        outs.append(done.stdout)
    records = [json.loads(line) for line in outs[0].splitlines()]
    assert [r["tokens"] for r in records] == [
        ["the", "dog", "runs", "."],
        ["a", "cat", "sleeps", "."],
    ]
    assert outs[0] == outs[1]


def test_flag_order_never_changes_the_answer(tagger, cli):
    runs = [cli("predict", tagger, "--json", "a dog"), cli("predict", tagger, "a dog", "--json"),
            cli("predict", "--json", tagger, "a dog")]  # fmt: skip
    assert all(r.rc == 0 for r in runs), [r.err for r in runs]
    assert runs[0].out == runs[1].out == runs[2].out != ""


@pytest.mark.parametrize("inputs", [["a dog", "-"], ["-", "-"], ["-", "a dog", "--json"]])
def test_a_dash_among_other_inputs_is_refused(tagger, cli, inputs):
    cli("predict", tagger, *inputs).user_error(
        "predict", "'-' reads every input from stdin, so it must be the only input"
    )


def test_empty_stdin_is_refused(tagger, cli, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("\n \n"))
    cli("predict", tagger, "--json", "-").user_error("predict", "no inputs on stdin")


BAD_OPTIONS = {
    "--train.lr=nan": "train.lr: cannot use 'nan' as float (expected a finite number)",
    "--train.lr=inf": "train.lr: cannot use 'inf' as float (expected a finite number)",
    "--train.lr=-1": "train.lr must be a finite number >= 0, got -1.0",
    "--train.weight_decay=nan": "train.weight_decay: cannot use 'nan' as float",
    "--train.warmup_fraction=nan": "train.warmup_fraction: cannot use 'nan' as float",
    "--train.betas=0.9,nan": "train.betas[1]: cannot use 'nan' as float",
    "--train.betas=0.9,1.5": "train.betas must both be in [0, 1), got (0.9, 1.5)",
    "--model.encoder.dropout=nan": "model.encoder.dropout: cannot use 'nan' as float",
}


@pytest.mark.parametrize("option", list(BAD_OPTIONS))
def test_a_bad_number_is_refused_before_anything_is_written(cli, tmp_path, option):
    out = tmp_path / "run"
    ran = cli("train", "pos", *tagger_options(), *TINY_MODEL, option, f"--out_dir={out}")
    ran.user_error("train", BAD_OPTIONS[option])
    assert not out.exists()
