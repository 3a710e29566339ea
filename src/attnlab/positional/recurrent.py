r"""Positions produced by a recurrent network run over a learned constant input.

Legend: ``b`` batch, ``n`` positions, ``c`` model width (``dim``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .base import TableEncoding

__all__ = ["Recurrent"]

_CELLS = {"gru": nn.GRU, "lstm": nn.LSTM}


class Recurrent(TableEncoding):
    r"""An RNN's hidden states over a learned constant input, added to the input.

    .. math::
        s_k = \mathrm{RNN}(u, s_{k-1}), \quad s_{-1} = 0, \qquad e_k = s_k, \qquad
        x_k \leftarrow x_k + e_k ,

    with a learned vector ``u`` fed at every step and a GRU (Cho et al. 2014) or LSTM
    (Hochreiter & Schmidhuber 1997) cell of width ``c``. Position is "counted" by the recurrence:
    the only thing that distinguishes step ``k`` from step ``k'`` is how many times the cell has
    been applied, so the encoding depends on the position alone. This is a true positional
    encoding, and one table serves the whole batch.

    "Positions produced by an RNN" also describes the other design, running the RNN over the
    tokens ``x`` themselves (as R-Transformer's local RNNs do, Wang et al. 2019): that mixes
    content into the "position" and makes the encoding data-dependent; it is not what this
    class does.

    Extrapolates: more positions are more steps of the recurrence (``max_len`` can cap it). A
    contracting cell converges to a fixed point, so far positions may become indistinguishable.
    Without gradients (evaluation, decoding) the states are cached and the recurrence continued
    from the cached state, so decoding one token at a time costs one step per token; the cache
    is dropped when a parameter changes.

    Args:
        dim: model width ``c`` (input and hidden size of the cell).
        cell: ``"gru"`` (default) or ``"lstm"``.
        max_len: refuse sequences longer than this (default None: any length).

    Shapes:
        - x: ``(b, n, dim)``; output ``(b, n, dim)``, positions ``offset .. offset + n - 1``.
        - :meth:`table`: ``(n, dim)``.
    """

    acts_on = "input"

    def __init__(self, dim: int, *, cell: str = "gru", max_len: int | None = None) -> None:
        super().__init__()
        if not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if cell not in _CELLS:
            raise ValueError(f"unknown cell {cell!r}; valid choices: {', '.join(sorted(_CELLS))}")
        if max_len is not None and (not isinstance(max_len, int) or max_len <= 0):
            raise ValueError(f"max_len must be a positive int or None, got {max_len!r}")
        self.dim, self.cell, self.max_len = dim, cell, max_len
        self.start = nn.Parameter(torch.randn(dim))  # u, the constant input
        self.rnn = _CELLS[cell](dim, dim, batch_first=True)
        self._cache: tuple | None = None  # (key, states (n, c), final recurrent state)

    def _run(self, steps: int, state=None) -> tuple[Tensor, object]:
        u = self.start.to(self.rnn.weight_ih_l0.dtype).expand(1, steps, self.dim)  # (1, n, c)
        out, state = self.rnn(u, state)  # (1, n, c)
        return out[0], state

    def table(self, n: int) -> Tensor:
        """The encodings :math:`e_0 .. e_{n-1}`, shape ``(n, c)``."""
        if torch.is_grad_enabled() and any(t.requires_grad for t in self.parameters()):
            self._cache = None  # training: run afresh, through autograd
            return self._run(n)[0]
        key = self._key()
        if self._cache is None or self._cache[0] != key:
            states, state = self._run(n)
            self._cache = (key, states, state)
        elif self._cache[1].shape[0] < n:  # continue the recurrence from the cached state
            _, states, state = self._cache
            more, state = self._run(n - states.shape[0], state)
            self._cache = (key, torch.cat([states, more]), state)
        return self._cache[1][:n]

    def extra_repr(self) -> str:
        return f"dim={self.dim}, cell={self.cell!r}, max_len={self.max_len}"
