"""``predict`` and ``show`` of a speech run on files that are not usable recordings at the
model's rate (issue 32: a 100 Hz file was classified silently; a directory was reported as "no
such file"). Reads FSDD from the data mirror (skipped without one)."""

from __future__ import annotations

import json
import wave
from pathlib import Path

import numpy as np
import pytest

TINY = [
    "--task_options.limit=24", "--model.dim=16", "--model.encoder.depth=1",
    "--model.encoder.heads=2", "--model.encoder.ff_hidden=32", "--model.frontend.n_mels=20",
    "--train.epochs=1", "--train.batch_size=8", "--train.device=cpu", "--train.log_every=0",
]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory, no_mirror, data_mirror_or_none) -> Path:
    from attnlab.lab.cli import main

    if data_mirror_or_none is None:
        pytest.skip("no data mirror (FSDD)")
    out = tmp_path_factory.mktemp("fsdd-bad") / "run"
    assert main(["train", "fsdd", f"--out_dir={out}", *TINY]) == 0
    return out


def tone(path: Path, rate: int, seconds: float = 0.5, channels: int = 1) -> Path:
    t = np.arange(int(rate * seconds)) / rate
    x = (0.3 * np.sin(2 * np.pi * min(440.0, rate / 4) * t) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.repeat(x[:, None], channels, 1).tobytes())
    return path


BAD = {
    "100 Hz": (lambda d: tone(d / "low.wav", 100, seconds=2.0),
               ["low.wav: recorded at 100 Hz, below the 4000 Hz accepted for 8000 Hz audio"]),
    "a directory": (lambda d: (d / "dir.wav").mkdir() or d / "dir.wav",
                    ["expected a WAV file", "dir.wav' (a directory)"]),
    "missing": (lambda d: d / "none.wav", ["none.wav' (no such file)"]),
    "text": (lambda d: (d / "t.wav").write_text("not audio") and d / "t.wav",
             ["t.wav: not a WAV file"]),
    "empty": (lambda d: (d / "e.wav").write_bytes(b"") or d / "e.wav", ["e.wav: empty file"]),
    "too short": (lambda d: tone(d / "s.wav", 8000, seconds=0.01), ["s.wav: too short"]),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(BAD))
@pytest.mark.parametrize("command", ["predict", "show"])
def test_an_unusable_recording_is_refused(run, cli, tmp_path, kind, command):
    make, fragments = BAD[kind]
    wav = make(tmp_path)
    png = tmp_path / "x.png"
    extra = ["--out", png] if command == "show" else []
    cli(command, run, wav, *extra).user_error(command, *fragments)
    assert not png.exists()


def test_a_low_rate_recording_is_upsampled_with_a_warning(run, cli, tmp_path):
    ran = cli("predict", run, "--json", tone(tmp_path / "six.wav", 6000))
    assert ran.rc == 0, ran.err
    assert json.loads(ran.out)["label"] in "0123456789"
    [warning] = ran.warnings()
    assert (
        "six.wav: recorded at 6000 Hz, upsampled to 8000 Hz; it has nothing above 3000 Hz"
        in warning
    )


def test_higher_rates_and_stereo_are_read_silently(run, cli, tmp_path):
    ran = cli("predict", run, tone(tmp_path / "hi.wav", 44100, channels=2),
              tone(tmp_path / "mid.wav", 16000))  # fmt: skip
    assert ran.rc == 0 and len(ran.out.splitlines()) == 2, ran.err
    assert ran.warnings() == []


def test_a_file_name_with_spaces(run, cli, tmp_path):
    ran = cli("predict", run, tone(tmp_path / "my digit.wav", 8000))
    assert ran.rc == 0 and ran.out.startswith(f"{tmp_path / 'my digit.wav'}: "), ran.err
