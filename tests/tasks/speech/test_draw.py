"""The picture of ``attnlab show`` for speech: one colour bar for every attention head, the
prediction in the title, pairs outside the attention window masked (not weight 0), and the
frames that Conv2d x4 subsampling leaves without an encoder frame named in the legend."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from attnlab.lab.audio.subsample import subsampled_lengths
from attnlab.lab.tasks.speech.base import Utterance
from attnlab.lab.tasks.speech.draw import prediction_line, speech_figure
from attnlab.lab.tasks.speech.fsdd import FsddTask


def _task_and_model(**encoder):
    """An untrained fsdd model (seeded), 16 wide, 1 layer of 2 heads."""
    task = FsddTask()
    task.labels = [str(d) for d in range(10)]
    cfg = FsddTask.default_model_config()
    cfg.dim = 16
    for key, value in {"depth": 1, "heads": 2, "ff_hidden": 16, **encoder}.items():
        setattr(cfg.encoder, key, value)
    torch.manual_seed(0)
    return task, task.build_model(cfg).eval()


def _utterance(label=7):
    audio = torch.randn(4200, generator=torch.Generator().manual_seed(0))  # 0.52 s at 8 kHz
    return Utterance(audio, label, "7_test_0.wav")


def _attention_axes(fig):
    return [ax for ax in fig.axes if ax.images and ax.get_title(loc="left").startswith("layer")]


def test_one_colour_bar_for_every_head_and_one_for_the_spectrogram():
    task, model = _task_and_model()
    fig = speech_figure(task, model, _utterance())
    panels = _attention_axes(fig)
    assert len(panels) == 2
    images = [ax.images[0] for ax in panels]
    assert len({id(im.norm) for im in images}) == 1 and images[0].norm.vmin == 0.0
    bars = [ax for ax in fig.axes if getattr(ax, "_colorbar", None) is not None]
    assert sorted(ax.get_ylabel() for ax in bars) == ["attention weight (every head)", "log power"]
    assert images[-1].colorbar is not None  # the heads' bar reads the heads' scale


def test_the_title_gives_the_predicted_label_its_probability_and_the_gold_label():
    task, model = _task_and_model()
    utterance = _utterance()
    with torch.no_grad():
        probs = model(task.encode_inputs([utterance])).softmax(-1)[0]
    fig = speech_figure(task, model, utterance, title="fsdd: x.wav")
    first, second = fig._suptitle.get_text().splitlines()
    k = int(probs.argmax())
    assert first == "fsdd: x.wav"
    assert second == f"predicted {task.labels[k]} (p {float(probs[k]):.2f}; gold 7)"
    unlabelled = speech_figure(task, model, _utterance(label=None))
    assert "gold" not in unlabelled._suptitle.get_text()


def test_pairs_outside_the_window_are_masked_and_named():
    task, model = _task_and_model(window=2)
    fig = speech_figure(task, model, _utterance())
    for ax in _attention_axes(fig):
        drawn = ax.images[0].get_array()
        i, j = torch.meshgrid(torch.arange(drawn.shape[0]), torch.arange(drawn.shape[1]),
                              indexing="ij")  # fmt: skip
        assert torch.equal(torch.as_tensor(drawn.mask), (i - j).abs() > 2)
        assert any(p.get_hatch() for p in ax.patches)
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert any(t.startswith("masked pair (|i - j| > 2 frames = 80 ms)") for t in texts)


def test_full_attention_masks_nothing():
    task, model = _task_and_model()
    fig = speech_figure(task, model, _utterance())
    for ax in _attention_axes(fig):
        assert not torch.as_tensor(ax.images[0].get_array().mask).any()


def test_frames_without_an_encoder_frame_are_filled_and_explained():
    """Conv2d x4 keeps m = ((n - 1) // 2 - 1) // 2 frames: the panels end at frame 4m and the
    time after it is filled grey, with a legend entry saying why (it used to be blank)."""
    task, model = _task_and_model()
    utterance = _utterance()
    n = int(task.frontend().num_frames(utterance.audio.shape[0]))
    m, hop = subsampled_lengths(n), task.frontend().hop / task.sample_rate
    assert 4 * m < n  # this input has frames without an encoder frame
    fig = speech_figure(task, model, utterance)
    for ax in _attention_axes(fig):
        assert ax.images[0].get_extent()[1] == pytest.approx(4 * m * hop)
        spans = [p for p in ax.patches if not p.get_hatch()]
        assert len(spans) == 1 and spans[0].get_x() == pytest.approx(4 * m * hop)
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == [f"no encoder frame (Conv2d x4 subsampling: {m} outputs, 1 per 4 frames)"]


def test_frame_labels_are_the_predicted_phones_with_repeats_merged():
    """phones (one label per frame): the title lists the phones, not one label per frame."""
    task = SimpleNamespace(labels=["pau", "hh", "ax"])
    frames = torch.tensor([0, 0, 1, 2, 2, 0])
    logits = torch.nn.functional.one_hot(frames, 3).float() * 5.0  # (m, L)
    p = float(logits.softmax(-1).max(-1).values.mean())
    assert prediction_line(task, logits) == f"predicted phones: pau hh ax pau (mean p {p:.2f})"
