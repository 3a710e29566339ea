r"""Learned absolute position embeddings (Gehring et al. 2017; Devlin et al. 2019, BERT).

Legend: ``b`` batch, ``n`` positions, ``c`` model width (``dim``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import PositionalEncoding

__all__ = ["Learned"]


class Learned(PositionalEncoding):
    r"""One learned vector per absolute position, added to the input.

    .. math::
        x_t \leftarrow x_t + P_t, \qquad P \in \mathbb{R}^{L \times c}\ \text{learned},

    as in ConvS2S (Gehring et al. 2017) and BERT / GPT (Devlin et al. 2019). ``P`` starts
    normal with standard deviation ``init_std``.

    Does not extrapolate: position ``t >= max_len`` has no vector, and a longer sequence raises
    the ``ValueError`` of :meth:`PositionalEncoding.check_length`. Positions never seen in
    training keep their random initial vectors.

    Args:
        dim: model width ``c``.
        max_len: number of positions ``L``.
        init_std: standard deviation of the initial embeddings (default 0.02, as BERT / GPT-2).

    Shapes:
        - x: ``(b, n, dim)`` with ``offset + n <= max_len``; output ``(b, n, dim)``.
    """

    acts_on = "input"

    def __init__(self, dim: int, max_len: int, *, init_std: float = 0.02) -> None:
        super().__init__()
        if not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if not isinstance(max_len, int) or max_len <= 0:
            raise ValueError(
                f"Learned needs max_len, a positive int (the longest sequence; attnlab train: "
                f"--model.encoder.max_len=N), got {max_len!r}"
            )
        self.dim, self.max_len = dim, max_len
        self.weight = nn.Parameter(torch.randn(max_len, dim) * init_std)  # (L, c)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(f"Learned: expected x (..., {self.dim}), got {tuple(x.shape)}")
        n = x.shape[-2]
        self.check_length(offset + n)
        return x + self.weight[offset : offset + n].to(x.dtype)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, max_len={self.max_len}"
