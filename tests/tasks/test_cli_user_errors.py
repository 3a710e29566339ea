"""The commands on bad input and on what a run leaves behind: every user error is one line
``attnlab CMD: error: ...`` with exit status 2 and no traceback; ``eval`` shows progress and
reports the number the run reported (bf16 included); ``show`` draws one layer/head on request.

Issue 8, items 7 (corrupt checkpoints), 8 (empty and foreign inputs), 12 (progress, log lines,
messages naming the file or option, ``-v`` after the subcommand), 13 (``show --layer --head``)
and 14 (``eval`` of a bf16 run).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab.lab.cli import main
from attnlab.lab.train.checkpoint import CheckpointError, load_checkpoint

from .conftest import DATA, TINY_MODEL, TINY_TRAIN, classifier_options, tagger_options

PNG = b"\x89PNG\r\n\x1a\n"
SHORT = ["--train.epochs=5"]  # enough for these tests: they check behaviour, not accuracy


def _train(out: Path, task: str, options: list[str], *extra: str) -> Path:
    args = ["train", task, *options, *TINY_MODEL, *TINY_TRAIN, *SHORT, *extra, f"--out_dir={out}"]
    assert main(args) == 0
    return out


@pytest.fixture(scope="module")
def tagger(tmp_path_factory, no_mirror) -> Path:
    return _train(tmp_path_factory.mktemp("tagger") / "pos", "pos", tagger_options())


@pytest.fixture(scope="module")
def bf16_tagger(tmp_path_factory, no_mirror) -> Path:
    out = tmp_path_factory.mktemp("bf16") / "pos"
    return _train(out, "pos", tagger_options(), "--train.precision=bf16")


def _one_error_line(err: str, command: str) -> str:
    """The single line of a user error (no traceback, no torch advice)."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"attnlab {command}: error: "), err
    assert "Traceback" not in err and "weights_only" not in err
    return lines[0]


# -- item 7: corrupt checkpoints ------------------------------------------------------------------

