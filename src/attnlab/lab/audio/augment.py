"""SpecAugment's time and frequency masking (Park et al. 2019), without time warping.

In training mode, each utterance gets ``freq_masks`` bands of ``[0, freq_width]`` consecutive
feature bins and ``time_masks`` spans of ``[0, time_width]`` consecutive frames (at most
``max_time_fraction`` of its valid frames) set to ``fill`` (0: the mean of normalised
features). In eval mode it is the identity. Padded frames are never touched.

Legend: ``b`` batch, ``n`` frames, ``f`` features.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["SpecAugment"]


class SpecAugment(nn.Module):
    """Random time and frequency masks on ``(b, n, f)`` features during training.

    Args:
        freq_masks: frequency bands masked per utterance.
        freq_width: widest band (bins).
        time_masks: time spans masked per utterance.
        time_width: longest span (frames).
        max_time_fraction: a span never exceeds this fraction of the utterance's frames.
        fill: the value written into masked cells.
    """

    def __init__(
        self, *, freq_masks: int = 2, freq_width: int = 8, time_masks: int = 2,
        time_width: int = 10, max_time_fraction: float = 0.2, fill: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__()
        for name, value in (("freq_masks", freq_masks), ("freq_width", freq_width),
                            ("time_masks", time_masks), ("time_width", time_width)):  # fmt: skip
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}: expected an int >= 0, got {value!r}")
        if not 0.0 <= max_time_fraction <= 1.0:
            raise ValueError(f"max_time_fraction: expected in [0, 1], got {max_time_fraction!r}")
        self.freq_masks, self.freq_width = freq_masks, freq_width
        self.time_masks, self.time_width = time_masks, time_width
        self.max_time_fraction, self.fill = max_time_fraction, fill

    def forward(self, feats: Tensor, lengths: Tensor) -> Tensor:
        if not self.training:
            return feats
        b, n, f = feats.shape
        dev = feats.device
        lengths = lengths.to(dev)
        keep = torch.ones(b, n, f, dtype=torch.bool, device=dev)
        bins = torch.arange(f, device=dev)  # (f,)
        for _ in range(self.freq_masks):
            width = torch.randint(0, min(self.freq_width, f) + 1, (b,), device=dev)
            start = (torch.rand(b, device=dev) * (f - width + 1)).floor()
            band = (bins >= start[:, None]) & (bins < (start + width)[:, None])  # (b, f)
            keep &= ~band[:, None, :]
        frames = torch.arange(n, device=dev)  # (n,)
        limit = torch.minimum(
            torch.full_like(lengths, self.time_width),
            (lengths.float() * self.max_time_fraction).floor().long(),
        )  # (b,)
        for _ in range(self.time_masks):
            width = (torch.rand(b, device=dev) * (limit + 1)).floor()
            start = (torch.rand(b, device=dev) * (lengths - width + 1).clamp(min=1)).floor()
            span = (frames >= start[:, None]) & (frames < (start + width)[:, None])  # (b, n)
            keep &= ~span[:, :, None]
        valid = (frames < lengths[:, None])[:, :, None]  # (b, n, 1): padding stays as it is
        return torch.where(keep | ~valid, feats, torch.full_like(feats, self.fill))

    def extra_repr(self) -> str:
        return (
            f"freq_masks={self.freq_masks}, freq_width={self.freq_width}, "
            f"time_masks={self.time_masks}, time_width={self.time_width}"
        )
