"""The ``fsdd`` task: its splits, the registered files, and a tiny train / predict / show /
streamed predict through the command line."""

from __future__ import annotations

import hashlib
import json

import pytest

from attnlab.lab.cli import main
from attnlab.lab.data.registry import get_dataset
from attnlab.lab.tasks import TASKS
from attnlab.lab.tasks.speech.fsdd import SPEAKERS, FsddOptions, FsddTask

TINY = [
    "--task_options.limit=24", "--model.dim=16", "--model.encoder.depth=1",
    "--model.encoder.heads=2", "--model.encoder.ff_hidden=32", "--model.frontend.n_mels=20",
    "--train.epochs=2", "--train.batch_size=8", "--train.device=cpu", "--train.log_every=0",
]  # fmt: skip


def test_fsdd_is_a_task():
    assert TASKS.get("fsdd") is FsddTask


def test_default_split_is_takes_0_to_4_for_test_and_a_seeded_dev():
    names = FsddTask().split_names(FsddOptions())
    assert len(names["test"]) == 300 and {int(s.split("_")[2]) for s in names["test"]} == set(
        range(5)
    )
    assert len(names["dev"]) == 270 and len(names["train"]) == 2430
    assert not set(names["dev"]) & set(names["train"])
    assert names == FsddTask().split_names(FsddOptions())  # seeded
    assert names["dev"] != FsddTask().split_names(FsddOptions(seed=1))["dev"]


@pytest.mark.parametrize("speaker", SPEAKERS)
def test_leave_one_speaker_out(speaker):
    names = FsddTask().split_names(FsddOptions(split=f"speaker:{speaker}"))
    assert len(names["test"]) == 500 and all(f"_{speaker}_" in s for s in names["test"])
    assert not any(f"_{speaker}_" in s for s in names["train"] + names["dev"])


def test_bad_split_options():
    with pytest.raises(ValueError, match="unknown speaker 'bob'.*george"):
        FsddTask().split_names(FsddOptions(split="speaker:bob"))
    with pytest.raises(ValueError, match="expected 'default' or 'speaker:NAME', got 'x'"):
        FsddTask().split_names(FsddOptions(split="x"))


def test_registered_files_are_the_mirrors(data_mirror):
    """The manifest's sha256 per file; concatenated in sorted order, the files give the
    mirror's SHA256SUMS line for ``fsdd/recordings/*``."""
    files = get_dataset("fsdd").files
    assert len(files) == 3000
    sums = (data_mirror / "SHA256SUMS").read_text()
    line = next(ln for ln in sums.splitlines() if "fsdd/recordings/*" in ln)
    digest = hashlib.sha256()
    for f in sorted(files.values(), key=lambda f: f.path):
        digest.update((data_mirror / f.path).read_bytes())
    assert digest.hexdigest() == line.split()[0]
    assert files["7_jackson_32"].url.endswith("/recordings/7_jackson_32.wav")


@pytest.fixture(scope="module")
def run(tmp_path_factory, no_mirror, data_mirror_or_none):
    if data_mirror_or_none is None:
        pytest.skip("no data mirror")
    out = tmp_path_factory.mktemp("fsdd-run")
    assert main(["train", "fsdd", f"--out_dir={out}", *TINY]) == 0
    return out


def test_tiny_train_predict_and_show(run, recordings, tmp_path, capsys):
    wavs = [str(recordings / "7_jackson_32.wav"), str(recordings / "3_theo_1.wav")]
    capsys.readouterr()
    assert main(["predict", str(run), *wavs]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith(wavs[0] + ": ")
    assert main(["predict", str(run), wavs[0], "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["label"] in "0123456789" and sum(
        record["probabilities"].values()
    ) == pytest.approx(1, abs=1e-3)
    assert main(["show", str(run), wavs[0], "--out", str(tmp_path / "x.png")]) == 0
    assert (tmp_path / "x.png").stat().st_size > 1000


def test_predict_refuses_a_bad_input(run, tmp_path, capsys):
    (tmp_path / "bad.wav").write_text("not audio")
    assert main(["predict", str(run), str(tmp_path / "bad.wav")]) == 2
    assert "bad.wav: not a WAV file" in capsys.readouterr().err
    assert main(["predict", str(run), str(tmp_path / "none.wav")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_stream_refuses_a_bidirectional_model(run, recordings, capsys):
    assert main(["predict", str(run), str(recordings / "7_jackson_32.wav"), "--stream"]) == 2
    assert "--model.causal=true" in capsys.readouterr().err


def test_streaming_model_end_to_end(tmp_path, recordings, no_mirror, capsys):
    out = tmp_path / "stream-run"
    args = ["train", "fsdd", f"--out_dir={out}", *TINY, "--model.causal=true",
            "--model.encoder.window=4", "--model.frontend.normalize=global"]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    assert (
        main(["predict", str(out), str(recordings / "7_jackson_32.wav"), "--stream", "--json"]) == 0
    )
    record = json.loads(capsys.readouterr().out)
    assert [c["end_s"] for c in record["chunks"]][:2] == [0.1, 0.2]
    assert record["chunks"][-1]["label"] == record["label"]


def test_demo_speech_quick(tmp_path, data_mirror, no_mirror, capsys):
    assert main(["demo", "speech", "--quick", "--out", str(tmp_path / "demo")]) == 0
    out = capsys.readouterr().out
    assert "FSDD test accuracy" in out and "7_jackson_3.wav (a spoken 7)" in out
    assert (tmp_path / "demo" / "attention.png").is_file()
