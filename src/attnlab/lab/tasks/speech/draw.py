"""The picture of ``attnlab show`` for speech: the log-mel spectrogram above the attention of
every layer and head (queries down, keys across) and the pooling weights, on one time axis.

Every panel's x axis is time in seconds (a frame at its start, after subsampling at the
start of its receptive field), so a column of attention lines up with the sound it reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["draw_speech"]


@torch.no_grad()
def draw_speech(
    task: Any, model: nn.Module, utterance: Any, out: str | Path, *, title: str = ""
) -> Path:
    """Draw ``utterance`` and ``model``'s attention on it into the PNG ``out``.

    Raises:
        ValueError: the model has no attention weights (a CNN or BiLSTM encoder).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model.eval()
    feats, lengths = task.raw_features([utterance.audio])  # (1, n, f): what the ear sees
    result = model(task.encode_inputs([utterance]), need_weights=True)
    if not result.weights:
        raise ValueError(
            f"this model's encoder ({type(model.encoder).__name__}) has no attention weights to show"
        )
    fe = task.frontend()
    hop = fe.hop / task.sample_rate
    n = int(lengths[0])
    seconds = n * hop
    step = 4 * hop if task.model_cfg.frontend.subsample == "conv2d" else hop
    panels = [(f"layer {l + 1} head {h + 1}", w[0, h]) for l, w in enumerate(result.weights)
              for h in range(w.shape[1])]  # fmt: skip
    pool = result.head_weights
    rows = 1 + len(panels) + (1 if pool is not None and pool.dim() == 2 else 0)
    fig, axes = plt.subplots(rows, 1, figsize=(7, 1.7 * rows + 0.6), sharex=True, squeeze=False)
    axes = axes[:, 0]
    axes[0].imshow(feats[0, :n].T.float().numpy(), origin="lower", aspect="auto", cmap="magma",
                   extent=(0, seconds, 0, feats.shape[-1]))  # fmt: skip
    axes[0].set_ylabel("mel bin")
    axes[0].set_title(title or Path(utterance.name).name, fontsize=9)
    for ax, (label, w) in zip(axes[1:], panels):
        m = w.shape[-1]
        ax.imshow(w.float().numpy(), origin="upper", aspect="auto", cmap="viridis",
                  extent=(0, m * step, m * step, 0), vmin=0)  # fmt: skip
        ax.set_ylabel("query (s)", fontsize=7)
        ax.set_title(label, fontsize=8, loc="left")
    if rows > 1 + len(panels):
        wp = pool[0].float()
        t = torch.arange(wp.shape[0]) * step
        axes[-1].bar(t.numpy(), wp.numpy(), width=step, align="edge")
        axes[-1].set_ylabel("pooling", fontsize=7)
    axes[-1].set_xlabel("time (s)")
    axes[-1].set_xlim(0, seconds)
    fig.tight_layout()
    out = Path(out)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
