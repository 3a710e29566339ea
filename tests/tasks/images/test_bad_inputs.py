"""``predict`` and ``show`` of an image run (scikit-learn's 8x8 digits, no mirror needed) on
file names and indices as a user types them (issue 32: ``"my shirt.png"`` was split on its
space and read as two files)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TINY = ["--train.epochs=1", "--train.batch_size=64", "--train.log_every=0",
        "--task_options.train_size=128", "--model.encoder.dim=16", "--model.encoder.depth=1"]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory, no_mirror) -> Path:
    from attnlab.lab.cli import main

    out = tmp_path_factory.mktemp("digits-bad") / "run"
    assert main(["train", "digits", *TINY, f"--out_dir={out}"]) == 0
    return out


def png(path: Path) -> Path:
    from PIL import Image

    Image.new("L", (16, 16), color=200).save(path)
    return path


def test_a_file_name_with_a_space_is_one_image(run, cli, tmp_path):
    image = png(tmp_path / "my shirt.png")
    ran = cli("predict", run, image, "--json")
    assert ran.rc == 0, ran.err
    [record] = [json.loads(line) for line in ran.out.splitlines()]
    assert record["input"] == str(image)
    out = tmp_path / "show.png"
    assert cli("show", run, image, "--out", out).rc == 0 and out.stat().st_size > 1000


def test_a_file_name_with_two_spaces_is_kept_exactly(run, cli, tmp_path):
    image = png(tmp_path / "a  b.png")
    ran = cli("show", run, image, "--out", tmp_path / "s.png")
    assert ran.rc == 0, ran.err


BAD = {
    "a directory": (lambda d: (d / "dir.png").mkdir() or d / "dir.png", ["dir.png: a directory"]),
    "missing": (lambda d: d / "none.png", ["none.png' (no such file)"]),
    "not an image": (lambda d: (d / "t.png").write_text("text") and d / "t.png",
                     ["t.png: not an image Pillow can read"]),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(BAD))
@pytest.mark.parametrize("command", ["predict", "show"])
def test_an_unusable_file_is_refused(run, cli, tmp_path, kind, command):
    make, fragments = BAD[kind]
    out = tmp_path / "x.png"
    extra = ["--out", out] if command == "show" else []
    cli(command, run, make(tmp_path), *extra).user_error(command, *fragments)
    assert not out.exists()


@pytest.mark.parametrize(("args", "fragment"), [
    (["--index", "100000"], "--index 100000: the test set has images 0 to"),
    (["--index", "-1"], "--index -1: the test set has images 0 to"),
    (["--index", "x"], "--index: invalid int value: 'x'"),
    ([], "no input: pass image files or --index N"),
])  # fmt: skip
def test_a_bad_index_is_refused(run, cli, args, fragment):
    cli("predict", run, *args).user_error("predict", fragment)
