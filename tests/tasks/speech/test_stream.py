"""Streaming = offline: a causal local-attention speech model fed 100 ms chunks gives the
offline model's frames (same mask) to 1e-5, with a state that does not grow; models that cannot
stream are refused with what to change."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.models import RNNEncoderConfig, TransformerEncoderConfig
from attnlab.lab.tasks.speech.base import Utterance
from attnlab.lab.tasks.speech.fsdd import FsddTask
from attnlab.lab.tasks.speech.model import FrontendConfig, SpeechModelConfig
from attnlab.lab.tasks.speech.stream import SpeechStreamer, check_streamable, stream_file


def _task(subsample="none", positional="rotary", pooling="attention", window=6, normalize="global"):
    task = FsddTask()
    task.labels = [str(d) for d in range(10)]
    g = torch.Generator().manual_seed(1)
    task._splits = {"train": [Utterance(0.1 * torch.randn(3000, generator=g), 0, "x")]}
    cfg = SpeechModelConfig(
        frontend=FrontendConfig(n_mels=40, normalize=normalize, subsample=subsample),
        dim=32, causal=True,
        encoder=TransformerEncoderConfig(depth=2, heads=2, ff_hidden=64, dropout=0.0,
                                         positional=positional, window=window),
    )  # fmt: skip
    cfg.head.pooling = pooling
    torch.manual_seed(0)
    model = task.build_model(cfg).eval()
    return task, model


def _audio(seconds: float, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(int(seconds * 8000)) / 8000
    return 0.3 * torch.sin(2 * torch.pi * 300 * t * (1 + t)) + 0.05 * torch.randn(
        len(t), generator=g
    )


@pytest.mark.parametrize(
    "subsample, positional, pooling",
    [("none", "rotary", "attention"), ("conv2d", "rotary", "mean"), ("none", "sinusoidal", "max"),
     ("none", "alibi", "attention"), ("none", None, "mean")],
)  # fmt: skip
def test_streamed_frames_equal_offline(subsample, positional, pooling):
    task, model = _task(subsample, positional, pooling)
    audio = _audio(1.3)
    with torch.no_grad():
        hidden, lengths, _ = model.encode(task.encode_inputs([Utterance(audio, None, "a")]))
        offline_logits = model(task.encode_inputs([Utterance(audio, None, "a")]))[0]
    streamer = SpeechStreamer(task, model)
    step = 800  # 100 ms at 8 kHz
    got = torch.cat([streamer.push(audio[i : i + step]) for i in range(0, len(audio), step)])
    assert got.shape == hidden[0, : int(lengths[0])].shape
    torch.testing.assert_close(got, hidden[0, : int(lengths[0])], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(streamer.logits(), offline_logits, atol=1e-5, rtol=1e-5)


def test_state_is_bounded_whatever_the_length():
    task, model = _task(window=4)
    streamer = SpeechStreamer(task, model)
    sizes = []
    for i in range(60):  # 6 s in 100 ms chunks
        streamer.push(_audio(0.1, seed=i))
        sizes.append(streamer.state_size())
    assert max(sizes[10:]) == max(sizes[40:])  # stops growing once the caches are full
    assert all(c.shape[1] == 4 for c in streamer.caches)


def test_stream_file_reports_every_chunk_and_ends_on_the_offline_label():
    task, model = _task()
    utt = Utterance(_audio(0.75), None, "a.wav")
    record = stream_file(task, model, utt, chunk_ms=100)
    assert [c["end_s"] for c in record["chunks"]] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75][
        -len(record["chunks"]) :
    ]
    offline = task.predict(model, [utt])[0]
    assert record["label"] == offline["label"]
    assert record["probabilities"] == pytest.approx(offline["probabilities"], abs=1e-4)


def test_what_cannot_stream_is_refused_with_the_fix():
    task, model = _task(normalize="utterance")
    with pytest.raises(ValueError, match="per-utterance normalisation"):
        check_streamable(task, model)
    task, model = _task(window=None)
    with pytest.raises(ValueError, match="bounded cache.*--model.encoder.window"):
        check_streamable(task, model)
    task = FsddTask()
    task.labels = list("0123456789")
    model = task.build_model(SpeechModelConfig(encoder=RNNEncoderConfig()))
    with pytest.raises(ValueError, match="causal local self-attention.*RNNEncoder"):
        check_streamable(task, model)
    with pytest.raises(ValueError, match="model.causal=true needs the transformer"):
        task.build_model(SpeechModelConfig(causal=True, encoder=RNNEncoderConfig()))
