"""Attention as pictures: one heatmap per layer and head, readable from 3 to 100+ tokens.

A plotting module with no knowledge of tasks: :meth:`attnlab.lab.tasks.Task.draw` calls
:func:`plot_attention` with the weights and labels of its ``attention_map``.

What makes the picture readable, and why:

* **One colour scale per figure** (0 to the largest weight shown) and a colour bar: panels
  compare at a glance, which a scale per panel (each head's own maximum) would hide.
* **Axes named**: rows are queries (the position that attends), columns keys (what it
  attends to), so a row of a panel sums to 1.
* **Layout from the sequence length**: panels grow with the number of tokens up to a cap on
  the figure's width; tick labels are thinned to what fits at a legible size and long tokens
  shortened. The title is wrapped and laid out above the panels (constrained layout), never
  over them. For one panel at full size, draw one layer and head (``layer=``, ``head=``).
* **A pair that does not exist is not a weight of 0**: a masked pair (outside an attention
  window, a non-edge of a graph) is drawn grey-hatched (:func:`hatch_under`) and named in a
  legend, where weight 0 would be the colour map's darkest colour.
* **The prediction in the title**: callers put what the model predicted in ``title``
  (:meth:`attnlab.lab.tasks.TaskCommands.draw` does); a line break there starts a new line.
"""

from __future__ import annotations

import logging
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from torch import Tensor

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

__all__ = [
    "plot_attention",
    "attention_figure",
    "attention_of",
    "hatch_under",
    "masked_cmap",
    "masked_handle",
]

logger = logging.getLogger(__name__)

#: inches per token of a panel's side, and the bounds on a side (inches)
INCH_PER_TOKEN = 0.16
MIN_SIDE, MAX_SIDE = 2.4, 14.0
#: the widest figure drawn (inches); more heads make smaller panels
MAX_WIDTH = 26.0
#: tick labels are at least this far apart (points), at this font size
LABEL_PITCH_PT, LABEL_FONT_PT = 8.5, 7.0
#: a token longer than this is shortened on the axes
MAX_LABEL_CHARS = 12
DPI = 110
#: how a masked or absent pair is drawn: grey hatching on white, never a colour of the map
MASKED_HATCH, MASKED_GREY = "////", "0.6"


def plot_attention(
    weights: Sequence[Tensor],
    tokens: Sequence[str],
    out: str | Path,
    *,
    title: str = "",
    query_tokens: Sequence[str] | None = None,
    layer: int | None = None,
    head: int | None = None,
    masked: Tensor | None = None,
    masked_label: str = "masked pair",
) -> Path:
    """Write :func:`attention_figure` of the arguments to ``out`` (PNG; parent directories
    are created) and return its path."""
    fig = attention_figure(
        weights, tokens, title=title, query_tokens=query_tokens, layer=layer, head=head,
        masked=masked, masked_label=masked_label,
    )  # fmt: skip
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=DPI)
    return out


