"""LogMel / MFCC against librosa, the frame count, normalisation, SpecAugment, subsampling and
the streaming front end (same frames as offline)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.lab.audio import (
    Conv2dSubsampling,
    LogMel,
    SpecAugment,
    StreamingLogMel,
    StreamingSubsampler,
    mel_filterbank,
    normalize_utterance,
    num_frames,
    subsampled_lengths,
)

RATE = 8000


def _noise(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n) / RATE
    return 0.3 * torch.sin(2 * torch.pi * 440 * t) + 0.05 * torch.randn(n, generator=g)


# ---- against librosa: power mel spectrogram, Slaney scale and norm, natural log floor 1e-10 ----
librosa = pytest.importorskip("librosa", reason="librosa (peers extra) is the reference front end")

#: float32 STFT vs librosa's float64: log-mel to 1e-4 absolute (measured ~1.3e-5), MFCC (dB
#: scale, values ~100) to 1e-6 relative + 1e-3 absolute
LOGMEL_ATOL, MFCC_ATOL = 1e-4, 1e-3


@pytest.mark.parametrize(
    "n_mels, n_fft, htk", [(40, None, False), (64, 256, False), (40, None, True)]
)
def test_logmel_equals_librosa(n_mels, n_fft, htk):
    x = _noise(4321)
    fe = LogMel(RATE, n_mels=n_mels, n_fft=n_fft, htk=htk)
    ours = fe(x)[0].double().numpy()  # (n, m)
    mel = librosa.feature.melspectrogram(
        y=x.double().numpy(), sr=RATE, n_fft=fe.n_fft, hop_length=80, win_length=200,
        window="hann", center=False, power=2.0, n_mels=n_mels, htk=htk, norm="slaney",
    )  # fmt: skip
    ref = np.log(np.maximum(mel, 1e-10)).T
    assert ours.shape == ref.shape == (num_frames(4321, fe.n_fft, 80), n_mels)
    np.testing.assert_allclose(ours, ref, atol=LOGMEL_ATOL)


def test_mfcc_equals_librosa():
    x = _noise(4000, seed=1)
    ours = LogMel(RATE, n_mels=40, mfcc=13)(x)[0].double().numpy()
    mel = librosa.feature.melspectrogram(y=x.double().numpy(), sr=RATE, n_fft=200, hop_length=80,
                                         center=False, n_mels=40)  # fmt: skip
    ref = librosa.feature.mfcc(S=librosa.power_to_db(mel, top_db=None), n_mfcc=13).T
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=MFCC_ATOL)


def test_filterbank_equals_librosa():
    ours = mel_filterbank(16000, 400, 80).numpy()
    np.testing.assert_allclose(ours, librosa.filters.mel(sr=16000, n_fft=400, n_mels=80), atol=1e-7)


# ---- frames -------------------------------------------------------------------------------
@pytest.mark.parametrize("samples", [200, 279, 280, 4321])
def test_frame_count_formula(samples):
    fe = LogMel(RATE, n_mels=40)
    assert fe(_noise(samples)).shape[1] == 1 + (samples - 200) // 80 == fe.num_frames(samples)


def test_frame_t_covers_its_window_only():
    """Frame t is a function of samples [t * hop, t * hop + win) alone."""
    fe = LogMel(RATE, n_mels=40)
    x = _noise(2000)
    y = x.clone()
    y[1000:] += 1.0  # change everything from sample 1000 on
    a, b = fe(x)[0], fe(y)[0]
    last_untouched = (1000 - 200) // 80  # frames ending at or before sample 1000
    assert torch.equal(a[: last_untouched + 1], b[: last_untouched + 1])
    assert not torch.allclose(a[last_untouched + 1], b[last_untouched + 1])


def test_batch_equals_one_by_one_and_padding_is_inert():
    fe = LogMel(RATE, n_mels=40)
    x1, x2 = _noise(1500), _noise(900, seed=3)
    batch = torch.zeros(2, 1500)
    batch[0], batch[1, :900] = x1, x2
    out = fe(batch)
    torch.testing.assert_close(out[0], fe(x1)[0])
    n2 = fe.num_frames(900)
    torch.testing.assert_close(out[1, :n2], fe(x2)[0], atol=1e-5, rtol=1e-5)


def test_bad_front_end_arguments():
    with pytest.raises(ValueError, match="mfcc: expected an int in"):
        LogMel(RATE, n_mels=40, mfcc=41)
    with pytest.raises(ValueError, match="n_fft: expected >= the window"):
        LogMel(RATE, n_fft=100)
    with pytest.raises(ValueError, match="shorter than one frame"):
        LogMel(RATE, n_mels=40)(torch.zeros(100))


# ---- normalisation and SpecAugment ----------------------------------------------------------
def test_normalize_utterance_over_valid_frames_only():
    torch.manual_seed(0)
    x = torch.randn(2, 10, 4) * 3 + 5
    lengths = torch.tensor([10, 6])
    out = normalize_utterance(x, lengths)
    torch.testing.assert_close(out[1, :6].mean(0), torch.zeros(4), atol=1e-5, rtol=0)
    torch.testing.assert_close(out[1, :6].var(0, unbiased=False), torch.ones(4), atol=1e-3, rtol=0)
    assert torch.equal(out[1, 6:], torch.zeros(4, 4))
    torch.testing.assert_close(out[1, :6], normalize_utterance(x[1, :6]))


def test_specaugment_masks_in_training_only_and_never_padding():
    torch.manual_seed(0)
    aug = SpecAugment(freq_masks=2, freq_width=5, time_masks=2, time_width=8)
    x = torch.randn(4, 50, 20) + 10  # no zeros by chance
    lengths = torch.tensor([50, 40, 30, 20])
    assert torch.equal(aug.eval()(x, lengths), x)
    y = aug.train()(x, lengths)
    masked = y == 0
    assert masked.any()
    for b, n in enumerate(lengths.tolist()):
        assert torch.equal(y[b, n:], x[b, n:])  # padding untouched
        cols = masked[b, :n].all(0).sum()  # masked frequency bins span every frame
        assert cols <= 2 * 5
    with pytest.raises(ValueError, match="time_width: expected an int >= 0"):
        SpecAugment(time_width=-1)


# ---- subsampling --------------------------------------------------------------------------
@pytest.mark.parametrize("n", [7, 10, 11, 50, 101])
def test_subsampled_lengths(n):
    sub = Conv2dSubsampling(40, 16)
    out, lengths = sub(torch.randn(1, n, 40), torch.tensor([n]))
    assert out.shape == (1, (n - 3) // 4, 16) and lengths.item() == out.shape[1]
    assert subsampled_lengths(n) == out.shape[1]


def test_subsampling_ignores_padding():
    torch.manual_seed(0)
    sub = Conv2dSubsampling(40, 16)
    x = torch.randn(1, 30, 40)
    padded = torch.cat([x, torch.randn(1, 9, 40)], 1)
    a, la = sub(x, torch.tensor([30]))
    b, lb = sub(padded, torch.tensor([30]))
    assert la == lb
    torch.testing.assert_close(b[:, : int(lb)], a)
    with pytest.raises(ValueError, match="at least 7 frames"):
        sub(torch.randn(1, 6, 40), torch.tensor([6]))


# ---- streaming front end = offline --------------------------------------------------------
@pytest.mark.parametrize("chunk", [80, 800, 333])
def test_streaming_logmel_equals_offline(chunk):
    fe = LogMel(RATE, n_mels=40)
    x = _noise(5000)
    s = StreamingLogMel(fe)
    got = torch.cat([s.push(x[i : i + chunk]) for i in range(0, len(x), chunk)])
    torch.testing.assert_close(got, fe(x)[0], atol=1e-5, rtol=1e-5)
    assert s.buffer.numel() < fe.n_fft + fe.hop  # bounded


@pytest.mark.parametrize("chunk", [1, 4, 10])
def test_streaming_subsampler_equals_offline(chunk):
    torch.manual_seed(0)
    sub = Conv2dSubsampling(40, 16).eval()
    x = torch.randn(63, 40)
    s = StreamingSubsampler(sub)
    got = torch.cat([s.push(x[i : i + chunk]) for i in range(0, len(x), chunk)])
    ref, _ = sub(x[None], torch.tensor([63]))
    torch.testing.assert_close(got, ref[0], atol=1e-5, rtol=1e-5)
    assert s.buffer.shape[0] < 11
