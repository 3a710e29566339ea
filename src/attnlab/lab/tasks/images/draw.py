r"""``show`` for images: the input, one query's attention per head of the last layer overlaid
on it, and the attention rollout across layers.

**Rollout** (Abnar & Zuidema 2020): with each layer's head-averaged attention
:math:`\bar A_\ell` and the residual connection counted as an identity,
:math:`\tilde A_\ell = \tfrac12 (\bar A_\ell + I)`, the flow from input tokens to the outputs
is :math:`R = \tilde A_L \cdots \tilde A_1` (rows renormalised); the query's row of :math:`R`
says how much each input pixel/patch contributes to it through all layers.

The heads share one colour scale (one colour bar), the rollout has its own; a head's title
gives the weight its query puts on the CLS token, which the map over the image cannot show.
Axes are in pixels, ticked at the token grid's cells. With a 2-D window
(``model.encoder.window``), the keys the query may not attend to are hatched, not drawn as
weight 0. The title gives the prediction, its probability and the gold label.

Legend: ``h`` heads, ``n`` tokens, ``H`` / ``W`` image rows / columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "attention_rollout",
    "attention_output",
    "draw_image_attention",
    "image_attention_figure",
    "query_index",
    "masked_keys",
]

#: at most this many ticks per image axis
_MAX_TICKS = 8


def attention_rollout(weights: list[Tensor]) -> Tensor:
    """Rollout ``(n, n)`` of per-layer ``(h, n, n)`` attention weights (module docstring;
    :func:`attnlab.viz.rollout`, float64)."""
    from attnlab.viz import rollout

    return torch.from_numpy(rollout(weights))


@torch.no_grad()
def attention_output(task: Any, model: nn.Module, input: Any) -> Any:
    """``model``'s output on one image with its attention weights (``weights``, ``grid``,
    ``prefix``, ``logits``).

    Raises:
        ValueError: the model has no attention (the ``cnn`` encoder).
    """
    model.eval()
    res = model(task.encode_inputs([input]), need_weights=True)
    if not res.weights:
        raise ValueError(
            "this model's encoder (cnn) has no attention weights to show; train a pixels, "
            "patches or hybrid encoder"
        )
    return res


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


def masked_keys(model: nn.Module, n: int, q: int | None, prefix: int) -> Tensor | None:
    """``(n,)`` True for the keys that query token ``q`` may not attend to (``q`` None: the
    keys no grid token may attend to), under the encoder's attention mask (a window); None
    without one."""
    mask = _encoder_mask(model)
    if mask is None:
        return None
    allowed = mask.dense(1, 1, n, n).expand(1, 1, n, n)[0, 0]  # (n, n): True = may attend
    return ~allowed[q] if q is not None else ~allowed[prefix:].any(0)


def _pixel_axes(ax: Any, size: tuple[int, int], grid: tuple[int, int], labelled: bool) -> None:
    """Ticks at the token grid's cell edges, labelled in pixels (thinned to
    :data:`_MAX_TICKS`); axis names on the ``labelled`` panel only."""
    for axis, length, cells, name in ((ax.xaxis, size[1], grid[1], "x"),
                                      (ax.yaxis, size[0], grid[0], "y")):  # fmt: skip
        cell = length / cells
        every = -(-(cells + 1) // _MAX_TICKS)  # cells per tick
        edges = list(range(0, cells + 1, every))
        axis.set_ticks([k * cell - 0.5 for k in edges], [f"{k * cell:g}" for k in edges])
        axis.set_tick_params(labelsize=6, length=2)
        if labelled:
            unit = "pixel" if cell == 1 else f"pixel; a token is {cell:g} px"
            axis.set_label_text(f"{name} ({unit})", fontsize=7)


def _hatch_cells(ax: Any, cells: Tensor, size: tuple[int, int]) -> None:
    """Hatch the True cells of the ``(rows, cols)`` grid ``cells`` over an image of ``size``."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    from attnlab.lab.viz import MASKED_GREY, MASKED_HATCH

    ch, cw = size[0] / cells.shape[0], size[1] / cells.shape[1]
    boxes = [Rectangle((c * cw - 0.5, r * ch - 0.5), cw, ch) for r, c in cells.nonzero().tolist()]
    ax.add_collection(PatchCollection(boxes, facecolor="white", edgecolor=MASKED_GREY,
                                      hatch=MASKED_HATCH, linewidth=0, alpha=0.85))  # fmt: skip


def draw_image_attention(
    task: Any, model: nn.Module, input: Any, out: str | Path, *, title: str = "",
    query: str = "cls",
) -> Path:  # fmt: skip
    """Draw :func:`image_attention_figure` into the PNG ``out``; return its path."""
    out = Path(out)
    image_attention_figure(task, model, input, title=title, query=query).savefig(out, dpi=110)
    return out


