"""BERT's masking of a sentence for masked-language-model training (Devlin et al. 2019, 3.1).

Of a sentence's ``n`` words, ``max(1, round(rate * n))`` are chosen uniformly without
replacement (Google's ``create_masked_lm_predictions``; at most the words that may be chosen).
The model must predict every chosen word; each chosen word is shown as ``[MASK]`` with
probability ``mask`` (0.8), as a uniformly random word with probability ``random`` (0.1), and
unchanged otherwise (0.1), so that the model cannot rely on seeing ``[MASK]`` at the positions
it is scored on, nor trust every word it sees.

Masking is seeded by the caller's generator: one generator per sentence, seeded from the
sentence's key, makes a sentence's masking independent of the batch it lands in (the dev set is
masked the same way at every evaluation, whatever the batch size).

Legend: ``n`` words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from attnlab.lab.tasks.base import IGNORE_INDEX

__all__ = ["IGNORE", "MaskingRule", "Masked", "mask_ids"]

#: label of the positions that are not predicted (``F.cross_entropy``'s ``ignore_index``)
IGNORE = IGNORE_INDEX


@dataclass(frozen=True)
class MaskingRule:
    """BERT's rates.

    Args:
        rate: fraction of the words chosen for prediction.
        mask: of the chosen, the fraction shown as ``[MASK]``.
        random: of the chosen, the fraction shown as a random word (the rest: unchanged).
    """

    rate: float = 0.15
    mask: float = 0.8
    random: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 < self.rate <= 1.0:
            raise ValueError(f"mask rate must be in (0, 1], got {self.rate}")
        if self.mask < 0 or self.random < 0 or self.mask + self.random > 1.0:
            raise ValueError(
                f"mask ({self.mask}) and random ({self.random}) fractions must be >= 0 and sum "
                "to at most 1 (the rest stays unchanged)"
            )


class Masked(NamedTuple):
    inputs: Tensor  # (n,) the ids the model sees
    labels: Tensor  # (n,) the original id at chosen positions, IGNORE elsewhere


def mask_ids(
    ids: Tensor,
    *,
    generator: torch.Generator,
    mask_id: int,
    random_ids: tuple[int, int],
    rule: MaskingRule = MaskingRule(),
    choosable: Tensor | None = None,
) -> Masked:
    """Mask one sentence's word ids (see the module docstring).

    Args:
        ids: the sentence's word ids ``(n,)``.
        generator: the source of randomness (seed it per sentence).
        mask_id: the id of ``[MASK]``.
        random_ids: ``[low, high)``: the ids a random replacement is drawn from (the words,
            not the special tokens).
        rule: the rates.
        choosable: ``(n,)`` bool, the positions that may be chosen (e.g. not ``<unk>``: a word
            the vocabulary does not hold cannot be predicted); default all.

    Shapes:
        - ids, choosable: ``(n,)``; inputs, labels: ``(n,)``
    """
    n = ids.numel()
    candidates = torch.arange(n) if choosable is None else choosable.nonzero().flatten()
    k = min(len(candidates), max(1, round(rule.rate * n))) if n else 0
    order = torch.randperm(len(candidates), generator=generator)
    chosen = candidates[order[:k]]  # (k,)
    labels = torch.full_like(ids, IGNORE)
    labels[chosen] = ids[chosen]
    u = torch.rand(k, generator=generator)  # (k,) which of the three each chosen word gets
    low, high = random_ids
    replacement = torch.randint(low, high, (k,), generator=generator)
    inputs = ids.clone()
    shown = torch.where(u < rule.mask, torch.full_like(replacement, mask_id), ids[chosen])
    shown = torch.where((u >= rule.mask) & (u < rule.mask + rule.random), replacement, shown)
    inputs[chosen] = shown
    return Masked(inputs, labels)
