"""``read_wav``: every encoding gives the same samples, channels are averaged, other rates are
resampled (frequency kept, content above the new Nyquist removed), bad files name the file."""

from __future__ import annotations

import struct
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlab.lab.audio import read_wav, resample, write_wav

RATE = 8000


def _sine(freq: float, seconds: float = 0.5, rate: int = RATE, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return amp * np.sin(2 * np.pi * freq * t)


def _pcm(path: Path, x: np.ndarray, bits: int, rate: int = RATE) -> Path:
    """Integer PCM with the standard library (``x``: ``(n,)`` or ``(n, channels)``)."""
    x = x[:, None] if x.ndim == 1 else x
    scale = 2 ** (bits - 1) - 1
    q = np.round(x * scale).astype(np.int64)
    if bits == 8:
        raw = (q + 128).astype(np.uint8).tobytes()
    elif bits == 24:
        u = (q & 0xFFFFFF).astype(np.uint32)
        raw = np.stack([u & 0xFF, (u >> 8) & 0xFF, (u >> 16) & 0xFF], -1).astype(np.uint8).tobytes()
    else:
        raw = q.astype(f"<i{bits // 8}").tobytes()
    with wave.open(str(path), "wb") as w:
        w.setnchannels(x.shape[1])
        w.setsampwidth(bits // 8)
        w.setframerate(rate)
        w.writeframes(raw)
    return path


def _float(path: Path, x: np.ndarray, bits: int = 32, extensible: bool = False) -> Path:
    """IEEE float WAV, written by hand (``wave`` cannot), optionally WAVE_FORMAT_EXTENSIBLE."""
    x = x[:, None] if x.ndim == 1 else x
    ch = x.shape[1]
    data = x.astype("<f4" if bits == 32 else "<f8").tobytes()
    block = ch * bits // 8
    if extensible:
        guid = struct.pack("<H", 3) + b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
        fmt = struct.pack("<HHIIHHHHI", 0xFFFE, ch, RATE, RATE * block, block, bits, 22, bits, 0)
        fmt += guid
    else:
        fmt = struct.pack("<HHIIHH", 3, ch, RATE, RATE * block, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += b"data" + struct.pack("<I", len(data)) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return path


@pytest.mark.parametrize("bits, tol", [(8, 1 / 100), (16, 1e-4), (24, 1e-6), (32, 1e-7)])
def test_every_pcm_width_reads_the_same_samples(tmp_path, bits, tol):
    x = _sine(440)
    got = read_wav(_pcm(tmp_path / f"s{bits}.wav", x, bits), RATE)
    assert got.dtype == torch.float32 and got.shape == (len(x),)
    assert np.abs(got.numpy() - x).max() < tol


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("extensible", [False, True])
def test_float_wavs_plain_and_extensible(tmp_path, bits, extensible):
    x = _sine(300)
    got = read_wav(_float(tmp_path / "f.wav", x, bits, extensible), RATE)
    np.testing.assert_allclose(got.numpy(), x, atol=1e-7)


def test_stereo_is_averaged(tmp_path):
    left, right = _sine(440), _sine(660, amp=0.25)
    got = read_wav(_pcm(tmp_path / "st.wav", np.stack([left, right], 1), 16), RATE)
    np.testing.assert_allclose(got.numpy(), (left + right) / 2, atol=1e-4)


def _peak_hz(x: np.ndarray, rate: int) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.fft.rfftfreq(len(x), 1 / rate)[spec.argmax()])


def test_resampling_keeps_a_sines_frequency(tmp_path):
    x = _sine(1000, seconds=1.0, rate=44100)
    got = read_wav(_pcm(tmp_path / "hi.wav", x, 16, rate=44100), 16000)
    assert got.shape[0] == 16000
    assert abs(_peak_hz(got.numpy(), 16000) - 1000) < 2


def test_resampling_filters_what_lies_above_the_new_nyquist():
    # 6 kHz at 16 kHz is above the 4 kHz Nyquist of 8 kHz: it must not fold back to 2 kHz.
    x = torch.from_numpy(_sine(6000, seconds=1.0, rate=16000))
    y = resample(x, 16000, 8000)
    assert y.shape[0] == 8000
    assert y[200:-200].abs().max() < 0.01 * 0.5  # attenuated by more than 40 dB
    keep = resample(torch.from_numpy(_sine(1000, seconds=1.0, rate=16000)), 16000, 8000)
    assert keep[200:-200].abs().max() > 0.45  # the pass band is kept


def test_fsdd_recording_reads_at_its_rate(data_mirror):
    path = data_mirror / "fsdd" / "recordings" / "7_jackson_32.wav"
    x = read_wav(path, 8000)
    assert x.dim() == 1 and 0.1 < x.abs().max() <= 1.0
    with pytest.warns(UserWarning, match="recorded at 8000 Hz, upsampled to 16000 Hz"):
        assert read_wav(path, 16000).shape[0] == 2 * x.shape[0]


def test_a_rate_below_half_the_target_is_refused(tmp_path):
    # issue 32: a 100 Hz file was upsampled to 8 kHz and classified as if it were speech
    path = _pcm(tmp_path / "low.wav", _sine(20, seconds=1.0, rate=100), 16, rate=100)
    with pytest.raises(ValueError, match=r"low\.wav: recorded at 100 Hz, below the 4000 Hz "
                       r"accepted for 8000 Hz audio: it has nothing above 50 Hz"):  # fmt: skip
        read_wav(path, 8000)
    with pytest.raises(ValueError, match="below the 4000 Hz"):
        read_wav(_pcm(tmp_path / "l2.wav", _sine(440, rate=3999), 16, rate=3999), 8000)
    with pytest.warns(UserWarning, match="upsampled"):  # asked for: any rate
        assert read_wav(path, 8000, min_rate=0).shape[0] == 8000


def test_a_rate_between_half_and_the_target_is_upsampled_with_a_warning(tmp_path):
    path = _pcm(tmp_path / "six.wav", _sine(440, seconds=1.0, rate=6000), 16, rate=6000)
    with pytest.warns(UserWarning, match=r"six\.wav: recorded at 6000 Hz, upsampled to 8000 Hz; "
                      r"it has nothing above 3000 Hz, where audio at 8000 Hz reaches 4000 Hz"):  # fmt: skip
        assert read_wav(path, 8000).shape[0] == 8000


def test_a_higher_rate_is_resampled_without_a_warning(tmp_path, recwarn):
    read_wav(_pcm(tmp_path / "hi.wav", _sine(440, rate=44100), 16, rate=44100), 8000)
    assert not [w for w in recwarn if "upsampled" in str(w.message)]


def test_write_wav_round_trips(tmp_path):
    x = _sine(500)
    np.testing.assert_allclose(read_wav(write_wav(tmp_path / "w.wav", x, RATE), RATE), x, atol=1e-4)


# ---- bad inputs name the file and the problem ---------------------------------------------
def test_empty_file(tmp_path):
    (tmp_path / "e.wav").write_bytes(b"")
    with pytest.raises(ValueError, match=r"e\.wav: empty file"):
        read_wav(tmp_path / "e.wav")


def test_not_a_wav(tmp_path):
    (tmp_path / "t.wav").write_text("hello, this is text")
    with pytest.raises(ValueError, match=r"t\.wav: not a WAV file"):
        read_wav(tmp_path / "t.wav")


def test_no_samples(tmp_path):
    with pytest.raises(ValueError, match=r"z\.wav: the WAV file holds no samples"):
        read_wav(_pcm(tmp_path / "z.wav", np.zeros(0), 16))


def test_too_short(tmp_path):
    with pytest.raises(ValueError, match=r"s\.wav: too short: 100 samples"):
        read_wav(_pcm(tmp_path / "s.wav", _sine(440)[:100], 16), RATE)


def test_truncated_header(tmp_path):
    good = _pcm(tmp_path / "g.wav", _sine(440), 16).read_bytes()
    (tmp_path / "c.wav").write_bytes(good[:30])
    with pytest.raises(ValueError, match=r"c\.wav: corrupt WAV"):
        read_wav(tmp_path / "c.wav")


def test_unsupported_encoding(tmp_path):
    path = _float(tmp_path / "a.wav", _sine(440))
    data = bytearray(path.read_bytes())
    data[20:22] = struct.pack("<H", 6)  # A-law
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"a\.wav: unsupported WAV encoding"):
        read_wav(path)


def test_a_directory(tmp_path):
    (tmp_path / "d.wav").mkdir()
    with pytest.raises(ValueError, match=r"d\.wav: a directory, not a WAV file"):
        read_wav(tmp_path / "d.wav")


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_wav(tmp_path / "nope.wav")


def test_bad_rate_argument(tmp_path):
    with pytest.raises(ValueError, match="sample_rate: expected a positive int"):
        read_wav(_pcm(tmp_path / "r.wav", _sine(440), 16), 0)
