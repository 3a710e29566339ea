r"""FLOATER: positions as the trajectory of a learned ODE (Liu, Yu, Dhillon & Hsieh 2020,
"Learning to Encode Position for Transformer with Continuous Dynamical Model", ICML 2020,
arXiv:2003.09229).

Legend: ``b`` batch, ``n`` positions, ``c`` model width (``dim``), ``a`` hidden width of the
dynamics network.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .base import TableEncoding

__all__ = ["Floater"]


class Floater(TableEncoding):
    r"""Position encodings from a continuous dynamical system, added to the input
    (Liu et al. 2020).

    The encoding is the solution of a learned initial value problem, read at evenly spaced
    times :math:`t_k = k \Delta`:

    .. math::
        \frac{dp}{dt} = h(t, p(t); \theta), \qquad p(0) = p_0, \qquad
        x_k \leftarrow x_k + p(k \Delta),

    with the small network :math:`h(t, p) = W_2 \tanh(W_1 p + w_t t + b_1) + b_2` and
    :math:`p_0 = 0` (or learned). The ODE is integrated in pure torch with the classical
    fixed-step fourth-order Runge-Kutta method (no ``torchdiffeq``): ``substeps`` steps of size
    :math:`\Delta / \text{substeps}` between consecutive positions, local error
    :math:`O((\Delta / \text{substeps})^5)`. The paper solves the same ODE with an adaptive
    black-box solver; a fixed step makes the cost predictable and the result exactly
    reproducible across sequence lengths (position ``k`` gets the same vector whatever the
    length, so incremental decoding matches a full pass).

    Cost: one integration per forward from 0 to the last needed position, i.e.
    ``4 * substeps * (offset + n - 1)`` evaluations of ``h`` on a single ``(c,)`` vector,
    independent of the batch, sequential in the position. Without gradients (evaluation,
    decoding) the trajectory is cached and extended from its end, so decoding one token at a
    time costs one integration step per token; the cache is dropped when a parameter changes.
    Integration runs outside autocast, in the parameters' dtype; the result is cast to ``x``'s.

    Passing one ``Floater`` to every layer's ``MultiHeadAttention`` reproduces the paper's
    injection of positions into every block with shared dynamics.

    Extrapolates: any position is reached by integrating further (``max_len`` can cap it).
    Far positions drift as the dynamics dictate; nothing bounds their norm.

    Args:
        dim: model width ``c`` (the ODE's state size).
        hidden: width ``a`` of the dynamics network (default ``dim``).
        delta: time :math:`\Delta` between consecutive positions (default 0.1).
        substeps: Runge-Kutta steps per position (default 1: step size ``delta``).
        learn_initial: learn :math:`p_0` (starting at zero) instead of fixing it at zero.
        max_len: refuse sequences longer than this (default None: any length).

    Shapes:
        - x: ``(b, n, dim)``; output ``(b, n, dim)``, positions ``offset .. offset + n - 1``.
        - :meth:`table`: ``(n, dim)``.
    """

    acts_on = "input"

    def __init__(
        self,
        dim: int,
        *,
        hidden: int | None = None,
        delta: float = 0.1,
        substeps: int = 1,
        learn_initial: bool = False,
        max_len: int | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        hidden = dim if hidden is None else hidden
        if not isinstance(hidden, int) or hidden <= 0:
            raise ValueError(f"hidden must be a positive int, got {hidden!r}")
        if not (delta > 0 and math.isfinite(delta)):
            raise ValueError(f"delta must be a positive number, got {delta!r}")
        if not isinstance(substeps, int) or substeps < 1:
            raise ValueError(f"substeps must be a positive int, got {substeps!r}")
        if max_len is not None and (not isinstance(max_len, int) or max_len <= 0):
            raise ValueError(f"max_len must be a positive int or None, got {max_len!r}")
        self.dim, self.hidden, self.delta, self.substeps = dim, hidden, float(delta), substeps
        self.max_len = max_len
        self.inp = nn.Linear(dim, hidden)  # W_1 p + b_1
        bound = 1.0 / math.sqrt(dim)
        self.time = nn.Parameter(torch.empty(hidden).uniform_(-bound, bound))  # w_t
        self.out = nn.Linear(hidden, dim)  # W_2 (.) + b_2
        if learn_initial:
            self.p0 = nn.Parameter(torch.zeros(dim))
        else:
            self.register_buffer("p0", torch.zeros(dim), persistent=False)
        self._cache: tuple | None = None  # (key, trajectory (n, c)) of a no-grad integration

    def dynamics(self, t: float, p: Tensor) -> Tensor:
        """:math:`h(t, p)` for a state ``p (..., c)`` at time ``t``."""
        return self.out(torch.tanh(self.inp(p) + t * self.time))

    def _step(self, t: float, p: Tensor, step: float) -> Tensor:
        """One classical Runge-Kutta (RK4) step from ``(t, p)``."""
        k1 = self.dynamics(t, p)
        k2 = self.dynamics(t + step / 2, p + (step / 2) * k1)
        k3 = self.dynamics(t + step / 2, p + (step / 2) * k2)
        k4 = self.dynamics(t + step, p + step * k3)
        return p + (step / 6) * (k1 + 2 * k2 + 2 * k3 + k4)

    def _extend(self, start: Tensor, first: int, count: int) -> list[Tensor]:
        """States at positions ``first + 1 .. first + count``, integrating from ``start``."""
        step = self.delta / self.substeps
        p, out = start, []
        for k in range(first, first + count):
            for s in range(self.substeps):
                p = self._step((k * self.substeps + s) * step, p, step)
            out.append(p)
        return out

    def table(self, n: int) -> Tensor:
        """:math:`p(k \\Delta)` for positions ``k = 0 .. n - 1``, shape ``(n, c)``."""
        p0 = self.p0.to(self.inp.weight.dtype)
        device = p0.device.type
        with torch.autocast(device, enabled=False):
            if torch.is_grad_enabled() and any(t.requires_grad for t in self.parameters()):
                self._cache = None  # training: integrate afresh, through autograd
                return torch.stack([p0, *self._extend(p0, 0, n - 1)])  # (n, c)
            key = self._key()
            if self._cache is None or self._cache[0] != key:
                self._cache = (key, p0[None])
            traj = self._cache[1]
            if traj.shape[0] < n:  # continue from the cached end
                new = self._extend(traj[-1], traj.shape[0] - 1, n - traj.shape[0])
                traj = torch.cat([traj, torch.stack(new)])
                self._cache = (key, traj)
            return traj[:n]

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, hidden={self.hidden}, delta={self.delta:g}, "
            f"substeps={self.substeps}, max_len={self.max_len}"
        )
