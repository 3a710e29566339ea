"""A label per frame of one's own recordings (issue 37): ``audio-frames`` reads NAME.wav beside
NAME.TextGrid (Praat, long or short text format) or NAME.lab (HTK); gaps and empty intervals
take ``--data.empty_label``; train -> eval -> predict -> show from the run (its kept splits);
a bad alignment is one line naming the file (and line)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from attnlab.lab.audio import write_wav
from attnlab.lab.audio.alignments import read_alignment

TINY = ["--model.dim=16", "--model.encoder.depth=1", "--model.encoder.heads=2",
        "--model.encoder.ff_hidden=32", "--model.frontend.n_mels=20", "--train.epochs=1",
        "--train.batch_size=4", "--train.device=cpu", "--train.log_every=0"]  # fmt: skip

LONG = """File type = "ooTextFile"
Object class = "TextGrid"

xmin = 0
xmax = 0.4
tiers? <exists>
size = 2
item []:
    item [1]:
        class = "TextTier"
        name = "bells"
        xmin = 0
        xmax = 0.4
        points: size = 1
        points [1]:
            number = 0.1
            mark = "ding"
    item [2]:
        class = "IntervalTier"
        name = "words"
        xmin = 0
        xmax = 0.4
        intervals: size = 3
        intervals [1]:
            xmin = 0
            xmax = 0.1
            text = ""
        intervals [2]:
            xmin = 0.1
            xmax = 0.3
            text = "say ""hi"" now"
        intervals [3]:
            xmin = 0.3
            xmax = 0.4
            text = "low"
"""
SHORT = '"ooTextFile"\n"TextGrid"\n0\n0.4\n<exists>\n1\n"IntervalTier"\n"w"\n0\n0.4\n2\n0\n0.2\n"a"\n0.2\n0.4\n"b"\n'


def test_textgrid_long_and_short_and_htk_lab_read_as_segments(tmp_path):
    (tmp_path / "a.TextGrid").write_text(LONG)
    assert read_alignment(tmp_path / "a.TextGrid") == [
        ("sil", 0.0, 0.1),
        ('say "hi" now', 0.1, 0.3),
        ("low", 0.3, 0.4),
    ]
    (tmp_path / "b.TextGrid").write_text(SHORT)
    assert read_alignment(tmp_path / "b.TextGrid", tier="w") == [("a", 0.0, 0.2), ("b", 0.2, 0.4)]
    (tmp_path / "c.lab").write_text("1000000 2000000 ah\n2000000 3000000 b\n")  # 100 ns units
    assert read_alignment(tmp_path / "c.lab", empty="pau") == [
        ("pau", 0.0, 0.1),
        ("ah", 0.1, 0.2),
        ("b", 0.2, 0.3),
    ]
    (tmp_path / "d.lab").write_text("0.0 0.25 x\n0.25 0.5 y\n")  # seconds
    assert read_alignment(tmp_path / "d.lab")[1] == ("y", 0.25, 0.5)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.lab", "0 100 a\n100 b\n", r"a\.lab:2: expected 'start end label'"),
        ("b.lab", "0 300 a\n200 400 b\n", r"b\.lab: segment 'b' starts at 2e-05 s, before"),
        ("c.TextGrid", "hello", r"c\.TextGrid: not a Praat TextGrid"),
        ("d.TextGrid", SHORT, r"d\.TextGrid: no interval tier named 'phones' \(tiers: w\)"),
        ("e.TextGrid", SHORT[:60], r"e\.TextGrid: a truncated or malformed TextGrid"),
        ("f.lab", "\n", r"f\.lab: no labelled segment"),
    ],
)  # fmt: skip
def test_bad_alignments_name_the_file_and_line(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=message):
        read_alignment(tmp_path / name, tier="phones" if name == "d.TextGrid" else "")


def aligned(root: Path, n: int = 8) -> Path:
    """``n`` recordings of 0.1 s silence then 0.3 s of a tone, aligned ``sil`` / ``lo`` or
    ``hi``: half by TextGrid, half by HTK label files."""
    root.mkdir(parents=True)
    rate = 16000
    for i in range(n):
        label, hz = ("hi", 1500.0) if i % 2 else ("lo", 250.0)
        t = np.arange(int(0.3 * rate)) / rate
        x = np.concatenate([np.zeros(int(0.1 * rate)), 0.5 * np.sin(2 * math.pi * hz * t)])
        write_wav(root / f"u{i}.wav", x, rate)
        if i < n // 2:
            (root / f"u{i}.lab").write_text(f"1000000 4000000 {label}\n")
        else:
            grid = SHORT.replace('"a"', '"sil"').replace('"b"', f'"{label}"')
            (root / f"u{i}.TextGrid").write_text(grid.replace("0.2", "0.1"))
    return root


def test_audio_frames_round_trip_from_the_run(cli, tmp_path):
    data = aligned(tmp_path / "aligned")
    run = tmp_path / "run"
    ran = cli("train", "audio-frames", f"--data.train={data}", "--data.split=0.125,0.125",
              *TINY, f"--out_dir={run}")  # fmt: skip
    assert ran.rc == 0, ran.err
    kept = [json.loads(line) for line in (run / "data" / "test.jsonl").read_text().splitlines()]
    assert len(kept) == 1 and kept[0]["segments"][0] == ["sil", 0.0, 0.1]
    for f in data.glob("*.lab"):  # the run reads the alignments it kept
        f.unlink()
    ran = cli("eval", run, "--split", "test")
    assert ran.rc == 0 and ran.out.startswith("audio-frames test split: {"), ran.err
    ran = cli("predict", run, data / "u1.wav", "--index", "0", "--json")
    assert ran.rc == 0, ran.err
    records = [json.loads(line) for line in ran.out.splitlines()]
    assert {s["phone"] for r in records for s in r["segments"]} <= {"sil", "hi", "lo"}
    ran = cli("show", run, data / "u2.wav", "--out", tmp_path / "a.png")
    assert ran.rc == 0 and (tmp_path / "a.png").is_file(), ran.err


def test_a_recording_without_alignment_or_an_unseen_label_is_one_line(cli, tmp_path):
    data = aligned(tmp_path / "aligned")
    (data / "u0.lab").unlink()
    run = tmp_path / "run"
    cli("train", "audio-frames", f"--data.train={data}", *TINY, f"--out_dir={run}").user_error(
        "train", f"{data / 'u0.wav'}: no alignment beside it (expected u0.TextGrid or u0.lab)"
    )
    (data / "u0.lab").write_text("0 4000000 lo\n")
    test = aligned(tmp_path / "test", n=2)
    (test / "u0.lab").write_text("0 4000000 mid\n")
    cli("train", "audio-frames", f"--data.train={data}", f"--data.test={test}", *TINY,
        f"--out_dir={run}").user_error(
        "train", f"{test / 'u0.lab'}: label 'mid' of the test split is not one of the labels"
    )  # fmt: skip
    assert not run.exists()
