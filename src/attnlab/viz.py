"""Attention as pictures: one heatmap per layer and head.

A plotting module with no knowledge of tasks: :meth:`attnlab.tasks.Task.draw` calls
:func:`plot_attention` with the weights and labels of its ``attention_map``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from torch import Tensor


def plot_attention(
    weights: Sequence[Tensor],
    tokens: Sequence[str],
    out: str | Path,
    *,
    title: str = "",
    query_tokens: Sequence[str] | None = None,
) -> Path:
    """Write a grid of attention heatmaps (rows: layers, columns: heads) to ``out`` (PNG).

    Args:
        weights: per layer, ``(h, i, j)`` attention weights of one sequence.
        tokens: the ``j`` key tokens (and queries, unless ``query_tokens`` is given).
        out: the PNG path (parent directories are created).
        title: figure title.
        query_tokens: the ``i`` query tokens, if they differ from the keys.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not weights:
        raise ValueError("plot_attention: no attention weights to plot (is the encoder attention?)")
    query_tokens = list(query_tokens or tokens)
    layers, heads = len(weights), weights[0].shape[0]
    side = 0.35 * max(len(tokens), 4) + 1.0
    fig, axes = plt.subplots(layers, heads, figsize=(side * heads, side * layers), squeeze=False)
    for layer, w in enumerate(weights):
        w = w.detach().float().cpu()
        for head in range(heads):
            ax = axes[layer][head]
            ax.imshow(
                w[head].numpy(), cmap="viridis", vmin=0.0, vmax=max(float(w[head].max()), 1e-6)
            )
            ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
            ax.set_yticks(range(len(query_tokens)), query_tokens, fontsize=8)
            ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=9)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def attention_of(model, task, tokens: Sequence[str]) -> list[Tensor]:
    """Per-layer ``(h, n, n)`` attention weights of ``model`` on one token list: the weights
    of the task's :meth:`~attnlab.tasks.Task.attention_map`."""
    return task.attention_map(model, list(tokens)).weights