def attention_figure(
    weights: Sequence[Tensor],
    tokens: Sequence[str],
    *,
    title: str = "",
    query_tokens: Sequence[str] | None = None,
    layer: int | None = None,
    head: int | None = None,
    masked: Tensor | None = None,
    masked_label: str = "masked pair",
) -> Figure:
    """A grid of attention heatmaps (rows: layers, columns: heads) as a matplotlib figure.

    Panel ``(l, h)`` shows ``weights[l][h]``: row ``i`` is query ``i``, column ``j`` key ``j``,
    colour the weight ``a_ij`` on one scale ``[0, max a]`` shared by every panel of the figure
    (the colour bar). A masked pair (``masked``, or a NaN weight) is drawn hatched, not as
    weight 0, and the legend names it ``masked_label``.

    Args:
        weights: per layer, ``(h, i, j)`` attention weights of one sequence.
        tokens: the ``j`` key tokens (and queries, unless ``query_tokens`` is given).
        title: figure title (wrapped to the figure's width, above the panels).
        query_tokens: the ``i`` query tokens, if they differ from the keys.
        layer: draw only this layer (1-based, as the panels are titled); None: every layer.
        head: draw only this head (1-based); None: every head.
        masked: pairs that do not exist, True = absent (the opposite of a mask's "may
            attend"): boolean ``(i, j)`` for every panel, or ``(h, i, j)`` per head (``h`` 1
            or the heads of every drawn layer). NaN weights are absent pairs too.
        masked_label: what an absent pair is, for the legend (``"no edge"``, ``"outside
            the window"``).

    Raises:
        ValueError: no weights; labels that do not match the weights' ``(i, j)``; a ``layer``
            or ``head`` the model does not have; a ``masked`` of another shape.
    """
    import numpy as np
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    if not weights:
        raise ValueError("plot_attention: no attention weights to plot (is the encoder attention?)")
    keys = [_short(t) for t in tokens]
    queries = [_short(t) for t in (query_tokens if query_tokens is not None else tokens)]
    panels = _select(weights, layer, head)
    n_i, n_j = panels[0][2].shape
    if (n_i, n_j) != (len(queries), len(keys)):
        raise ValueError(
            f"plot_attention: weights are {n_i} queries x {n_j} keys, but got "
            f"{len(queries)} query and {len(keys)} key labels"
        )
    panels = [(r, c, w, _absent(masked, c, w)) for r, c, w in panels]
    rows = sorted({p[0] for p in panels})
    cols = sorted({p[1] for p in panels})
    n = max(n_i, n_j)
    side = _panel_side(n, len(cols))
    width, height = side * n_j / n, side * n_i / n  # one panel (inches)
    fig_width = width * len(cols) + 1.4  # + the colour bar
    title = _wrap(title, fig_width)
    fig = Figure(
        figsize=(fig_width, height * len(rows) + 1.0 + 0.2 * (title.count("\n") + 1)),
        layout="constrained",
    )
    axes = fig.subplots(len(rows), len(cols), squeeze=False)
    top = max((float(w[~a].max()) for _, _, w, a in panels if (~a).any()), default=0.0)
    norm = Normalize(vmin=0.0, vmax=max(top, 1e-6))
    any_absent = any(bool(a.any()) for _, _, _, a in panels)
    for r, c, w, absent in panels:
        ax = axes[rows.index(r)][cols.index(c)]
        shown = np.ma.masked_array(w.float().numpy(), mask=absent.numpy())
        image = ax.imshow(shown, cmap=masked_cmap(), norm=norm, aspect="equal",
                          interpolation="nearest")  # fmt: skip
        if absent.any():
            hatch_under(ax, (-0.5, n_j - 0.5, n_i - 0.5, -0.5))
        ax.set_title(f"layer {r + 1}, head {c + 1}", fontsize=9)
        # tokens and axis names on the outer panels only: every panel has the same axes
        _ticks(ax.set_xticks, keys, width, rotation=90, labelled=r == rows[-1])
        _ticks(ax.set_yticks, queries, height, labelled=c == cols[0])
        if r == rows[-1]:
            ax.set_xlabel("keys", fontsize=8)
        if c == cols[0]:
            ax.set_ylabel("queries", fontsize=8)
    bar = fig.colorbar(image, ax=axes, fraction=0.05 if len(cols) > 1 else 0.08)
    bar.set_label("attention weight", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    if any_absent:
        fig.legend(handles=[masked_handle(masked_label)], loc="outside lower right", fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    if len(panels) > 1 and side < INCH_PER_TOKEN * n + 1.0:
        logger.info(
            "%d panels of %d tokens are drawn small; --layer L --head H draws one larger",
            len(panels), n,
        )  # fmt: skip
    return fig


def _select(
    weights: Sequence[Tensor], layer: int | None, head: int | None
) -> list[tuple[int, int, Tensor]]:
    """``(layer index, head index, (i, j) float weights)`` of the panels to draw."""
    layers = len(weights)
    # Layers may differ in heads (GAT's output layer has 1): --head H draws the layers with one.
    drawn = [weights[layer - 1]] if layer is not None and 1 <= layer <= layers else weights
    heads = max(w.shape[0] for w in drawn)
    for name, value, count in (("layer", layer, layers), ("head", head, heads)):
        if value is not None and not 1 <= value <= count:
            raise ValueError(
                f"{name} {value} does not exist: the model has {count} {name}s "
                f"(1 to {count}), got {name}={value}"
            )
    chosen_layers = range(layers) if layer is None else [layer - 1]
    return [
        (r, c, weights[r][c].detach().float().cpu())
        for r in chosen_layers
        for c in (range(weights[r].shape[0]) if head is None else [head - 1])
        if c < weights[r].shape[0]
    ]


def _absent(masked: Tensor | None, head: int, w: Tensor) -> Tensor:
    """The ``(i, j)`` absent pairs of head ``head``'s panel ``w``: ``masked`` (``(i, j)`` or
    ``(h, i, j)``, True = absent) or a NaN weight."""
    absent = w.isnan()
    if masked is None:
        return absent
    m = masked.detach().cpu().bool()
    if m.dim() == 3:
        m = m[0] if m.shape[0] == 1 else (m[head] if head < m.shape[0] else None)
    if m is None or tuple(m.shape) != tuple(w.shape):
        raise ValueError(
            f"masked: expected (i, j) = {tuple(w.shape)} or (h, i, j) with h = 1 or every "
            f"head, got {tuple(masked.shape)}"
        )
    return absent | m


def masked_cmap(name: str = "viridis") -> Colormap:
    """The colour map ``name`` with masked cells transparent: the hatching of
    :func:`hatch_under` shows through them."""
    from matplotlib import colormaps

    return colormaps[name].with_extremes(bad=(0.0, 0.0, 0.0, 0.0))


def hatch_under(ax: Axes, extent: tuple[float, float, float, float]) -> None:
    """Grey hatching on white under the image ``extent`` (left, right, bottom, top in data
    units, as ``imshow`` takes it): what a masked cell of a :func:`masked_cmap` image shows."""
    from matplotlib.patches import Rectangle

    left, right, bottom, top = extent
    ax.add_patch(Rectangle(
        (min(left, right), min(bottom, top)), abs(right - left), abs(top - bottom),
        facecolor="white", edgecolor="none", hatch=MASKED_HATCH, hatchcolor=MASKED_GREY,
        linewidth=0, zorder=-1,
    ))  # fmt: skip


def masked_handle(label: str) -> Patch:
    """A legend entry for hatched (masked or absent) pairs."""
    from matplotlib.patches import Patch

    return Patch(facecolor="white", edgecolor=MASKED_GREY, hatch=MASKED_HATCH,
                 hatchcolor=MASKED_GREY, label=label)  # fmt: skip


def _panel_side(n: int, columns: int) -> float:
    """A panel's longer side (inches): grows with ``n`` tokens, bounded, and small enough that
    ``columns`` panels fit in :data:`MAX_WIDTH`."""
    fit = (MAX_WIDTH - 1.4) / columns
    return max(MIN_SIDE, min(INCH_PER_TOKEN * n + 1.0, MAX_SIDE, fit))


def _ticks(
    set_ticks, labels: list[str], length_in: float, *, rotation: int = 0, labelled: bool = True
) -> None:
    """Tick every ``step``-th position, ``step`` the smallest that keeps labels
    :data:`LABEL_PITCH_PT` apart along an axis of ``length_in`` inches; name the tokens if
    ``labelled``."""
    fits = max(1, int(0.85 * length_in * 72 / LABEL_PITCH_PT))  # 0.85: the panel's margins
    step = math.ceil(len(labels) / fits)
    positions = list(range(0, len(labels), step))
    names = [labels[p] for p in positions] if labelled else []
    set_ticks(positions, names, fontsize=LABEL_FONT_PT, rotation=rotation)


def _short(token: object) -> str:
    text = str(token)
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def _wrap(title: str, width_in: float) -> str:
    """``title`` wrapped to a figure ``width_in`` inches wide: each of its lines in at most 3,
    shortened with `` …`` beyond."""
    chars = max(20, int(width_in * 72 / 6.0))  # about 6 points per character at 10 points
    lines = []
    for part in title.split("\n"):  # each given line wrapped on its own
        if len(part) > 3 * chars:
            part = textwrap.shorten(part, 3 * chars, placeholder=" …")
        lines += textwrap.wrap(part, chars)
    return "\n".join(lines)


def attention_of(model, task, tokens: Sequence[str]) -> list[Tensor]:
    """Per-layer ``(h, n, n)`` attention weights of ``model`` on one token list: the weights
    of the task's :meth:`~attnlab.lab.tasks.Task.attention_map`."""
    return task.attention_map(model, list(tokens)).weights
