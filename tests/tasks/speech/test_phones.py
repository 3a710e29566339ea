"""The ``phones`` task: frame labels aligned with the audio, a tiny train / predict / show run,
streamed frame labels equal to the offline ones, and its errors.

The data is made by festival (skipped, saying how to install it, without festival); the
speech conftest points ``$ATTNLAB_CACHE`` at a temporary directory per module.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from attnlab.lab.cli import main
from attnlab.lab.speechgen import PHONES, frame_labels, make_phones, num_frames
from attnlab.lab.tasks import TASKS
from attnlab.lab.tasks.speech.base import IGNORE
from attnlab.lab.tasks.speech.model import SpeechModelConfig
from attnlab.lab.tasks.speech.phones import PhonesOptions, PhonesTask

needs_festival = pytest.mark.skipif(
    shutil.which("festival") is None
    or not Path("/usr/share/festival/voices/english/kal_diphone").exists(),
    reason="festival or its kal_diphone voice is not installed: "
    "apt-get install festival festvox-kallpc16k",
)


@pytest.fixture(scope="module")
def dataset(no_mirror, data_mirror_or_none) -> Path:
    if data_mirror_or_none is None:
        pytest.skip("no data mirror (the sentences come from CoNLL-2000)")
    if shutil.which("festival") is None:
        pytest.skip("festival is not installed: apt-get install festival festvox-kallpc16k")
    return make_phones(6, seed=0, workers=2)


def _tiny(**encoder) -> SpeechModelConfig:
    cfg = PhonesTask.default_model_config()
    cfg.dim = 16
    for key, value in {"depth": 1, "heads": 2, "ff_hidden": 16, **encoder}.items():
        setattr(cfg.encoder, key, value)
    return cfg


def test_registered_with_its_options():
    assert TASKS.get("phones") is PhonesTask
    assert PhonesTask().labels == list(PHONES)
    with pytest.raises(ValueError, match=r"unknown task option\(s\) \['speakers'\]"):
        PhonesTask().setup({"speakers": 3})


def test_missing_dataset_names_the_command_that_makes_it():
    with pytest.raises(FileNotFoundError, match="attnlab data make phones --sentences 11 --seed 4"):
        PhonesTask().setup(PhonesOptions(sentences=11, seed=4, make=False))


def test_without_festival_the_missing_dataset_says_how_to_install_it(monkeypatch):
    from attnlab.lab.speechgen import festival

    monkeypatch.setattr(festival.shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match=r"--seed 4; .*apt-get install festival"):
        PhonesTask().setup(PhonesOptions(sentences=11, seed=4))


@needs_festival
def test_a_missing_dataset_is_made_on_first_use(dataset):
    task = PhonesTask()
    task.setup(PhonesOptions(sentences=4, seed=9))  # not made yet: festival makes it now
    assert sum(len(s) for s in task.splits().values()) == 4


def test_subsampling_is_refused_with_the_fix():
    cfg = PhonesTask.default_model_config()
    cfg.frontend.subsample = "conv2d"
    with pytest.raises(ValueError, match="set model.frontend.subsample=none"):
        PhonesTask().build_model(cfg)


@needs_festival
def test_frames_and_labels_match_the_audio(dataset):
    task = PhonesTask()
    task.setup(PhonesOptions(sentences=6, seed=0))
    assert sum(len(s) for s in task.splits().values()) == 6
    task.build_model(_tiny())
    examples = task.splits()["train"]
    batch = task.collate(examples)
    for i, u in enumerate(examples):
        n = int(batch["lengths"][i])
        assert n == num_frames(u.samples) == 1 + (u.samples - 400) // 160
        labels = batch["labels"][i]
        assert (labels[:n] >= 0).all() and (labels[n:] == IGNORE).all()
        want = frame_labels(u.segments, n)
        assert [PHONES[int(t)] for t in labels[:n]] == want
        assert want[0] == want[-1] == "pau"  # festival starts and ends on a pause
        ends = [s.end for s in u.segments]
        assert ends == sorted(ends)
    assert batch["features"].shape == (len(examples), int(batch["lengths"].max()), 40)
    # the features are cached, not recomputed: a second batch is the same tensor data
    assert torch.equal(task.collate(examples)["features"], batch["features"])


@needs_festival
def test_tiny_train_predict_show(dataset, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "phones", f"--out_dir={out}", "--task_options.sentences=6",
                 "--train.epochs=2", "--train.batch_size=4", "--model.dim=16",
                 "--model.encoder.depth=1", "--model.encoder.heads=2",
                 "--model.encoder.ff_hidden=16"])  # fmt: skip
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0.0 <= metrics["test"]["accuracy"] <= 1.0 and metrics["unit"] == "frame"
    capsys.readouterr()
    wavs = sorted(str(p) for p in (dataset / "wav").glob("*.wav"))[:2]
    assert main(["predict", str(out / "best.pt"), *wavs, "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["file"] for r in records] == wavs
    for r in records:
        segs = r["segments"]
        assert segs[0]["start"] == 0.0
        assert all(a["end"] == b["start"] and a["phone"] != b["phone"]
                   for a, b in zip(segs, segs[1:]))  # fmt: skip
        assert all(s["phone"] in PHONES and s["start"] < s["end"] for s in segs)
        last_frame_end = ((len(r["frames"]) - 1) * 160 + 400) / 16000
        assert segs[-1]["end"] == pytest.approx(last_frame_end, abs=1e-4)
    assert main(["predict", str(out / "best.pt"), wavs[0]]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"{wavs[0]}: ") and " " in line
    png = tmp_path / "a.png"
    assert main(["show", str(out / "best.pt"), wavs[0], "--out", str(png)]) == 0
    assert png.stat().st_size > 0


@needs_festival
def test_streamed_frame_labels_equal_offline(dataset):
    torch.manual_seed(0)
    task = PhonesTask()
    task.setup(PhonesOptions(sentences=6, seed=0))
    cfg = _tiny(window=4)
    cfg.causal = True
    cfg.frontend.normalize = "global"
    model = task.build_model(cfg).eval()
    wav = sorted((dataset / "wav").glob("*.wav"))[0]
    u = task.parse_input(str(wav))
    offline = task.predict(model, [u])[0]
    streamed = task.predict(model, [u], stream=True, chunk_ms=100.0)[0]
    assert streamed["frames"] == offline["frames"]
    assert streamed["segments"] == offline["segments"]
    assert len(streamed["chunks"]) == -(-len(u.audio) // 1600)  # one per 100 ms chunk
