"""The interface every positional encoding implements, and where each one acts.

Self-attention is permutation-equivariant: without positions, "I saw a saw" and "saw a I saw"
give the same set of outputs. An encoding injects order at one of three places:

* ``"input"``: added to (or transforming) the input vectors ``x`` (Sinusoidal, Learned,
  Floater, Recurrent): :meth:`PositionalEncoding.forward`.
* ``"qk"``: rotating queries and keys so that ``q_i . k_j`` depends on ``i - j`` (Rotary):
  :meth:`PositionalEncoding.rotate`.
* ``"scores"``: a bias ``(1, h, i, j)`` added to the attention scores (ALiBi, relative bias):
  :meth:`PositionalEncoding.score_bias`.

``MultiHeadAttention(..., positional=pe)`` calls the method that matches ``pe.acts_on``.
"""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor, nn

__all__ = ["PositionalEncoding", "TableEncoding", "ACTS_ON"]

ACTS_ON = ("input", "qk", "scores")


class PositionalEncoding(nn.Module):
    """Base class. Subclasses set :attr:`acts_on` and implement the matching method.

    :attr:`max_len` is the longest sequence the encoding can represent (``None``: any length,
    it extrapolates); asking for more raises ``ValueError``.
    """

    acts_on: ClassVar[str] = "input"
    max_len: int | None = None

    def check_length(self, n: int) -> None:
        if self.max_len is not None and n > self.max_len:
            raise ValueError(
                f"{type(self).__name__} was built for at most max_len={self.max_len} positions "
                f"and does not extrapolate; got a sequence of {n}. Build it with a larger "
                "max_len (attnlab train: --model.encoder.max_len=N), or use an encoding that "
                "extrapolates (Sinusoidal, Rotary, ALiBi, "
                "ShawRelative, Recurrent, "
                "RelativeBias, Floater)."
            )

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        """``"input"`` encodings: ``x`` of shape ``(b, n, dim)`` with positions added."""
        raise NotImplementedError(f"{type(self).__name__} does not act on the input")

    def rotate(
        self, q: Tensor, k: Tensor, *, q_offset: int = 0, k_offset: int = 0
    ) -> tuple[Tensor, Tensor]:
        """``"qk"`` encodings: rotated ``q (b, h, i, d)`` and ``k (b, h, j, d)``."""
        raise NotImplementedError(f"{type(self).__name__} does not act on queries and keys")

    def score_bias(self, q_len: int, kv_len: int, *, q_offset: int = 0) -> Tensor:
        """``"scores"`` encodings: a bias broadcastable to ``(b, h, q_len, kv_len)``."""
        raise NotImplementedError(f"{type(self).__name__} does not act on the scores")


class TableEncoding(PositionalEncoding):
    """An ``"input"`` encoding that adds row ``k`` of :meth:`table` at position ``k``.

    Subclasses (Floater, Recurrent) set ``dim`` and implement :meth:`table`, typically computed
    from their parameters and cached while those stay unchanged (see :meth:`_key`).
    """

    acts_on: ClassVar[str] = "input"
    dim: int

    def table(self, n: int) -> Tensor:
        """The encodings of positions ``0 .. n - 1``, shape ``(n, dim)``."""
        raise NotImplementedError

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        if x.shape[-1] != self.dim:
            raise ValueError(
                f"{type(self).__name__}: expected x (..., {self.dim}), got {tuple(x.shape)}"
            )
        n = x.shape[-2]
        self.check_length(offset + n)
        return x + self.table(offset + n)[offset:].to(x.dtype)

    def _key(self) -> tuple:
        """Identifies the parameters' current values: a cached table is valid while it holds."""
        return tuple((t.data_ptr(), t._version, t.dtype, t.device) for t in self.parameters())
