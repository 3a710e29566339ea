"""Learning-rate schedule: linear warm-up, then cosine / linear decay or constant.

With ``W`` warm-up steps, ``T`` total steps, ``r`` = ``min_lr_ratio`` and ``s`` the number of
optimizer steps taken so far, the multiplier of the peak learning rate is

.. math::

    m(s) = \\begin{cases}
        (s + 1) / W & s < W \\\\
        r + (1 - r) \\cdot \\tfrac12 (1 + \\cos \\pi p) & \\text{cosine} \\\\
        r + (1 - r) (1 - p) & \\text{linear} \\\\
        1 & \\text{constant}
    \\end{cases}
    \\qquad p = \\min\\!\\left(1, \\frac{s - W}{\\max(1, T - W)}\\right)

(cosine decay: Loshchilov & Hutter, 2017, "SGDR"; warm-up: Goyal et al., 2017).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

__all__ = ["WarmupDecay", "build_scheduler"]


@dataclass
class WarmupDecay:
    """The multiplier ``m(s)`` above, as a picklable callable (its fields go into the
    scheduler's ``state_dict``).

    Args:
        total_steps: ``T``, optimizer steps of the whole run.
        warmup_steps: ``W``.
        schedule: ``"cosine"``, ``"linear"`` or ``"constant"``.
        min_ratio: ``r``, the final multiplier of a decaying schedule.
    """

    total_steps: int
    warmup_steps: int = 0
    schedule: str = "cosine"
    min_ratio: float = 0.0

    def __post_init__(self) -> None:
        if self.schedule not in ("cosine", "linear", "constant"):
            raise ValueError(
                f"unknown schedule {self.schedule!r}; valid choices: constant, cosine, linear"
            )

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return 1.0
        progress = min(
            1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps)
        )
        if self.schedule == "cosine":
            decay = 0.5 * (1.0 + math.cos(math.pi * progress))
        else:
            decay = 1.0 - progress
        return self.min_ratio + (1.0 - self.min_ratio) * decay


def build_scheduler(
    optimizer: Optimizer,
    *,
    total_steps: int,
    warmup_steps: int = 0,
    warmup_fraction: float = 0.0,
    schedule: str = "cosine",
    min_lr_ratio: float = 0.0,
) -> LambdaLR:
    """A :class:`LambdaLR` over :class:`WarmupDecay`; ``warmup_fraction`` of ``total_steps``
    (rounded) is used when ``warmup_steps`` is 0."""
    if not warmup_steps and warmup_fraction:
        warmup_steps = round(warmup_fraction * total_steps)
    return LambdaLR(optimizer, WarmupDecay(total_steps, warmup_steps, schedule, min_lr_ratio))
