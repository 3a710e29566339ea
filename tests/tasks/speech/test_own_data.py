"""One's own recordings, no code (issue 37): ``audio-classify`` and ``fsdd --data.*`` read a
folder of class folders of WAV / FLAC files or a ``path,label`` CSV (any rate: resampled; stereo:
averaged), cut dev and test from train by a seed, keep the splits (absolute paths and labels) in
the run; train -> eval -> predict -> show from the run alone; a bad file or folder is one line
naming it, and nothing is written."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from attnlab.lab.audio import read_audio, write_wav
from attnlab.lab.tasks.speech.files import AudioDataOptions, list_recordings
from attnlab.lab.tasks.speech.fsdd import FsddTask
from attnlab.lab.tasks.speech.generic import AudioClassifyOptions, AudioClassifyTask

TINY = ["--model.dim=16", "--model.encoder.depth=1", "--model.encoder.heads=2",
        "--model.encoder.ff_hidden=32", "--model.frontend.n_mels=20", "--train.epochs=1",
        "--train.batch_size=4", "--train.device=cpu", "--train.log_every=0"]  # fmt: skip
TONES = {"high": 1200.0, "low": 300.0}


def tone(path: Path, hz: float, rate: int = 16000, seconds: float = 0.3, stereo=False) -> Path:
    t = np.arange(int(rate * seconds)) / rate
    x = 0.5 * np.sin(2 * math.pi * hz * t)
    write_wav(path, np.stack([x, x], 1) if stereo else x, rate)
    return path


def class_folders(root: Path, n: int = 6) -> Path:
    """``root/high`` and ``root/low``, ``n`` tones each (some at 22.05 kHz, some stereo)."""
    for label, hz in TONES.items():
        (root / label).mkdir(parents=True)
        for i in range(n):
            rate = 22050 if i % 3 == 1 else 16000
            tone(root / label / f"{i}.wav", hz * (1 + i / 50), rate, stereo=i % 3 == 2)
        (root / label / "notes.txt").write_text("not a recording: ignored\n")
    return root


def test_folders_and_csv_list_the_same_recordings(tmp_path):
    root = class_folders(tmp_path / "rec", n=3)
    table = tmp_path / "list.csv"
    table.write_text("path,label\n" + "".join(f"rec/{lab}/{i}.wav,{lab}\n"
                                             for lab in TONES for i in range(3)))  # fmt: skip
    folder, rows = list_recordings(str(root)), list_recordings(str(table))
    assert [(r.path, r.label) for r in folder] == [(r.path, r.label) for r in rows]
    assert rows[0].where == f"{table}:2" and Path(rows[0].path).is_absolute()
    stereo = read_audio(root / "low" / "2.wav", 16000)  # averaged to mono
    resampled = read_audio(root / "low" / "1.wav", 16000)  # 22.05 kHz -> 16 kHz
    assert stereo.dim() == 1 and resampled.shape[0] == 4800


def test_flac_is_read_with_soundfile_or_refused_naming_it(tmp_path, monkeypatch):
    import sys

    rate = 8000
    x = 0.3 * np.sin(np.arange(2400) / 3.0)
    try:
        import soundfile
    except ImportError:
        soundfile = None
    if soundfile is not None:
        soundfile.write(tmp_path / "a.flac", x, rate)
        assert read_audio(tmp_path / "a.flac", 8000).shape == (2400,)
    else:
        (tmp_path / "a.flac").write_bytes(b"fLaC")
    monkeypatch.setitem(sys.modules, "soundfile", None)  # as if not installed
    with pytest.raises(ValueError, match=r"a\.flac: reading FLAC needs the soundfile package"):
        read_audio(tmp_path / "a.flac", 8000)


def test_the_seeded_cut_is_kept_and_read_back_with_the_folder_gone(tmp_path):
    root = class_folders(tmp_path / "rec", n=10)
    options = AudioClassifyOptions(AudioDataOptions(train=str(root), split=(0.2, 0.1), seed=3))
    task = AudioClassifyTask()
    task.setup(options)
    assert [len(task.splits()[s]) for s in ("train", "dev", "test")] == [14, 4, 2]
    assert task.labels == ["high", "low"] and task.sample_rate == 16000
    task.save_run_data(tmp_path / "run")
    kept = list(csv.reader((tmp_path / "run" / "data" / "test.csv").open()))
    assert kept[0] == ["path", "label"] and all(Path(p).is_absolute() for p, _ in kept[1:])
    again = AudioClassifyTask()
    again.load_state_dict(task.state_dict())
    again.load_run_data(tmp_path / "run")
    again.setup({"data": {"train": str(tmp_path / "gone")}})  # the kept splits, not the option
    assert [u.name for u in again.splits()["test"]] == [u.name for u in task.splits()["test"]]


def test_fsdd_reads_own_recordings_at_its_8khz(tmp_path):
    root = class_folders(tmp_path / "rec", n=4)
    task = FsddTask()
    task.setup({"data": {"train": str(root), "test": str(root), "split": [0.25, 0.0]}})
    assert task.labels == ["high", "low"] and task.sample_rate == 8000
    assert [len(task.splits()[s]) for s in ("train", "dev", "test")] == [6, 2, 8]
    assert task.splits()["test"][0].audio.shape == (2400,)  # 0.3 s at 8 kHz


def test_audio_classify_round_trip_from_the_run_alone(cli, tmp_path):
    root = class_folders(tmp_path / "rec")
    table = tmp_path / "list.csv"
    rows = list_recordings(str(root))
    table.write_text("".join(f"{Path(r.path).relative_to(tmp_path)},{r.label}\n" for r in rows))
    run = tmp_path / "run"
    ran = cli("train", "audio-classify", f"--data.train={table}", "--data.split=0.17,0.17",
              *TINY, f"--out_dir={run}")  # fmt: skip
    assert ran.rc == 0, ran.err
    manifest = json.loads((run / "data" / "splits.json").read_text())
    assert manifest["examples"] == {"train": 8, "dev": 2, "test": 2}
    assert manifest["options"]["sample_rate"] == 0 and manifest["files"]["test"] == "test.csv"
    table.unlink()  # the run needs the list no more, only the recordings its splits name
    probe = tone(tmp_path / "probe.wav", 300.0, 44100)

    ran = cli("eval", run, "--split", "test")
    assert ran.rc == 0 and ran.out.startswith("audio-classify test split: {"), ran.err
    ran = cli("eval", run, "--data", root)  # a folder of the run's classes
    assert ran.rc == 0 and ran.out.startswith(f"{root}: "), ran.err
    ran = cli("predict", run, probe, "--index", "1", "--json")
    assert ran.rc == 0, ran.err
    records = [json.loads(line) for line in ran.out.splitlines()]
    assert set(records[-1]["probabilities"]) == {"high", "low"}
    assert any(r.get("gold") in TONES for r in records), records
    ran = cli("show", run, probe, "--out", tmp_path / "a.png")
    assert ran.rc == 0 and (tmp_path / "a.png").is_file(), ran.err
    ran = cli("show", run, "--index", "0", "--out", tmp_path / "b.png")
    assert ran.rc == 0 and (tmp_path / "b.png").is_file(), ran.err


def test_a_recording_gone_from_the_kept_split_is_named(cli, tmp_path):
    root = class_folders(tmp_path / "rec", n=4)
    run = tmp_path / "run"
    assert cli("train", "audio-classify", f"--data.train={root}", *TINY, f"--out_dir={run}").rc == 0
    gone = next(csv.reader((run / "data" / "test.csv").open().readlines()[1:]))[0]
    Path(gone).unlink()
    cli("eval", run, "--split", "test").user_error(
        "eval", f"{run / 'data' / 'test.csv'}:2: no such recording {gone}"
    )


@pytest.mark.parametrize(
    ("files", "fragments"),
    [
        ({"train": "rec", "test": "unseen.csv"},
         ["unseen.csv:1: label 'mid' of the test split is not one of the labels of the train "
          "data (high, low)"]),
        ({"train": "empty"}, ["empty/low: the class folder 'low' holds no .wav or .flac files"]),
        ({"train": "flat"}, ["flat: expected one sub-folder of recordings per class"]),
        ({"train": "broken", "dev": "rec", "test": "rec"}, ["broken/low/bad.wav: not a WAV file (no RIFF/WAVE header"]),
        ({"train": "rows.csv"}, ["rows.csv:3: expected a path,label row, got 'rec/low/0.wav'"]),
        ({"train": "missing.csv"}, ["missing.csv:1: no such recording", "nowhere.wav"]),
        ({}, ["'audio-classify' trains on your own recordings: give --data.train=FOLDER"]),
    ],
)  # fmt: skip
def test_bad_recordings_are_one_line_naming_them_and_nothing_is_written(
    cli, tmp_path, files, fragments
):
    class_folders(tmp_path / "rec", n=4)
    (tmp_path / "unseen.csv").write_text(f"{tmp_path / 'rec/low/0.wav'},mid\n")
    (tmp_path / "empty" / "low").mkdir(parents=True)
    (tmp_path / "flat").mkdir()
    tone(tmp_path / "flat" / "a.wav", 300.0)
    shutil.copytree(tmp_path / "rec", tmp_path / "broken")
    (tmp_path / "broken" / "low" / "bad.wav").write_bytes(b"not audio at all")
    (tmp_path / "rows.csv").write_text("rec/low/0.wav,low\nrec/low/1.wav,low\nrec/low/0.wav\n")
    (tmp_path / "missing.csv").write_text("nowhere.wav,low\n")
    options = [f"--data.{split}={tmp_path / name}" for split, name in files.items()]
    run = tmp_path / "run"
    cli("train", "audio-classify", *options, *TINY, f"--out_dir={run}").user_error(
        "train", *fragments
    )
    assert not run.exists()
