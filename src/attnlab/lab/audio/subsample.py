r"""Strided Conv2d subsampling by 4 in time (the ESPnet / Conformer front end).

Two ``3 x 3`` convolutions of stride 2 over (frames, features), each followed by ReLU, then a
linear map of the flattened channels x features to ``dim``. No padding: output frame ``t``
sees exactly the input frames ``[4t, 4t + 6]``, so

.. math:: n' = \lfloor (\lfloor (n - 1) / 2 \rfloor - 1) / 2 \rfloor \qquad (n \ge 7),

and an output never depends on padded input frames. The receptive field is bounded (60 ms
ahead of frame ``4t``), so the front end streams with a fixed look-ahead: output ``t`` is
ready once input frame ``4t + 6`` has arrived (:class:`~attnlab.lab.audio.streaming.StreamingSubsampler`).

Legend: ``b`` batch, ``n`` frames, ``f`` features, ``c`` channels.
"""

from __future__ import annotations

from torch import Tensor, nn

__all__ = ["Conv2dSubsampling", "subsampled_lengths"]

#: input frames an output frame sees, and the step between outputs
RECEPTIVE_FIELD, STRIDE = 7, 4


def subsampled_lengths(lengths: Tensor | int) -> Tensor | int:
    """Output frames for ``lengths`` input frames: ``((n - 1) // 2 - 1) // 2``, at least 0."""
    if isinstance(lengths, int):
        return max(((lengths - 1) // 2 - 1) // 2, 0)
    return (((lengths - 1).div(2, rounding_mode="floor") - 1).div(2, rounding_mode="floor")).clamp(
        min=0
    )


class Conv2dSubsampling(nn.Module):
    """``(b, n, f) -> (b, n', dim)`` with ``n'`` = :func:`subsampled_lengths` ``(n)``.

    Args:
        in_features: ``f``, the feature width (e.g. mel bins).
        dim: output width.
        channels: convolution channels (default ``dim``).
    """

    def __init__(self, in_features: int, dim: int, *, channels: int | None = None) -> None:
        super().__init__()
        if in_features < 7:
            raise ValueError(
                f"in_features: Conv2dSubsampling needs >= 7 features, got {in_features}"
            )
        c = channels or dim
        self.in_features, self.dim = in_features, dim
        self.conv = nn.Sequential(
            nn.Conv2d(1, c, 3, stride=2), nn.ReLU(), nn.Conv2d(c, c, 3, stride=2), nn.ReLU()
        )
        f_out = ((in_features - 1) // 2 - 1) // 2
        self.out = nn.Linear(c * f_out, dim)

    def forward(self, feats: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Subsample ``feats`` ``(b, n, f)``; returns ``(x (b, n', dim), lengths (b,))``."""
        b, n, f = feats.shape
        if f != self.in_features:
            raise ValueError(
                f"feats: expected {self.in_features} features, got {tuple(feats.shape)}"
            )
        if n < RECEPTIVE_FIELD:
            raise ValueError(
                f"feats: Conv2d subsampling needs at least {RECEPTIVE_FIELD} frames, got {n}"
            )
        y = self.conv(feats.unsqueeze(1))  # (b, c, n', f')
        y = y.permute(0, 2, 1, 3).flatten(2)  # (b, n', c * f')
        return self.out(y), subsampled_lengths(lengths)