CORRUPTIONS = {
    "empty": lambda good: b"",
    "truncated": lambda good: good[: len(good) // 3],
    "random": lambda good: os.urandom(4096),
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
@pytest.mark.parametrize("command", ["predict", "eval", "show"])
def test_a_corrupt_checkpoint_is_one_clean_error(tagger, tmp_path, capsys, kind, command):
    bad = tmp_path / f"{kind}.pt"
    bad.write_bytes(CORRUPTIONS[kind]((tagger / "best.pt").read_bytes()))
    args = {
        "predict": ["predict", str(bad), "a dog"],
        "eval": ["eval", str(bad), "--data", str(DATA / "tagged.test.txt")],
        "show": ["show", str(bad), "a dog", "--out", str(tmp_path / "x.png")],
    }[command]
    assert main(args) == 2
    line = _one_error_line(capsys.readouterr().err, command)
    assert f"{bad}: not a readable checkpoint" in line
    assert ("empty" in line) if kind == "empty" else ("bytes" in line)


def test_load_checkpoint_raises_checkpoint_error(tmp_path):
    path = tmp_path / "x.pt"
    for data in (b"", os.urandom(100)):
        path.write_bytes(data)
        with pytest.raises(CheckpointError, match="not a readable checkpoint"):
            load_checkpoint(path)
    assert issubclass(CheckpointError, ValueError)


def test_a_corrupt_best_names_the_good_last_and_never_serves_it_silently(tagger, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tagger, run)
    step = load_checkpoint(run / "last.pt")["state"]["step"]
    (run / "best.pt").write_bytes(os.urandom(2048))
    assert main(["predict", str(run), "a dog"]) == 2
    line = _one_error_line(capsys.readouterr().err, "predict")
    assert f"{run / 'best.pt'}: not a readable checkpoint" in line
    assert f"{run / 'last.pt'} is readable (the latest weights, step {step})" in line
    assert f"pass {run / 'last.pt'} to use it" in line
    assert main(["predict", str(run / "last.pt"), "a dog"]) == 0  # explicitly: it works
    assert capsys.readouterr().out.strip().startswith("a/")
    (run / "last.pt").write_bytes(b"")
    assert main(["eval", str(run)]) == 2
    assert f"{run / 'last.pt'} is unreadable too" in capsys.readouterr().err


# -- item 8: empty and foreign inputs -------------------------------------------------------------


def test_predict_with_empty_stdin_is_an_error(tagger, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n   \n"))
    assert main(["predict", str(tagger), "-"]) == 2
    line = _one_error_line(capsys.readouterr().err, "predict")
    assert "no inputs on stdin" in line


def test_eval_of_an_empty_conllu_file_is_an_error(tagger, tmp_path, capsys):
    empty = tmp_path / "empty.conllu"
    empty.write_text("")
    assert main(["eval", str(tagger), "--data", str(empty)]) == 2
    assert f"{empty}: empty file" in _one_error_line(capsys.readouterr().err, "eval")


def test_a_binary_file_is_named_as_such(tagger, tmp_path, capsys):
    binary = tmp_path / "data.txt"
    binary.write_bytes(b"\x7fELF\x02\x01\x00\x00" + bytes(range(256)) * 4)
    assert main(["eval", str(tagger), "--data", str(binary)]) == 2
    line = _one_error_line(capsys.readouterr().err, "eval")
    assert f"{binary}: a binary file" in line and "\\x" not in line


def test_an_out_of_range_label_names_the_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 a good film .\n\n7 an odd label .\n")
    args = ["train", "sst2", f"--task_options.train_file={bad}", f"--out_dir={tmp_path / 'run'}"]
    assert main(args) == 2
    line = _one_error_line(capsys.readouterr().err, "train")
    assert f"{bad}: label 7 is outside the 2 classes of sst2" in line and "at line 3" in line


# -- item 12: progress, messages naming the option, errors of any kind ----------------------------


def test_eval_shows_progress_on_stderr(tagger, capsys):
    assert main(["eval", str(tagger), "--data", str(DATA / "tagged.train.txt")]) == 0
    captured = capsys.readouterr()
    assert "eval: 100%" in captured.err and "12/12" in captured.err and "ex/s" in captured.err
    assert "eval:" not in captured.out  # the metrics line alone on stdout
    assert captured.out.startswith(f"{DATA / 'tagged.train.txt'}: ")


def test_learned_positions_errors_give_the_command_line_option(tmp_path, capsys):
    base = ["train", "pos", *tagger_options(), *TINY_MODEL, *TINY_TRAIN, "--train.epochs=1"]
    learned = "--model.encoder.positional=learned"
    assert main([*base, learned, f"--out_dir={tmp_path / 'a'}"]) == 2
    assert "--model.encoder.max_len=N" in _one_error_line(capsys.readouterr().err, "train")
    short = "--model.encoder.max_len=3"  # the corpus has longer sentences
    assert main([*base, learned, short, f"--out_dir={tmp_path / 'b'}"]) == 2
    line = _one_error_line(capsys.readouterr().err.splitlines()[-1], "train")
    assert "max_len=3" in line and "--model.encoder.max_len=N" in line


def test_an_os_error_is_one_clean_line(tagger, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = blocker / "sub" / "x.png"  # a directory under a file
    assert main(["show", str(tagger), "a dog", "--out", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err, "show")
    assert str(blocker) in line


def test_verbose_after_the_subcommand_and_log_lines_off_the_progress_bar(tmp_path):
    """``attnlab train pos -v``; the trainer's ``eval step`` lines are written by tqdm, so each
    starts its own line instead of landing after the bar on the bar's line."""
    args = [sys.executable, "-m", "attnlab", "train", "pos", "-v", *tagger_options(),
            *TINY_MODEL, *TINY_TRAIN, "--train.epochs=2", f"--out_dir={tmp_path / 'run'}"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    evals = [line for line in done.stderr.split("\n") if "eval step" in line]
    assert len(evals) == 2
    for line in evals:  # what is left on the line once the terminal has applied its \r
        assert line.rsplit("\r", 1)[-1].startswith("eval step"), repr(line)


# -- item 13: one layer and head ------------------------------------------------------------------


def test_show_one_layer_and_head(tagger, tmp_path, capsys):
    png = tmp_path / "one.png"
    args = ["show", str(tagger), "I saw a saw .", "--out", str(png), "--layer", "1"]
    assert main([*args, "--head", "2"]) == 0
    assert capsys.readouterr().out.strip() == str(png) and png.read_bytes()[:8] == PNG
    assert main([*args, "--head", "9"]) == 2  # TINY_MODEL has 2 heads
    line = _one_error_line(capsys.readouterr().err, "show")
    assert "head 9 does not exist: the model has 2 heads" in line


# -- item 14: eval reports the run's number -------------------------------------------------------


def test_eval_of_a_bf16_run_reports_the_run_s_test_number(bf16_tagger, capsys):
    assert json.loads((bf16_tagger / "config.json").read_text())["train"]["precision"] == "bf16"
    reported = json.loads((bf16_tagger / "metrics.json").read_text())["test"]
    assert main(["eval", str(bf16_tagger), "--split", "test"]) == 0
    out = capsys.readouterr().out
    evaluated = json.loads("{" + out.strip().split(": {", 1)[1])
    assert evaluated == {k: round(v, 4) for k, v in reported.items()}


def test_eval_of_a_float32_run_reports_the_run_s_test_number(tagger, capsys):
    reported = json.loads((tagger / "metrics.json").read_text())["test"]
    assert main(["eval", str(tagger)]) == 0
    evaluated = json.loads("{" + capsys.readouterr().out.strip().split(": {", 1)[1])
    assert evaluated == {k: round(v, 4) for k, v in reported.items()}


def test_classifier_label_error_in_eval_data(tmp_path, capsys):
    run = _train(tmp_path / "sst2", "sst2", classifier_options())
    capsys.readouterr()
    bad = tmp_path / "bad.txt"
    bad.write_text("0 fine .\n1 good .\n2 neutral ?\n")
    assert main(["eval", str(run), "--data", str(bad)]) == 2
    line = _one_error_line(capsys.readouterr().err, "eval")
    assert "label 2 is outside the 2 classes" in line and "at line 3" in line
