"""Measurements a report takes of a finished run besides its scores: how different its heads'
attention maps are, on fixed probe sentences.

The probes are everyday sentences written for this report (the running example first), not
drawn from any split, so no run has trained or been chosen on them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

PROBES = [
    "I saw a saw .",
    "She saw the man with the saw in the shed .",
    "They can fish , but can they can fish ?",
    "The old man the boats while the young sleep .",
    "Time flies like an arrow ; fruit flies like a banana .",
    "He will book a table after he reads the book .",
    "We watch the watch that the shop sells .",
    "The light was too light to read by .",
    "Please record the record before the band leaves .",
    "The wind made it hard to wind the rope .",
    "Do not desert your friends in the desert .",
    "The farm was used to produce produce .",
]

__all__ = ["PROBES", "head_divergence"]


def _js(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence (nats) between the rows of ``p`` and ``q`` (each sums to 1)."""
    m = 0.5 * (p + q)

    def kl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(a > 0, a * np.log(a / np.maximum(b, 1e-300)), 0.0).sum(-1)

    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


@torch.no_grad()
def head_divergence(run: str | Path) -> float | None:
    """Mean pairwise Jensen-Shannon divergence between the heads' attention rows of ``run``,
    over every layer and probe sentence (None: a model with fewer than 2 heads or no
    attention)."""
    from attnlab.lab.task_flags import commands_of
    from attnlab.lab.train import load_for_inference

    task, model, _ = load_for_inference(str(run))
    task = commands_of(task, "show")
    values = []
    for sentence in PROBES:
        try:
            weights = task.attention_map(model, task.command_inputs([sentence], {})[0]).weights
        except ValueError:  # no attention (fc, cnn, rnn)
            return None
        for w in weights:  # (h, n, n)
            w = w.double().numpy()
            h = w.shape[0]
            values += [_js(w[a], w[b]).mean() for a in range(h) for b in range(a + 1, h)]
    return float(np.mean(values)) if values else None
