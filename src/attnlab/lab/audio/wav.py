"""Reading WAV files into float tensors, and resampling with an anti-aliasing filter.

The RIFF/WAVE container is parsed here (the standard library's :mod:`wave` reads integer PCM
only): integer PCM of 8 (unsigned), 16, 24 or 32 bits, IEEE float of 32 or 64 bits, and
``WAVE_FORMAT_EXTENSIBLE`` wrapping either. Channels are averaged to mono; another sample rate
is resampled by :func:`resample` (``scipy.signal.resample_poly``: a Kaiser-windowed FIR low-pass
at the lower of the two Nyquist frequencies, so nothing above the new Nyquist folds back).
"""

from __future__ import annotations

import math
import os
import struct
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["at_rate", "read_wav", "resample", "write_wav"]

_PCM, _FLOAT, _EXTENSIBLE = 0x0001, 0x0003, 0xFFFE


def _chunks(data: bytes, name: str):
    """``(chunk id, payload)`` of a RIFF body; a truncated chunk ends the walk."""
    pos = 12
    while pos + 8 <= len(data):
        cid, size = struct.unpack("<4sI", data[pos : pos + 8])
        payload = data[pos + 8 : pos + 8 + size]
        if len(payload) < size and cid != b"data":
            raise ValueError(f"{name}: corrupt WAV: chunk {cid!r} is truncated")
        yield cid, payload
        pos += 8 + size + (size & 1)  # chunks are word aligned


def _decode(raw: bytes, fmt: int, bits: int, channels: int, name: str) -> np.ndarray:
    """Interleaved sample bytes -> ``(frames, channels)`` float64 in [-1, 1]."""
    width = bits // 8
    usable = len(raw) - len(raw) % (width * channels)
    raw = raw[:usable]
    if fmt == _FLOAT:
        if bits not in (32, 64):
            raise ValueError(f"{name}: unsupported float WAV of {bits} bits (expected 32 or 64)")
        x = np.frombuffer(raw, dtype="<f4" if bits == 32 else "<f8").astype(np.float64)
    elif bits == 8:  # 8-bit PCM is unsigned, centred on 128
        x = (np.frombuffer(raw, dtype=np.uint8).astype(np.float64) - 128.0) / 128.0
    elif bits in (16, 32):
        x = np.frombuffer(raw, dtype=f"<i{width}").astype(np.float64) / float(2 ** (bits - 1))
    elif bits == 24:  # three little-endian bytes, sign-extended through the top byte
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        x = np.where(v >= 1 << 23, v - (1 << 24), v).astype(np.float64) / float(1 << 23)
    else:
        raise ValueError(f"{name}: unsupported PCM WAV of {bits} bits (expected 8, 16, 24 or 32)")
    return x.reshape(-1, channels)


def read_wav(
    path: str | os.PathLike[str],
    sample_rate: int = 16000,
    *,
    min_seconds: float = 0.025,
    min_rate: int | None = None,
) -> Tensor:
    """Read a WAV file as mono float32 samples in [-1, 1] at ``sample_rate``.

    A file at a higher rate is resampled down (:func:`resample`; nothing of the band below the
    new Nyquist frequency is lost). A file at a lower rate has nothing above its own Nyquist
    frequency, and upsampling cannot restore that band: from ``min_rate`` up to
    ``sample_rate`` it is upsampled with a warning naming the empty band, below ``min_rate``
    it is refused.

    Args:
        path: the file.
        sample_rate: the rate of the returned samples (Hz).
        min_seconds: a shorter recording is refused (default: one 25 ms analysis window).
        min_rate: the lowest rate accepted (Hz); default ``sample_rate // 2``: a recording
            that lacks more than half of the returned band is refused (0: accept any rate).

    Returns:
        ``(samples,)`` float32; stereo (any channel count) averaged.

    Raises:
        ValueError: naming the file: a directory, not a RIFF/WAVE file, corrupt or truncated
            chunks, an unsupported encoding, no samples, shorter than ``min_seconds``, or
            recorded below ``min_rate``.
        FileNotFoundError: no such file.
    """
    name = str(path)
    if not isinstance(sample_rate, int) or sample_rate <= 0:
        raise ValueError(f"sample_rate: expected a positive int (Hz), got {sample_rate!r}")
    min_rate = sample_rate // 2 if min_rate is None else min_rate
    if Path(path).is_dir():
        raise ValueError(f"{name}: a directory, not a WAV file")
    data = Path(path).read_bytes()
    if len(data) == 0:
        raise ValueError(f"{name}: empty file (0 bytes), not a WAV recording")
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError(f"{name}: not a WAV file (no RIFF/WAVE header; got {data[:12]!r})")
    fmt_chunk = raw = None
    for cid, payload in _chunks(data, name):
        if cid == b"fmt ":
            fmt_chunk = payload
        elif cid == b"data":
            raw = payload
            break
    if fmt_chunk is None or len(fmt_chunk) < 16:
        raise ValueError(f"{name}: corrupt WAV: no valid 'fmt ' chunk")
    if raw is None:
        raise ValueError(f"{name}: corrupt WAV: no 'data' chunk")
    fmt, channels, rate, _, _, bits = struct.unpack("<HHIIHH", fmt_chunk[:16])
    if fmt == _EXTENSIBLE:
        if len(fmt_chunk) < 26:
            raise ValueError(f"{name}: corrupt WAV: WAVE_FORMAT_EXTENSIBLE without a subformat")
        fmt = struct.unpack("<H", fmt_chunk[24:26])[0]  # first two bytes of the subformat GUID
    if fmt not in (_PCM, _FLOAT):
        raise ValueError(
            f"{name}: unsupported WAV encoding (format tag {fmt:#06x}); expected integer PCM "
            "or IEEE float"
        )
    if channels < 1 or rate < 1 or bits % 8:
        raise ValueError(
            f"{name}: corrupt WAV header ({channels} channels, {rate} Hz, {bits} bits)"
        )
    x = _decode(raw, fmt, bits, channels, name)
    if x.shape[0] == 0:
        raise ValueError(f"{name}: the WAV file holds no samples")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: the WAV file holds non-finite (NaN / inf) samples")
    return at_rate(x.mean(axis=1), rate, name, sample_rate, min_seconds, min_rate)


