"""An ensemble: several trained models of one task, their class probabilities averaged.

For members ``f_1 .. f_K`` that return logits over their last dimension (a label per sequence
``(b, L)`` or per vector ``(b, n, L)``), the ensemble returns

    log p(y | x) = log( (1/K) * sum_k softmax(f_k(x))_y )
                 = logsumexp_k( log_softmax(f_k(x))_y ) - log K,

computed in log space (no underflow for confident members). Its output is a log-probability
tensor of the members' shape, so anything that reads logits reads it unchanged: ``argmax`` picks
the class the averaged probabilities favour, and ``cross_entropy`` (a ``log_softmax`` of
log-probabilities that already normalise is the identity) gives the ensemble's loss.

Averaging probabilities, not logits, is the usual choice (Lakshminarayanan et al. 2017): a
member that is confidently wrong cannot outvote the others by the size of its logits alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["Ensemble"]


class Ensemble(nn.Module):
    """``log(mean_k softmax(member_k(*args, **kwargs)))`` over ``members`` (see the module).

    Args:
        members: the trained models, each called with the same arguments; at least one.

    Raises:
        ValueError: no members.
        TypeError (on call): a member returned something other than a logits tensor (e.g. a
            ``ModelOutput`` asked for with ``need_weights=True``).
    """

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        if len(members) == 0:
            raise ValueError("members: an ensemble needs at least one model, got none")
        self.members = nn.ModuleList(members)

    def forward(self, *args: Any, **kwargs: Any) -> Tensor:
        log_probs = []
        for k, member in enumerate(self.members):
            logits = member(*args, **kwargs)
            if not isinstance(logits, Tensor):
                raise TypeError(
                    f"Ensemble averages logits tensors; member {k} returned {type(logits).__name__}"
                )
            log_probs.append(logits.float().log_softmax(-1))
        return torch.logsumexp(torch.stack(log_probs), dim=0) - math.log(len(log_probs))

    def extra_repr(self) -> str:
        return f"members={len(self.members)}, probabilities averaged"
