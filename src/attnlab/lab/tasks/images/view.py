"""``show --html`` for images: the image with its token grid (pixels, patches or CNN cells);
hovering a cell overlays its attention on the image, rollout included
(:class:`attnlab.viz.AttentionView`).

Legend: ``h`` heads, ``n`` tokens, ``H`` / ``W`` image rows / columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from attnlab.viz import Attention, AttentionView, Modality

from .draw import _encoder_mask, _window_of, attention_output

__all__ = ["image_view"]


def image_view(task: Any, model: nn.Module, input: Any, *, title: str = "") -> AttentionView:
    """The page's data for one image (an :class:`~.task.ImageExample`).

    Raises:
        ValueError: the model has no attention (the ``cnn`` encoder).
    """
    res = attention_output(task, model, input)
    weights = [w[0] for w in res.weights]  # per layer (h, n, n)
    n = weights[0].shape[-1]
    rows, cols = res.grid
    labels = [f"CLS{k}" if res.prefix > 1 else "CLS" for k in range(res.prefix)]
    labels += [f"({r},{c})" for r in range(rows) for c in range(cols)]
    mask = _encoder_mask(model)
    masked = None if mask is None else ~mask.dense(1, 1, n, n).expand(1, 1, n, n)[0, 0]
    probs = res.logits[0].float().softmax(-1)
    k = int(probs.argmax())
    gold = f", gold {task.classes[input.label]}" if input.label is not None else ""
    pixels = input.image.detach().cpu()
    pixels = pixels.float() if pixels.dtype.is_floating_point else pixels
    array = pixels.numpy()
    if array.dtype != np.uint8:
        array = np.clip(array * (255.0 if array.max() <= 1.0 else 1.0), 0, 255).astype(np.uint8)
    if array.ndim == 3 and array.shape[0] in (1, 3):  # (c, H, W) -> (H, W, c)
        array = array.transpose(1, 2, 0)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[..., 0]
    notes = [f"{rows} x {cols} token grid over {array.shape[0]} x {array.shape[1]} pixels"]
    if masked is not None:
        notes.append(f"each token attends within a window of radius {_window_of(model)} cells")
    return AttentionView(
        Attention("self-attention", weights, labels, masked=masked),
        title=title or str(input.name),
        prediction=f"predicted {task.classes[k]} (p {float(probs[k]):.2f}{gold})",
        modality=Modality(
            "image",
            {"grid": [rows, cols], "prefix": int(res.prefix)},
            {"pixels": np.ascontiguousarray(array)},
        ),  # fmt: skip
        notes=notes,
    )
