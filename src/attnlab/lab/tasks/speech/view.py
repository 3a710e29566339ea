"""``show --html`` for speech: the log-mel spectrogram on a time axis in seconds, the chosen
frame's attention over time, the encoder's window, and the pooling attention
(:class:`attnlab.viz.AttentionView`).

Legend: ``n`` feature frames, ``m`` encoder frames (after subsampling), ``f`` features.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from attnlab.viz import Attention, AttentionView, Modality

from .draw import masked_pairs, prediction_line

__all__ = ["speech_view"]


@torch.no_grad()
def speech_view(task: Any, model: nn.Module, utterance: Any, *, title: str = "") -> AttentionView:
    """The page's data for ``utterance`` (a :class:`~.base.Utterance`).

    Raises:
        ValueError: the model has no attention weights (a CNN or BiLSTM encoder).
    """
    model.eval()
    feats, lengths = task.raw_features([utterance.audio])  # (1, n, f)
    result = model(task.encode_inputs([utterance]), need_weights=True)
    if not result.weights:
        raise ValueError(
            f"this model's encoder ({type(model.encoder).__name__}) has no attention weights to show"
        )
    hop = task.frontend().hop / task.sample_rate
    step = 4 * hop if task.model_cfg.frontend.subsample == "conv2d" else hop
    weights = [w[0] for w in result.weights]  # per layer (h, m, m)
    m = weights[0].shape[-1]
    times = [f"{p * step:.2f} s" for p in range(m)]
    masked = masked_pairs(model, m)
    families = [Attention("self-attention", weights, times, masked=masked)]
    if result.head_weights is not None and result.head_weights.dim() == 2:
        families.append(Attention("pooling attention", [result.head_weights[:1, None, :]],
                                  ["pooled"], times))  # fmt: skip
    spectrogram = feats[0, : int(lengths[0])].T.float().numpy()  # (f, n)
    lo, hi = np.percentile(spectrogram, [1, 99.5])
    scaled = np.clip((spectrogram - lo) / max(hi - lo, 1e-6) * 255, 0, 255).astype(np.uint8)
    window = getattr(model.encoder, "window", None)
    causal = bool(getattr(model.encoder, "causal", False))
    notes = [f"frames every {1000 * step:.0f} ms (spectrogram hop {1000 * hop:.0f} ms)"]
    if window is not None:
        notes.append(f"truncated self-attention: each frame sees ±{window} frames "
                     f"({1000 * window * step:.0f} ms){', past only' if causal else ''}")  # fmt: skip
    gold = utterance.label if task.output == "sequence" else None
    return AttentionView(
        families,
        title=title or utterance.name,
        prediction=prediction_line(task, result.logits[0], gold),
        modality=Modality(
            "speech",
            {
                "hop_s": hop,
                "position_s": step,
                "db_range": [float(lo), float(hi)],
                "window": None if window is None else [int(window), 0 if causal else int(window)],
            },
            {"spectrogram": scaled},
        ),  # fmt: skip
        notes=notes,
    )
