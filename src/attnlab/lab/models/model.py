"""``SequenceModel``: input encoder -> sequence encoder -> task head.

The three parts are injected (see :func:`attnlab.lab.models.build_model` for building them from a
config); a ``Linear`` bridges any width mismatch between them. The same model class serves
tagging (N -> N) and classification (N -> 1); sequence to sequence (N -> M) is an
encoder-decoder of :mod:`attnlab.lab.models.seq2seq`.

Legend: ``b`` batch, ``n`` positions, ``L`` labels, ``h`` heads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple, overload

import torch
from torch import Tensor, nn

from attnlab.lab.models.encoders import SequenceEncoder, valid_positions

__all__ = ["SequenceModel", "ModelOutput"]


class ModelOutput(NamedTuple):
    logits: Tensor  # (b, n, L) token head; (b, L) sequence head
    weights: list[Tensor] | None  # encoder attention per layer (b, h, i, j); None w/o attention
    head_weights: Tensor | None  # attention pooling (b, n); else None


def _bridge(width: int, dim: int) -> nn.Module:
    return nn.Identity() if width == dim else nn.Linear(width, dim)


class SequenceModel(nn.Module):
    """Compose an input encoder, a sequence encoder and a head.

    Args:
        inputs: maps the batch to vectors ``(b, n, inputs.out_dim)``
            (:mod:`attnlab.lab.models.inputs`).
        encoder: a :class:`~attnlab.lab.models.encoders.SequenceEncoder`.
        head: a :class:`~attnlab.lab.models.heads.TokenHead` or ``SequenceHead`` (anything with
            ``dim`` called as ``head(hidden, lengths)``).

    Batch (see :mod:`attnlab.lab.models.batch`): ``"tokens"`` ``(b, n)``, ``"lengths"`` ``(b,)``,
    optional ``"chars"`` ``(b, n, c)`` and ``"shapes"`` ``(b, n)``. Other keys (``"labels"``)
    are ignored.

    ``model(batch)`` returns the logits; ``model(batch, need_weights=True)`` returns a
    :class:`ModelOutput` with the encoder's per-layer attention weights (for visualisation).
    """

    def __init__(self, inputs: nn.Module, encoder: SequenceEncoder, head: nn.Module) -> None:
        super().__init__()
        self.inputs, self.encoder, self.head = inputs, encoder, head
        self.in_proj = _bridge(inputs.out_dim, encoder.dim)
        self.out_proj = _bridge(encoder.out_dim, head.dim)

    @overload
    def forward(
        self, batch: Mapping[str, Tensor], *, need_weights: Literal[False] = False
    ) -> Tensor: ...

    @overload
    def forward(
        self, batch: Mapping[str, Tensor], *, need_weights: Literal[True]
    ) -> ModelOutput: ...

    def forward(
        self, batch: Mapping[str, Tensor], *, need_weights: bool = False
    ) -> Tensor | ModelOutput:
        memory, lengths, weights = self.encode(batch, need_weights=need_weights)
        logits, head_weights = self.head(memory, lengths)
        return ModelOutput(logits, weights, head_weights) if need_weights else logits

    def encode(
        self, batch: Mapping[str, Tensor], *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor, list[Tensor] | None]:
        """The encoder's output ``(b, n, head.dim)``, the lengths ``(b,)`` and the weights."""
        for key in ("tokens", "lengths"):
            if key not in batch:
                raise ValueError(f"the batch needs {key!r}; got keys {sorted(batch)}")
        lengths = batch["lengths"]
        x = self.in_proj(self.inputs(batch))  # (b, n, encoder.dim)
        hidden, weights = self.encoder(x, lengths, need_weights=need_weights)
        lengths = lengths.to(device=hidden.device, dtype=torch.long)
        if not isinstance(self.out_proj, nn.Identity):
            valid = valid_positions(lengths, hidden.shape[1]).unsqueeze(-1)  # (b, n, 1)
            hidden = self.out_proj(hidden) * valid  # keep padded positions at zero
        return hidden, lengths, weights  # (b, n, head.dim)
