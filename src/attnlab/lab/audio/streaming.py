"""The front end fed chunk by chunk: the same frames as the offline front end, with bounded
buffers.

:class:`StreamingLogMel` keeps the samples not yet covered by a whole frame (fewer than
``n_fft + hop``); :class:`StreamingSubsampler` keeps the input frames the next output still
needs (fewer than 11). Both emit exactly what the offline module computes for the
concatenated input, as soon as it is determined. Per-utterance normalisation cannot stream (its
mean and variance need the whole utterance); use fixed statistics instead.

Legend: ``s`` samples, ``n`` frames, ``f`` features.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.lab.audio.features import LogMel
from attnlab.lab.audio.subsample import STRIDE, Conv2dSubsampling, subsampled_lengths

__all__ = ["StreamingLogMel", "StreamingSubsampler"]


class StreamingLogMel:
    """Log-mel frames of a stream of samples.

    Args:
        frontend: the offline :class:`LogMel` whose frames are reproduced.
    """

    def __init__(self, frontend: LogMel) -> None:
        self.frontend = frontend
        self.buffer = torch.zeros(0)
        self.frames_out = 0

    @torch.no_grad()
    def push(self, samples: Tensor) -> Tensor:
        """Append ``samples`` ``(s,)``; return the frames completed by them ``(n, f)`` (maybe
        ``n = 0``)."""
        if samples.dim() != 1:
            raise ValueError(
                f"samples: expected a 1-D chunk (samples,), got {tuple(samples.shape)}"
            )
        fe = self.frontend
        self.buffer = torch.cat([self.buffer.to(samples), samples.float()])
        n = fe.num_frames(self.buffer.shape[0])
        if n == 0:
            return torch.zeros(0, fe.out_dim)
        frames = fe(self.buffer[: (n - 1) * fe.hop + fe.n_fft])[0]  # (n, f)
        self.buffer = self.buffer[n * fe.hop :]
        self.frames_out += n
        return frames


class StreamingSubsampler:
    """Outputs of a :class:`Conv2dSubsampling` on a stream of frames."""

    def __init__(self, subsample: Conv2dSubsampling) -> None:
        self.subsample = subsample
        self.buffer: Tensor | None = None

    @torch.no_grad()
    def push(self, frames: Tensor) -> Tensor:
        """Append ``frames`` ``(n, f)``; return the outputs they complete ``(n', dim)``."""
        self.buffer = frames if self.buffer is None else torch.cat([self.buffer, frames])
        m = subsampled_lengths(self.buffer.shape[0])
        if m == 0:
            return frames.new_zeros(0, self.subsample.dim)
        length = torch.tensor([self.buffer.shape[0]])
        out, _ = self.subsample(self.buffer[None], length)  # (1, m, dim)
        self.buffer = self.buffer[STRIDE * m :]
        return out[0]