def image_attention_figure(
    task: Any, model: nn.Module, input: Any, *, title: str = "", query: str = "cls"
) -> Figure:
    """The picture of ``show`` (module docstring), as a figure.

    ``task`` is the :class:`~.task.ImageTask` (not imported here: the task imports this module).

    Raises:
        ValueError: the model has no attention (the ``cnn`` encoder).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    from attnlab.lab.viz import masked_handle

    res = attention_output(task, model, input)
    weights = [w[0] for w in res.weights]  # per layer (h, n, n)
    q = query_index(query, res.grid, res.prefix)
    probs = res.logits[0].float().softmax(-1)
    image = input.image.float() / 255.0
    image = image.permute(1, 2, 0) if image.dim() == 3 else image  # RGB: (H, W, 3)
    size = tuple(image.shape[:2])

    def row(a: Tensor) -> Tensor:  # (n, n) -> the query's row (or the grid's mean row)
        return a[q] if q is not None else a[res.prefix :].mean(0)

    last = weights[-1]
    n = last.shape[-1]
    masked = masked_keys(model, n, q, res.prefix)  # (n,) or None
    cells = masked[res.prefix :].reshape(res.grid) if masked is not None else None

    def to_cls(a: Tensor) -> str:  # the query's weight on the CLS token, not on the image
        return f" (to CLS {float(row(a)[: res.prefix].sum()):.2f})" if res.prefix else ""

    panels = [("input", None, None)]
    panels += [(f"head {h + 1}{to_cls(last[h])}", "heads",
                _as_map(row(last[h]), res.grid, res.prefix, size))
               for h in range(last.shape[0])]  # fmt: skip
    rolled = attention_rollout(weights)
    panels.append(("rollout", "rollout", _as_map(row(rolled), res.grid, res.prefix, size)))
    tops = {"heads": max(float(h.max()) for _, s, h in panels if s == "heads"),
            "rollout": float(panels[-1][2].max())}  # fmt: skip
    norms = {s: Normalize(0.0, max(t, 1e-6)) for s, t in tops.items()}
    fig = Figure(figsize=(2.1 * len(panels) + 1.2, 3.2), layout="constrained")
    axes, images = {"heads": [], "rollout": []}, {}
    for i, (name, scale, heat) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        ax.imshow(image.float().numpy(), cmap="gray", vmin=0, vmax=1)
        if heat is not None:
            images[scale] = ax.imshow(heat.float().numpy(), cmap="inferno", alpha=0.6,
                                      norm=norms[scale])  # fmt: skip
            axes[scale].append(ax)
            if cells is not None and scale == "heads" and cells.any():
                _hatch_cells(ax, cells, size)
        if q is not None and q >= res.prefix and heat is not None:
            r, c = divmod(q - res.prefix, res.grid[1])
            ax.scatter([(c + 0.5) * size[1] / res.grid[1] - 0.5],
                       [(r + 0.5) * size[0] / res.grid[0] - 0.5], marker="x", c="cyan")  # fmt: skip
        ax.set_title(name, fontsize=8)
        _pixel_axes(ax, size, res.grid, labelled=i == 0)
    for scale, label in (
        ("heads", "attention weight\n(every head)"),
        ("rollout", "rollout weight"),
    ):
        bar = fig.colorbar(images[scale], ax=axes[scale], shrink=0.8, aspect=15)
        bar.set_label(label, fontsize=7)
        bar.ax.tick_params(labelsize=6)
    if cells is not None and cells.any():
        fig.legend(handles=[masked_handle(f"key outside the query's window (radius "
                                          f"{_window_of(model)})")],
                   loc="outside lower center", fontsize=7)  # fmt: skip
    pred = task.classes[int(probs.argmax())]
    who = "CLS" if q == 0 and res.prefix else ("mean of tokens" if q is None else f"token {query}")
    gold = f", gold {task.classes[input.label]}" if input.label is not None else ""
    fig.suptitle(f"{title + ': ' if title else ''}{input.name}: predicted {pred} "
                 f"(p {float(probs.max()):.2f}{gold})\nlast layer's attention of {who} per head, "
                 f"rollout over {len(weights)} layer{'s' if len(weights) > 1 else ''}", fontsize=8)  # fmt: skip
    return fig


def _encoder_mask(model: nn.Module) -> Any:
    """The attention mask an image encoder holds (``masks.grid_local`` of its window), or
    None."""
    from attnlab.masks import Mask

    return next((m.mask for m in model.modules() if isinstance(getattr(m, "mask", None), Mask)),
                None)  # fmt: skip


def _window_of(model: nn.Module) -> str:
    """The radius of the encoder's window (``?`` for a mask of another kind)."""
    return str(getattr(_encoder_mask(model), "radius", "?"))
