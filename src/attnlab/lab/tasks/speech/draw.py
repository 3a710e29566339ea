"""The picture of ``attnlab show`` for speech: the log-mel spectrogram above the attention of
every layer and head (queries down, keys across) and the pooling weights, on one time axis.

Every panel's x axis is time in seconds (a frame at its start, after subsampling at the
start of its receptive field), so a column of attention lines up with the sound it reads.

What the reader needs besides: the attention panels share one colour scale (one colour bar),
the spectrogram has its own; the title's second line is the prediction (the label and its
probability, or for frame labels the phones predicted, repeats merged). Two greys mean
"nothing here", never weight 0: pairs the encoder's mask forbids (a window ``|i - j| > w``, a
causal ``j > i``) are hatched; with Conv2d x4 subsampling the last frames have no encoder
frame of their own (the ``m`` outputs start at frames ``0, 4, ..., 4(m - 1)``, ``m =
((n - 1) // 2 - 1) // 2``), so the attention and pooling panels end at frame ``4m`` and the
rest of the time axis is filled plain grey. The legend names both.

Legend: ``n`` feature frames, ``m`` encoder frames (after subsampling), ``L`` labels.
"""

from __future__ import annotations

import textwrap
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["draw_speech", "speech_figure", "prediction_line", "masked_pairs"]

#: the fill of the time after the last encoder frame (plain; masked pairs are hatched)
NO_FRAME_GREY = "0.85"


def prediction_line(task: Any, logits: Tensor, gold: Any = None) -> str:
    """What ``logits`` predict, for a title: ``predicted 7 (p 0.83; gold 7)`` for one label
    per utterance (logits ``(L,)``), ``predicted phones: pau hh ax ... (mean p 0.61)`` for one
    per frame (``(m, L)``: consecutive repeats merged, shortened to one line)."""
    probs = logits.float().softmax(-1)
    if probs.dim() == 1:
        k = int(probs.argmax())
        extra = f"; gold {task.labels[int(gold)]}" if isinstance(gold, int) else ""
        return f"predicted {task.labels[k]} (p {float(probs[k]):.2f}{extra})"
    top = probs.max(-1)  # (m,)
    labels = [task.labels[int(i)] for i, _ in groupby(top.indices.tolist())]
    line = textwrap.shorten(" ".join(labels), 90, placeholder=" …")
    return f"predicted phones: {line} (mean p {float(top.values.mean()):.2f})"


def masked_pairs(model: nn.Module, m: int) -> Tensor | None:
    """``(m, m)`` True where the encoder's window / causal mask forbids query ``i`` to attend
    to key ``j`` (None: every pair is scored)."""
    structure = getattr(model.encoder, "attention_mask", None)
    mask = structure() if callable(structure) else None
    if mask is None:
        return None
    return ~mask.dense(1, 1, m, m).expand(1, 1, m, m)[0, 0]


def _why_masked(model: nn.Module, step: float) -> str:
    """The legend of masked pairs: which rule of the encoder masks them (``step``: seconds
    per encoder frame)."""
    window, causal = getattr(model.encoder, "window", None), getattr(model.encoder, "causal", False)
    why = [] if window is None else [f"|i - j| > {window} frames = {1000 * window * step:.0f} ms"]
    why += ["j > i"] if causal else []
    return f"masked pair ({' or '.join(why)})" if why else "masked pair"


def draw_speech(
    task: Any, model: nn.Module, utterance: Any, out: str | Path, *, title: str = ""
) -> Path:
    """Draw :func:`speech_figure` of ``utterance`` into the PNG ``out``; return its path."""
    out = Path(out)
    speech_figure(task, model, utterance, title=title).savefig(out, dpi=110)
    return out


@torch.no_grad()
def speech_figure(task: Any, model: nn.Module, utterance: Any, *, title: str = "") -> Figure:
    """``utterance`` and ``model``'s attention on it (module docstring), as a figure.

    Raises:
        ValueError: the model has no attention weights (a CNN or BiLSTM encoder).
    """
    import matplotlib
    import numpy as np
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from attnlab.lab.viz import hatch_under, masked_cmap, masked_handle

    matplotlib.use("Agg", force=False)
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
    m = panels[0][1].shape[-1]  # encoder frames
    end = m * step  # the encoder's frames end here; later frames have no output of their own
    masked = masked_pairs(model, m)  # (m, m) or None
    allowed = [w[~masked] if masked is not None else w.flatten() for _, w in panels]
    norm = Normalize(vmin=0.0, vmax=max(max(float(a.max()) for a in allowed), 1e-6))
    pool = result.head_weights
    rows = 1 + len(panels) + (1 if pool is not None and pool.dim() == 2 else 0)
    fig = Figure(figsize=(7.6, 1.7 * rows + 1.2), layout="constrained")
    grid = fig.add_gridspec(rows, 2, width_ratios=[1, 0.025])
    axes = [fig.add_subplot(grid[0, 0])]
    axes += [fig.add_subplot(grid[r, 0], sharex=axes[0]) for r in range(1, rows)]
    spec = axes[0].imshow(feats[0, :n].T.float().numpy(), origin="lower", aspect="auto",
                          cmap="magma", extent=(0, seconds, 0, feats.shape[-1]))  # fmt: skip
    axes[0].set_ylabel("mel bin" if not task.model_cfg.frontend.mfcc else "MFCC")
    bar = fig.colorbar(spec, cax=fig.add_subplot(grid[0, 1]))
    bar.set_label("log power" if not task.model_cfg.frontend.mfcc else "value", fontsize=7)
    gold = utterance.label if task.output == "sequence" else None
    fig.suptitle(f"{title or Path(utterance.name).name}\n"
                 f"{prediction_line(task, result.logits[0], gold)}", fontsize=9)  # fmt: skip
    for ax, (label, w) in zip(axes[1:], panels):
        shown = np.ma.masked_array(w.float().numpy(),
                                   mask=masked.numpy() if masked is not None else False)  # fmt: skip
        image = ax.imshow(shown, origin="upper", aspect="auto", cmap=masked_cmap(), norm=norm,
                          extent=(0, end, end, 0), interpolation="nearest")  # fmt: skip
        if masked is not None and masked.any():
            hatch_under(ax, (0, end, end, 0))
        ax.set_ylabel("query (s)", fontsize=7)
        ax.set_title(label, fontsize=8, loc="left")
    bar = fig.colorbar(image, cax=fig.add_subplot(grid[1 : 1 + len(panels), 1]))
    bar.set_label("attention weight (every head)", fontsize=7)
    if rows > 1 + len(panels):
        wp = pool[0].float()
        t = torch.arange(wp.shape[0]) * step
        axes[-1].bar(t.numpy(), wp.numpy(), width=step, align="edge")
        axes[-1].set_ylabel("pooling\nweight", fontsize=7)
    handles = []
    if end < seconds:  # Conv2d x4: the last frames have no encoder frame
        for ax in axes[1:]:
            ax.axvspan(end, seconds, facecolor=NO_FRAME_GREY, edgecolor="none", zorder=-2)
        handles.append(Patch(facecolor=NO_FRAME_GREY, label=f"no encoder frame (Conv2d x4 "
                             f"subsampling: {m} outputs, 1 per 4 frames)"))  # fmt: skip
    if masked is not None and masked.any():
        handles.append(masked_handle(_why_masked(model, step)))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=7)
    axes[-1].set_xlabel("time (s)  (attention panels: key time)")
    axes[-1].set_xlim(0, seconds)
    for ax in axes[:-1]:
        ax.tick_params(labelbottom=False)
    return fig
