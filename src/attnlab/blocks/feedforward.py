r"""The position-wise feed-forward network of a Transformer block.

Legend: ``b`` batch, ``n`` positions, ``f`` hidden width.
"""

from __future__ import annotations

from torch import Tensor, nn

from ..dropout import Dropout

__all__ = ["FeedForward"]


class FeedForward(nn.Module):
    r"""Two linear maps around a non-linearity, applied to every position alike.

    .. math::
        \mathrm{FF}(x) = \phi(x W_1 + b_1)\, W_2 + b_2 \qquad \text{(Vaswani et al. 2017)},

    or, with ``gated=True``, a gated linear unit (Shazeer 2020, "GLU Variants Improve
    Transformer"):

    .. math::
        \mathrm{FF}(x) = \big(\phi(x W_g) \odot x W_a\big)\, W_2 .

    ``gated=True`` with ``activation=nn.SiLU`` is SwiGLU (PaLM, LLaMA); with ``nn.GELU`` it is
    GEGLU. A gated network has a third ``dim x hidden`` matrix: to keep the parameter count of
    the plain network, pass ``hidden = 8 * dim // 3`` (LLaMA's choice).

    Args:
        dim: input and output width.
        hidden: hidden width ``f`` (default ``4 * dim``).
        activation: the non-linearity's class :math:`\phi`, built with no arguments
            (default ``nn.GELU``, the exact erf form).
        dropout: dropout on the hidden activations during training (default 0).
        bias: whether the linear maps have biases (default True).
        gated: use a gated linear unit (default False).

    Shapes:
        - x: ``(..., dim)``
        - out: ``(..., dim)``
    """

    def __init__(
        self,
        dim: int,
        *,
        hidden: int | None = None,
        activation: type[nn.Module] = nn.GELU,
        dropout: float = 0.0,
        bias: bool = True,
        gated: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        hidden = 4 * dim if hidden is None else hidden
        if not isinstance(hidden, int) or hidden <= 0:
            raise ValueError(f"hidden must be a positive int, got {hidden!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.dim, self.hidden, self.gated = dim, hidden, gated
        # Gated: one matrix computes [x W_a; x W_g] (the value half first, then the gate).
        self.fc1 = nn.Linear(dim, 2 * hidden if gated else hidden, bias=bias)
        self.act = activation()
        self.drop = Dropout(dropout)
        self.fc2 = nn.Linear(hidden, dim, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        h = self.fc1(x)  # (..., f) or (..., 2f)
        if self.gated:
            value, gate = h.chunk(2, dim=-1)  # 2 x (..., f)
            h = value * self.act(gate)
        else:
            h = self.act(h)
        return self.fc2(self.drop(h))  # (..., dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, hidden={self.hidden}, gated={self.gated}"
