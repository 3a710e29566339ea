r"""Dropout whose mask costs a quarter of PyTorch's on a CPU: four 16-bit draws per 64-bit number.

Dropout (Srivastava et al. 2014) keeps each element with probability :math:`1 - p` and scales
what it keeps by :math:`1 / (1 - p)`, so that its expectation is the input:

.. math::
    \mathrm{dropout}(x)_t = \frac{m_t\, x_t}{1 - p}, \qquad m_t \sim \mathrm{Bernoulli}(1 - p).

On a CPU, PyTorch draws that mask with ``bernoulli_``: one call of the Mersenne twister per
element, on one thread (MKL's vectorised generator is used on Intel processors only). In the
lab's training steps it took 13-27% of the step (BENCHMARKS.md, "Training speed"), more than all
the matrix products of a small tagger. Here each 64-bit draw of the same generator gives four
16-bit numbers :math:`u_t`, uniform on :math:`\{0, \dots, 2^{16} - 1\}`, and

.. math::
    m_t = [\, u_t \ge \lfloor p\, 2^{16} \rceil \,],

so the mask costs a quarter of the generator calls and one vectorised comparison, which writes
it as 0 / 1 in the input's dtype: multiplying by a boolean mask (``x * keep * scale`` in
``native_dropout_backward``, as ``F.dropout`` does) ran about twice as long as a product of one
dtype and a scaling, forward and backward (pos and g2p train 1.08x as fast for it;
BENCHMARKS.md, "Dropout's mask in the input's dtype"). Autograd keeps that mask for the
backward pass: 2 or 4 bytes an element (bfloat16, float32) where a boolean took 1. The drop
probability is thereby :math:`p` rounded to a multiple of :math:`2^{-16}` (at most
:math:`7.6 \cdot 10^{-6}` away), and the scale is :math:`1 / (1 - p_{16})` of that rounded
:math:`p_{16}`, so the output's expectation is still exactly the input.

The draws come from torch's generator (``torch.manual_seed`` seeds them, a saved RNG state
replays them) but are not the ones ``F.dropout`` makes: a run is reproducible, not identical to
one made with ``nn.Dropout``. Inside ``torch.compile`` the mask is drawn by the same code, as
an operator the compiler does not look into (``attnlab::dropout_mask``), from a generator
seeded by a number the compiled graph draws: a compiled run draws other masks than the eager
run, of the same law, reproducible from torch's seed. On
CUDA, whose dropout is already fused, :func:`dropout` is ``F.dropout``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["Dropout", "dropout", "dropout_mask", "fast_path"]

_PIECES = 4  # 16-bit numbers per 64-bit draw
_LEVELS = 1 << 16


def fast_path(x: Tensor) -> bool:
    """Whether :func:`dropout` draws ``x``'s mask itself (a CPU tensor) rather than calling
    ``F.dropout``."""
    return x.device.type == "cpu"


def dropout_mask(
    shape: torch.Size | tuple[int, ...],
    p: float,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.bool,
    out: Tensor | None = None,
) -> tuple[Tensor, float]:
    """A keep-mask of ``shape`` on the CPU (1 / True = keep, with probability
    :math:`1 - p_{16}`) and the scale :math:`1 / (1 - p_{16})` that makes the kept values
    unbiased (module docstring).

    Args:
        shape: the mask's shape.
        p: the drop probability, in ``[0, 1)``.
        generator: the random generator (default: torch's global CPU generator).
        dtype: the mask's dtype: bool, or 0 / 1 in a number type (the comparison's output
            in that dtype, for a product of one dtype with the input).
        out: a tensor of ``shape`` to write the mask into (its dtype is the mask's; ``dtype``,
            if given too, must be the same).
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p: a drop probability in [0, 1), got {p!r}")
    if out is not None and tuple(out.shape) != tuple(shape):
        raise ValueError(f"out: expected shape {tuple(shape)}, got {tuple(out.shape)}")
    if out is not None and dtype not in (torch.bool, out.dtype):
        raise ValueError(f"dtype: {dtype} disagrees with out's dtype {out.dtype}; give one")
    count = 1
    for size in shape:
        count *= size
    # The full 64-bit range (torch's default for int64, 0 to 2^63 - 1, leaves the top 16-bit
    # piece one bit short). random_ from the minimum to None takes the generator's 64 bits as
    # they come; randint reduces each modulo its range (1.3x the time). torch.compile cannot
    # trace random_: a traced mask is drawn by randint (its top value one short of 2^63).
    pieces = -(-count // _PIECES)
    if torch.compiler.is_compiling():
        draws = torch.randint(
            -(2**63), 2**63 - 1, (pieces,), dtype=torch.int64, generator=generator
        )
    else:
        draws = torch.empty(pieces, dtype=torch.int64).random_(-(2**63), None, generator=generator)
    u = draws.view(torch.int16)[:count].view(shape)  # as signed: u - 2^15
    level = _drop_levels(p) - _LEVELS // 2  # u < level is dropped
    if out is None and dtype != torch.bool:
        out = torch.empty(shape, dtype=dtype)
    keep = u >= level if out is None else torch.ge(u, level, out=out)
    return keep, _scale(p)


def _drop_levels(p: float) -> int:
    return min(round(p * _LEVELS), _LEVELS - 1)


def _scale(p: float) -> float:
    return _LEVELS / (_LEVELS - _drop_levels(p))


@torch.library.custom_op("attnlab::dropout_mask", mutates_args=())
def _dropout_mask_op(x: Tensor, p: float, seed: Tensor) -> Tensor:
    """:func:`dropout_mask` of ``x``'s shape from a generator seeded with ``seed`` (a 0-d
    int64 tensor): a pure function, as ``torch.compile`` takes an operator to be."""
    generator = torch.Generator().manual_seed(int(seed))
    return dropout_mask(x.shape, p, generator=generator)[0]


@_dropout_mask_op.register_fake
def _(x: Tensor, p: float, seed: Tensor) -> Tensor:
    return torch.empty(x.shape, dtype=torch.bool, device=x.device)


def dropout(
    x: Tensor, p: float = 0.5, training: bool = True, *, generator: torch.Generator | None = None
) -> Tensor:
    """``F.dropout(x, p, training)``, with the mask of :func:`dropout_mask` where
    :func:`fast_path` holds (module docstring).

    Args:
        x: any float tensor.
        p: drop probability in ``[0, 1]`` (1 gives zeros, as ``F.dropout``).
        training: apply dropout (else ``x`` is returned as it is).
        generator: the random generator of the mask (default: torch's global CPU generator).

    Shapes:
        - x: any; output: the same.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p: a dropout probability in [0, 1], got {p!r}")
    if not training or p == 0.0:
        return x
    if p == 1.0 or not fast_path(x):
        return F.dropout(x, p, training=True)
    if torch.compiler.is_compiling() and generator is None:
        # To torch.compile, an operator it does not look into (its size may be symbolic) and a
        # pure function of a seed that the graph draws: two sites never share a mask, and a
        # mask recomputed for the backward pass is the forward's.
        seed = torch.randint(0, 2**62, (), dtype=torch.int64)
        keep, scale = torch.ops.attnlab.dropout_mask(x, p, seed), _scale(p)
        # x * keep * scale in one pass. This aten op is dropout's own backward, whose
        # derivative is the same op on the gradient: autograd saves only the boolean mask.
        return torch.ops.aten.native_dropout_backward(x, keep, scale)
    # Eagerly, that op's mixed bool-float product costs about twice a product of one dtype and
    # a scaling (module docstring): the mask is drawn as 0 / 1 in x's dtype, and the scale
    # applied to the product as a Python number (in float32 for bfloat16 x: the scale is not
    # rounded to bfloat16, which would bias every kept value alike). Autograd saves the mask.
    keep, scale = dropout_mask(x.shape, p, generator=generator, dtype=x.dtype)
    return (x * keep).mul_(scale)


class Dropout(nn.Dropout):
    """``nn.Dropout`` with the mask of :func:`dropout` (a drop-in: same arguments, no state).

    Args:
        p: drop probability in ``[0, 1]`` (default 0.5).
        inplace: refused when True (the mask is applied out of place).

    Shapes:
        - input: any; output: the same.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        if inplace:
            raise ValueError("inplace: not supported by attnlab's Dropout; use inplace=False")
        super().__init__(p, inplace=False)

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)