def at_rate(
    mono: np.ndarray, rate: int, name: str, sample_rate: int, min_seconds: float, min_rate: int
) -> Tensor:
    """Mono samples recorded at ``rate`` as float32 at ``sample_rate``, after :func:`read_wav`'s
    checks of the length and the rate (also used for the other formats' samples)."""
    seconds = mono.shape[0] / rate
    if seconds < min_seconds:
        raise ValueError(
            f"{name}: too short: {mono.shape[0]} samples at {rate} Hz = {seconds * 1000:.1f} ms; "
            f"at least {min_seconds * 1000:.0f} ms needed"
        )
    if rate < sample_rate:
        _check_low_rate(name, rate, sample_rate, min_rate)
    if rate != sample_rate:
        return resample(torch.from_numpy(mono), rate, sample_rate)
    return torch.from_numpy(mono).float()


def _check_low_rate(name: str, rate: int, sample_rate: int, min_rate: int) -> None:
    """Refuse a recording below ``min_rate``; warn that one below ``sample_rate`` is upsampled
    with an empty top band."""
    band = (f"nothing above {rate / 2:g} Hz, where audio at {sample_rate} Hz reaches "
            f"{sample_rate / 2:g} Hz")  # fmt: skip
    if rate < min_rate:
        raise ValueError(
            f"{name}: recorded at {rate} Hz, below the {min_rate} Hz accepted for "
            f"{sample_rate} Hz audio: it has {band}, and upsampling cannot restore it; give a "
            f"recording made at {sample_rate} Hz or more"
        )
    warnings.warn(f"{name}: recorded at {rate} Hz, upsampled to {sample_rate} Hz; it has {band}",
                  stacklevel=4)  # fmt: skip


def resample(x: Tensor, orig_rate: int, new_rate: int) -> Tensor:
    """Resample ``x`` (``(..., samples)``) from ``orig_rate`` to ``new_rate`` Hz.

    Polyphase filtering (``scipy.signal.resample_poly`` with the reduced ratio ``up / down``):
    upsample by ``up``, low-pass below ``min(orig, new) / 2`` (Kaiser window, beta 5), keep every
    ``down``-th sample. Output length ``ceil(samples * up / down)``. Runs on the CPU in float64.
    """
    from scipy.signal import resample_poly

    for arg, value in (("orig_rate", orig_rate), ("new_rate", new_rate)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{arg}: expected a positive int (Hz), got {value!r}")
    if orig_rate == new_rate:
        return x.float()
    g = math.gcd(orig_rate, new_rate)
    y = resample_poly(x.detach().cpu().double().numpy(), new_rate // g, orig_rate // g, axis=-1)
    return torch.from_numpy(np.ascontiguousarray(y)).float()


def write_wav(path: str | os.PathLike[str], samples: Tensor | np.ndarray, sample_rate: int) -> Path:
    """Write mono (``(samples,)``) or multi-channel (``(samples, channels)``) audio in [-1, 1]
    as 16-bit PCM (clipped). For tests and tools that concatenate recordings."""
    import wave

    x = np.asarray(samples, dtype=np.float64)
    x = x[:, None] if x.ndim == 1 else x
    pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(x.shape[1])
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.tobytes())
    return Path(path)
