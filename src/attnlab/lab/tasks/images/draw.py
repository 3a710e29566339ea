r"""``show`` for images: the input, one query's attention per head of the last layer overlaid
on it, and the attention rollout across layers.

**Rollout** (Abnar & Zuidema 2020): with each layer's head-averaged attention
:math:`\bar A_\ell` and the residual connection counted as an identity,
:math:`\tilde A_\ell = \tfrac12 (\bar A_\ell + I)`, the flow from input tokens to the outputs
is :math:`R = \tilde A_L \cdots \tilde A_1` (rows renormalised); the query's row of :math:`R`
says how much each input pixel/patch contributes to it through all layers.

Legend: ``h`` heads, ``n`` tokens, ``H`` / ``W`` image rows / columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["attention_rollout", "draw_image_attention", "query_index"]


def attention_rollout(weights: list[Tensor]) -> Tensor:
    """Rollout ``(n, n)`` of per-layer ``(h, n, n)`` attention weights (module docstring)."""
    n = weights[0].shape[-1]
    eye = torch.eye(n, dtype=torch.float64)
    rollout = eye
    for w in weights:
        a = 0.5 * (w.double().mean(0) + eye)
        rollout = (a / a.sum(-1, keepdim=True)) @ rollout
    return rollout


def query_index(query: str, grid: tuple[int, int], prefix: int) -> int | None:
    """The token of ``query`` (``"cls"`` or ``"ROW,COL"`` on the token grid); None means the
    mean over the grid's tokens (``"cls"`` without a CLS token).

    Raises:
        ValueError: an unreadable query or a cell outside the grid.
    """
    if query.strip().lower() == "cls":
        return 0 if prefix else None
    try:
        r, c = (int(v) for v in query.split(","))
    except ValueError:
        raise ValueError(f"--query: expected 'cls' or ROW,COL (e.g. 3,4), got {query!r}") from None
    if not (0 <= r < grid[0] and 0 <= c < grid[1]):
        raise ValueError(f"--query {query}: the token grid is {grid[0]}x{grid[1]} (rows, cols)")
    return prefix + r * grid[1] + c


def _as_map(row: Tensor, grid: tuple[int, int], prefix: int, size: tuple[int, int]) -> Tensor:
    """One attention row over tokens -> an ``(H, W)`` map over the image (grid cells only)."""
    cells = row[prefix:].reshape(1, 1, *grid).float()
    return F.interpolate(cells, size=size, mode="nearest")[0, 0]


def draw_image_attention(
    task: Any, model: nn.Module, input: Any, out: str | Path, *, title: str = "",
    query: str = "cls",
) -> Path:  # fmt: skip
    """Draw the picture of ``show`` into the PNG ``out`` (module docstring).

    ``task`` is the :class:`~.task.ImageTask` (not imported here: the task imports this module).

    Raises:
        ValueError: the model has no attention (the ``cnn`` encoder).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    model.eval()
    with torch.no_grad():
        res = model(task.encode_inputs([input]), need_weights=True)
    if not res.weights:
        raise ValueError(
            "this model's encoder (cnn) has no attention weights to show; train a pixels, "
            "patches or hybrid encoder"
        )
    weights = [w[0] for w in res.weights]  # per layer (h, n, n)
    q = query_index(query, res.grid, res.prefix)
    probs = res.logits[0].float().softmax(-1)
    image = input.image.float() / 255.0
    size = tuple(image.shape)

    def row(a: Tensor) -> Tensor:  # (n, n) -> the query's row (or the grid's mean row)
        return a[q] if q is not None else a[res.prefix :].mean(0)

    last = weights[-1]
    panels = [("input", image, None)]
    panels += [(f"head {h + 1}", image, _as_map(row(last[h]), res.grid, res.prefix, size))
               for h in range(last.shape[0])]  # fmt: skip
    rolled = attention_rollout(weights)
    panels.append(("rollout", image, _as_map(row(rolled), res.grid, res.prefix, size)))
    fig = Figure(figsize=(2.0 * len(panels), 2.5))
    for i, (name, img, heat) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        ax.imshow(img.float().numpy(), cmap="gray", vmin=0, vmax=1)
        if heat is not None:
            ax.imshow(heat.float().numpy(), cmap="inferno", alpha=0.6)
        if q is not None and q >= res.prefix and heat is not None:
            r, c = divmod(q - res.prefix, res.grid[1])
            ax.scatter([(c + 0.5) * size[1] / res.grid[1] - 0.5],
                       [(r + 0.5) * size[0] / res.grid[0] - 0.5], marker="x", c="cyan")  # fmt: skip
        ax.set_title(name, fontsize=8)
        ax.set_axis_off()
    pred = task.classes[int(probs.argmax())]
    who = "CLS" if q == 0 and res.prefix else ("mean of tokens" if q is None else f"token {query}")
    gold = f", gold {task.classes[input.label]}" if input.label is not None else ""
    fig.suptitle(f"{title + ': ' if title else ''}{input.name}: {pred} ({float(probs.max()):.2f}"
                 f"{gold}); last layer's attention of {who} per head, rollout over "
                 f"{len(weights)} layers", fontsize=8)  # fmt: skip
    out = Path(out)
    fig.savefig(out, dpi=110)
    return out
