r"""Log-mel filterbank and MFCC features in torch (batched; CPU or GPU), and per-utterance
mean/variance normalisation.

Frames are **not centred**: frame ``t`` is the ``n_fft`` samples ``[t * hop, t * hop + n_fft)``
with the ``win``-sample periodic Hann window centred in them (with the default ``n_fft = win``
the frame is exactly ``[t * hop, t * hop + win)``), so

.. math::
    \text{frames}(s) = 1 + \lfloor (s - n_{fft}) / \text{hop} \rfloor \qquad (s \ge n_{fft}),

which is ``librosa.feature.melspectrogram(..., center=False)``'s count. Not centring means a
frame never needs samples from the future beyond its own window: what streaming needs.

The features of frame ``t``:

.. math::
    P_t(f) = |\mathrm{STFT}(x)_t(f)|^2, \qquad
    \mathrm{logmel}_t(m) = \ln \max\big(\textstyle\sum_f M_{m f} P_t(f),\ 10^{-10}\big),

with :math:`M` the **Slaney** mel filterbank of librosa's default (``htk=False``: linear below
1 kHz, logarithmic above; ``norm="slaney"``: each triangle scaled to unit area), or the HTK
mel scale with ``htk=True``. MFCCs are the orthonormal DCT-II of
:math:`10 \log_{10} \max(\cdot, 10^{-10})` of the mel energies (``librosa.feature.mfcc`` on
``power_to_db(..., top_db=None)``), first ``mfcc`` coefficients.

Legend: ``b`` batch, ``s`` samples, ``n`` / ``t`` frames, ``f`` frequency bins, ``m`` mel bins.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor, nn

__all__ = ["LogMel", "mel_filterbank", "normalize_utterance", "num_frames"]

_FLOOR = 1e-10  # the log floor, librosa's amin


def _hz_to_mel(f: np.ndarray, htk: bool) -> np.ndarray:
    f = np.asarray(f, dtype=np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + f / 700.0)
    f_sp, min_log_hz = 200.0 / 3, 1000.0  # Slaney: linear to 1 kHz, then log steps
    logstep = math.log(6.4) / 27.0
    mel = f / f_sp
    return np.where(
        f >= min_log_hz,
        min_log_hz / f_sp + np.log(np.maximum(f, 1e-12) / min_log_hz) / logstep,
        mel,
    )


def _mel_to_hz(m: np.ndarray, htk: bool) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    if htk:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def mel_filterbank(
    sample_rate: int, n_fft: int, n_mels: int, *, fmin: float = 0.0, fmax: float | None = None,
    htk: bool = False,
) -> Tensor:  # fmt: skip
    """The ``(n_mels, n_fft // 2 + 1)`` triangular mel filterbank, Slaney-normalised (area 1),
    as ``librosa.filters.mel`` (float64 maths, returned as float32)."""
    fmax = sample_rate / 2 if fmax is None else fmax
    if not 0 <= fmin < fmax <= sample_rate / 2:
        raise ValueError(
            f"fmin, fmax: expected 0 <= fmin < fmax <= sample_rate / 2 = {sample_rate / 2}, got "
            f"fmin={fmin}, fmax={fmax}"
        )
    freqs = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)  # (f,)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(fmin, htk), _hz_to_mel(fmax, htk), n_mels + 2), htk)
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - freqs[None, :]  # (m + 2, f)
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))  # (m, f)
    weights *= (2.0 / (mel_f[2:] - mel_f[:-2]))[:, None]  # Slaney: unit area per triangle
    return torch.from_numpy(weights).float()


def num_frames(samples: int | Tensor, n_fft: int, hop: int) -> int | Tensor:
    """Frames of ``samples`` samples (not centred): ``1 + (samples - n_fft) // hop``, 0 when
    shorter than one frame; an int or a ``(b,)`` tensor of lengths."""
    if isinstance(samples, Tensor):
        return torch.where(
            samples >= n_fft, 1 + (samples - n_fft).div(hop, rounding_mode="floor"), 0
        )
    return 1 + (samples - n_fft) // hop if samples >= n_fft else 0


def _dct_matrix(n_mels: int, n_out: int) -> Tensor:
    """``(n_mels, n_out)`` orthonormal DCT-II (scipy's ``dct(type=2, norm="ortho")``)."""
    m = np.arange(n_mels)[:, None]
    k = np.arange(n_out)[None, :]
    basis = np.cos(np.pi / n_mels * (m + 0.5) * k) * math.sqrt(2.0 / n_mels)
    basis[:, 0] /= math.sqrt(2.0)
    return torch.from_numpy(basis).float()


class LogMel(nn.Module):
    """Log-mel (or MFCC) features of raw audio, one vector per 10 ms frame.

    Args:
        sample_rate: Hz of the input samples.
        n_mels: mel bins (the feature width unless ``mfcc``).
        win_ms: analysis window (Hann, periodic) in milliseconds.
        hop_ms: frame shift in milliseconds.
        n_fft: FFT size (default: the window length in samples; larger zero-pads, window
            centred).
        mfcc: > 0 returns that many MFCCs instead of the log-mel energies.
        fmin, fmax: mel filterbank range in Hz (default 0 to the Nyquist frequency).
        htk: HTK mel scale instead of Slaney's.

    Shapes:
        - input: ``(b, s)`` or ``(s,)`` float samples
        - output: ``(b, n, n_mels)`` (``(b, n, mfcc)`` with MFCCs), ``n`` =
          :func:`num_frames` ``(s)``; a 1-D input gives ``b = 1``.
    """

    def __init__(
        self, sample_rate: int = 16000, n_mels: int = 80, win_ms: float = 25.0,
        hop_ms: float = 10.0, n_fft: int | None = None, mfcc: int = 0, *, fmin: float = 0.0,
        fmax: float | None = None, htk: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        if not isinstance(sample_rate, int) or sample_rate <= 0:
            raise ValueError(f"sample_rate: expected a positive int (Hz), got {sample_rate!r}")
        self.sample_rate = sample_rate
        self.win = round(sample_rate * win_ms / 1000)
        self.hop = round(sample_rate * hop_ms / 1000)
        if self.win < 2 or self.hop < 1:
            raise ValueError(
                f"win_ms={win_ms}, hop_ms={hop_ms} at {sample_rate} Hz give a window of "
                f"{self.win} and a hop of {self.hop} samples; need at least 2 and 1"
            )
        self.n_fft = self.win if n_fft is None else n_fft
        if self.n_fft < self.win:
            raise ValueError(f"n_fft: expected >= the window ({self.win} samples), got {n_fft}")
        if not isinstance(n_mels, int) or n_mels < 1:
            raise ValueError(f"n_mels: expected a positive int, got {n_mels!r}")
        if not isinstance(mfcc, int) or not 0 <= mfcc <= n_mels:
            raise ValueError(f"mfcc: expected an int in [0, n_mels={n_mels}], got {mfcc!r}")
        self.n_mels, self.mfcc = n_mels, mfcc
        self.out_dim = mfcc or n_mels
        self.register_buffer("window", torch.hann_window(self.win, periodic=True), persistent=False)
        fb = mel_filterbank(sample_rate, self.n_fft, n_mels, fmin=fmin, fmax=fmax, htk=htk)
        self.register_buffer("filterbank", fb, persistent=False)  # (m, f)
        if mfcc:
            self.register_buffer("dct", _dct_matrix(n_mels, mfcc), persistent=False)

    def num_frames(self, samples: int | Tensor) -> int | Tensor:
        """Frames of ``samples`` samples (int or ``(b,)`` tensor), see :func:`num_frames`."""
        return num_frames(samples, self.n_fft, self.hop)

    def forward(self, samples: Tensor) -> Tensor:
        x = samples.unsqueeze(0) if samples.dim() == 1 else samples  # (b, s)
        if x.dim() != 2:
            raise ValueError(
                f"samples: expected (batch, samples) or (samples,), got {tuple(samples.shape)}"
            )
        if x.shape[-1] < self.n_fft:
            raise ValueError(
                f"samples: {x.shape[-1]} samples are shorter than one frame ({self.n_fft} "
                f"samples = {1000 * self.n_fft / self.sample_rate:.1f} ms at {self.sample_rate} Hz)"
            )
        spec = torch.stft(
            x.float(), self.n_fft, hop_length=self.hop, win_length=self.win, window=self.window,
            center=False, return_complex=True,
        )  # (b, f, n)  # fmt: skip
        power = spec.real.square() + spec.imag.square()  # (b, f, n)
        mel = torch.matmul(self.filterbank, power)  # (b, m, n)
        if self.mfcc:
            db = 10.0 * torch.log10(mel.clamp(min=_FLOOR))
            return db.transpose(1, 2) @ self.dct  # (b, n, mfcc)
        return mel.clamp(min=_FLOOR).log().transpose(1, 2)  # (b, n, m)

    def extra_repr(self) -> str:
        return (
            f"sample_rate={self.sample_rate}, win={self.win}, hop={self.hop}, n_fft={self.n_fft}, "
            f"n_mels={self.n_mels}, mfcc={self.mfcc}"
        )


def normalize_utterance(feats: Tensor, lengths: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    r"""Per-utterance, per-feature mean and variance normalisation over the valid frames:
    :math:`(x_t - \mu) / \sqrt{\sigma^2 + \epsilon}`; padded frames become 0.

    Args:
        feats: ``(b, n, f)`` (or ``(n, f)``, one utterance).
        lengths: ``(b,)`` valid frames per utterance (default: all ``n``).
    """
    single = feats.dim() == 2
    x = feats.unsqueeze(0) if single else feats
    if x.dim() != 3:
        raise ValueError(f"feats: expected (batch, frames, features), got {tuple(feats.shape)}")
    b, n, _ = x.shape
    if lengths is None:
        lengths = torch.full((b,), n, device=x.device)
    valid = (torch.arange(n, device=x.device) < lengths.to(x.device)[:, None]).unsqueeze(
        -1
    )  # (b, n, 1)
    count = valid.sum(1).clamp(min=1).to(x.dtype)  # (b, 1)
    mean = (x * valid).sum(1) / count  # (b, f)
    var = ((x - mean[:, None]).square() * valid).sum(1) / count  # (b, f)
    out = (x - mean[:, None]) * torch.rsqrt(var[:, None] + eps) * valid
    return out[0] if single else out
