r"""The lecture's baselines before self-attention: a fully connected network over a fixed
context, a CNN and an RNN.

Each implements the :class:`~attnlab.lab.models.encoders.SequenceEncoder` interface and is
registered in :data:`~attnlab.lab.models.encoders.ENCODERS`, so it is a drop-in replacement for the
Transformer in any task.

* ``"fc"``: a fully connected network sees a fixed context of ``k`` vectors around each
  position (``k = 1``: each vector on its own). It cannot tell "I *saw* a saw" from "I saw a
  *saw*" with ``k = 1``, and a wider ``k`` only buys a fixed, local context.
* ``"cnn"``: stacked convolutions; the receptive field grows by ``kernel - 1`` per layer.
* ``"rnn"``: an LSTM / GRU, left-to-right (and right-to-left), context of any length but
  sequential.

Legend: ``b`` batch, ``n`` positions, ``k`` context size, ``d`` input width, ``f`` hidden width.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab.dropout import Dropout
from attnlab.lab.models.encoders import ENCODERS, SequenceEncoder, valid_positions

__all__ = ["FCEncoder", "CNNEncoder", "RNNEncoder"]


def _check_dropout(dropout: float) -> None:
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")


@ENCODERS.register("fc")
class FCEncoder(SequenceEncoder):
    r"""A fully connected network over a context of ``k`` vectors around each position.

    .. math::
        h_t = \mathrm{MLP}\big([x_{t-r}; \dots; x_t; \dots; x_{t+r}]\big), \qquad r = (k-1)/2,

    with :math:`x_s = 0` outside ``0 <= s < length``. The first layer is a convolution of width
    ``k`` (a linear map of the concatenated context), computed here by unfolding the contexts;
    the further ``depth - 1`` layers act on each position alone.

    Args:
        dim: input width ``d``.
        context: context size ``k`` (odd, centred); 1 = each vector on its own.
        hidden: hidden and output width (default ``dim``).
        depth: number of hidden layers (>= 1).
        dropout: dropout after each hidden layer during training.

    Shapes:
        - x: ``(b, n, dim)``; lengths: ``(b,)``
        - hidden: ``(b, n, hidden)``
    """

    def __init__(
        self,
        dim: int,
        *,
        context: int = 3,
        hidden: int | None = None,
        depth: int = 1,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if not isinstance(context, int) or context < 1 or context % 2 == 0:
            raise ValueError(f"context must be an odd int >= 1 (centred contexts), got {context!r}")
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        _check_dropout(dropout)
        hidden = hidden or dim
        self.dim, self.out_dim, self.context = dim, hidden, context
        layers: list[nn.Module] = []
        width = context * dim
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU(), Dropout(dropout)]
            width = hidden
        self.mlp = nn.Sequential(*layers)

    def encode(self, x: Tensor, lengths: Tensor, *, need_weights: bool) -> tuple[Tensor, None]:
        b, n, d = x.shape
        r = self.context // 2
        # x is zero at padded positions already; pad r zeros at both ends of the sequence axis.
        padded = F.pad(x, (0, 0, r, r))  # (b, n + 2r, d)
        contexts = padded.unfold(1, self.context, 1)  # (b, n, d, k): context t = x[t-r .. t+r]
        contexts = contexts.transpose(2, 3).reshape(b, n, self.context * d)  # (b, n, k*d)
        return self.mlp(contexts), None  # (b, n, f)

    def extra_repr(self) -> str:
        return f"context={self.context}"


@ENCODERS.register("cnn")
class CNNEncoder(SequenceEncoder):
    r"""Stacked 1-D convolutions over positions, padding-aware.

    .. math::
        h^{(l)} = \mathrm{Norm}\big(h^{(l-1)} + \mathrm{Drop}(\mathrm{ReLU}(W^{(l)} * h^{(l-1)}))\big)

    (without the residual term when ``residual=False`` or the widths differ). Padded positions
    are set to zero before every layer, so they look exactly like the zero padding beyond the
    sequence's end and never leak into valid positions.

    Args:
        dim: input width.
        channels: hidden and output width (default ``dim``).
        depth: number of convolution layers.
        kernel: convolution width (odd).
        residual: add each layer's input to its output (where the widths agree).
        dropout: dropout after each layer during training.

    Shapes:
        - x: ``(b, n, dim)``; lengths: ``(b,)``
        - hidden: ``(b, n, channels)``
    """

    def __init__(
        self,
        dim: int,
        *,
        channels: int | None = None,
        depth: int = 2,
        kernel: int = 3,
        residual: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if not isinstance(kernel, int) or kernel < 1 or kernel % 2 == 0:
            raise ValueError(f"kernel must be an odd int >= 1 (centred windows), got {kernel!r}")
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        _check_dropout(dropout)
        channels = channels or dim
        self.dim, self.out_dim, self.residual = dim, channels, residual
        self.convs = nn.ModuleList(
            nn.Conv1d(dim if i == 0 else channels, channels, kernel, padding=kernel // 2)
            for i in range(depth)
        )
        self.norms = nn.ModuleList(nn.LayerNorm(channels) for _ in range(depth))
        self.drop = Dropout(dropout)

    def encode(self, x: Tensor, lengths: Tensor, *, need_weights: bool) -> tuple[Tensor, None]:
        valid = valid_positions(lengths, x.shape[1]).unsqueeze(-1)  # (b, n, 1)
        h = x
        for conv, norm in zip(self.convs, self.norms):
            y = F.relu(conv((h * valid).transpose(1, 2))).transpose(1, 2)  # (b, n, f)
            y = self.drop(y)
            h = norm(h + y if self.residual and h.shape[-1] == y.shape[-1] else y)
        return h, None

    def extra_repr(self) -> str:
        return f"residual={self.residual}"


@ENCODERS.register("rnn")
class RNNEncoder(SequenceEncoder):
    r"""An LSTM or GRU over the valid positions (packed: padding is never read).

    With ``bidirectional=True``, :math:`h_t = [\overrightarrow{h}_t; \overleftarrow{h}_t]`:
    the backward direction starts at each sequence's own last token, not at the padding.

    Args:
        dim: input width.
        hidden: hidden width per direction (default ``dim // 2`` if bidirectional, else
            ``dim``), so ``out_dim = dim`` by default.
        depth: stacked recurrent layers.
        cell: ``"lstm"`` or ``"gru"``.
        bidirectional: run both directions and concatenate.
        dropout: dropout between stacked layers during training.

    Shapes:
        - x: ``(b, n, dim)``; lengths: ``(b,)``
        - hidden: ``(b, n, hidden * (2 if bidirectional else 1))``
    """

    CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}

    def __init__(
        self,
        dim: int,
        *,
        hidden: int | None = None,
        depth: int = 1,
        cell: str = "lstm",
        bidirectional: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if cell not in self.CELLS:
            raise ValueError(f"unknown cell {cell!r}; valid choices: {', '.join(self.CELLS)}")
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        _check_dropout(dropout)
        directions = 2 if bidirectional else 1
        hidden = hidden or max(dim // directions, 1)
        self.dim, self.out_dim, self.cell = dim, hidden * directions, cell
        self.rnn = self.CELLS[cell](
            dim,
            hidden,
            num_layers=depth,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if depth > 1 else 0.0,  # torch applies it between layers only
        )

    def encode(self, x: Tensor, lengths: Tensor, *, need_weights: bool) -> tuple[Tensor, None]:
        n = x.shape[1]
        # pack_padded_sequence rejects empty sequences: run them as length 1 (their input is
        # zero) and let forward() zero the output.
        packed = pack_padded_sequence(
            x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
        )
        out, _ = self.rnn(packed)
        h, _ = pad_packed_sequence(out, batch_first=True, total_length=n)  # (b, n, out_dim)
        return h, None

    def extra_repr(self) -> str:
        return f"cell={self.cell}"
