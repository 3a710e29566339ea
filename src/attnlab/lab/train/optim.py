"""AdamW with decoupled weight decay on weight matrices only.

Biases, normalisation gains and embeddings are excluded from weight decay (as in GPT-2 /
minGPT): decaying a norm's gain or a bias towards 0 has no regularising meaning, and decaying
rare words' embeddings shrinks exactly the rows that see the fewest gradient updates.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["param_groups", "build_optimizer", "NO_DECAY_MODULES"]

#: modules whose parameters are never decayed
NO_DECAY_MODULES: tuple[type[nn.Module], ...] = (
    nn.Embedding,
    nn.EmbeddingBag,
    nn.LayerNorm,
    nn.GroupNorm,
    nn.RMSNorm,
    nn.modules.batchnorm._NormBase,
)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two AdamW parameter groups: ``[decayed, not decayed]`` (empty groups are dropped).

    A parameter is *not* decayed if it has fewer than 2 dimensions (biases, gains), belongs to a
    module in :data:`NO_DECAY_MODULES`, has ``embed`` in its name (free-standing positional
    tables), or is listed by ``model.no_weight_decay()`` (timm's hook: a set of names). A
    parameter shared between modules (tied weights) is placed once, in the no-decay group if
    any owner asks for it. Order follows ``model.named_parameters()``, which keeps optimizer
    state dicts loadable.
    """
    hook = getattr(model, "no_weight_decay", None)
    skip_names = set(hook()) if callable(hook) else set()
    no_decay: set[int] = set()
    for module_name, module in model.named_modules():
        for name, p in module.named_parameters(recurse=False):
            full = f"{module_name}.{name}" if module_name else name
            if (
                p.ndim < 2
                or isinstance(module, NO_DECAY_MODULES)
                or "embed" in full.lower()
                or full in skip_names
            ):
                no_decay.add(id(p))
    decay_params, no_decay_params, seen = [], [], set()
    for p in model.parameters():  # deduplicated, in registration order
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        (no_decay_params if id(p) in no_decay else decay_params).append(p)
    groups = [
        {"params": decay_params, "weight_decay": weight_decay},
        {"params": no_decay_params, "weight_decay": 0.0},
    ]
    return [g for g in groups if g["params"]]


def build_optimizer(
    model: nn.Module,
    *,
    lr: float,
    weight_decay: float,
    betas: tuple[float, float] = (0.9, 0.999),
) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups`, with the fused kernel where every parameter supports it.

    The fused (single-kernel) update matters on CPU: a tagger's word embedding holds most of its
    parameters, and the per-tensor loop of the default implementation spent a third of each
    training step there.
    """
    groups = param_groups(model, weight_decay)
    fused = all(p.is_floating_point() and p.device.type in ("cpu", "cuda")
                for g in groups for p in g["params"])  # fmt: skip
    return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=fused or None)
