"""Claim 9 of the report: a convolution is a restricted self-attention. The exact equivalence
(:func:`attnlab.blocks.conv_attention.conv_as_attention`, no training) decides it; beside it,
the receptive fields attention learns without the restriction (:func:`receptive_fields`, which
the runner measures on every image run of self-attention)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from .budgets import Budget
from .claim import Claim, computed_here, new_figure
from .claims_data import DataEfficiency
from .jobs import Job
from .stats import Verdict

__all__ = ["ConvIsAttention", "receptive_fields"]

#: dev images whose attention :func:`receptive_fields` averages
IMAGES = 64


class ConvIsAttention(Claim):
    number, name = 9, "a convolution is a restricted self-attention"
    claim = ("A convolution is self-attention restricted to a fixed neighbourhood: one head per "
             "kernel offset, each attending to exactly one pixel, reproduces the convolution "
             "exactly.")  # fmt: skip
    setup = ("The equivalence, with no training: seeded random Conv2d layers (kernel 1x1, 3x3, "
             "5x3; 1 to 8 channels; 'same' and no padding) against "
             "attnlab.conv_as_attention(conv) on seeded random images, in float64 (Cordonnier, "
             "Loukas & Jaggi 2020, Theorem 1). Beside it, what attention learns without the "
             "restriction: claim 10's self-attention over patches trained on the most images "
             f"(seed 0), each head's mean weight on the key at each offset from its query over "
             f"{IMAGES} dev images (the plot; a convolution's would be one fixed offset per "
             "head).")  # fmt: skip
    rule = ("held if every layer's largest |conv(x) - attention(x)| is below 1e-12 (float64), "
            "did not hold otherwise; the same at every budget (the equivalence trains nothing; "
            "the learned receptive fields, shown beside it, are not ruled on, and only they "
            "need claim 10's run)")  # fmt: skip
    revisions = ("2026-12-05, the page (not the rule): the learned receptive fields of image "
                 "attention added, as the lecture shows them",)  # fmt: skip
    SEEN = "self-attention (patches), the most images, seed 0 (claim 10's run)"
    TOLERANCE = 1e-12
    CASES = ((1, 1, (1, 1), 0), (3, 8, (3, 3), 1), (4, 6, (3, 3), 0), (2, 5, (5, 3), (2, 1)))

    def variants(self):
        return []

    def jobs(self, budget: Budget) -> dict[str, list[Job]]:
        """Claim 10's run of self-attention on the most images, seed 0: its attention is shown."""
        runs = DataEfficiency().jobs(budget)
        largest = [label for label in runs if label.startswith(DataEfficiency.MODELS[1][0])][-1]
        return {self.SEEN: [dataclasses.replace(runs[largest][0], label=self.SEEN)]}

    def analyse(self, results):
        import torch
        from torch import nn

        from attnlab.blocks.conv_attention import conv_as_attention

        notes, worst = [], 0.0
        generator = torch.Generator().manual_seed(0)
        for c, o, kernel, padding in self.CASES:
            torch.manual_seed(len(notes))
            conv = nn.Conv2d(c, o, kernel, padding=padding).double()
            x = torch.randn(2, c, 7, 6, generator=generator, dtype=torch.float64)
            attention = conv_as_attention(conv).double()
            with torch.no_grad():
                error = float((conv(x) - attention(x)).abs().max())
            worst = max(worst, error)
            heads = kernel[0] * kernel[1]  # one per offset of the kernel
            notes.append(f"Conv2d({c}, {o}, kernel {kernel}, padding {padding}) on 2 x {c} x 7 x 6: "
                         f"{heads} head{'s' * (heads != 1)}, max |difference| {error:.1e}")  # fmt: skip
        verdict = Verdict.HELD if worst < self.TOLERANCE else Verdict.NOT_HELD
        parts = [(f"largest |conv - attention| {worst:.1e} < {self.TOLERANCE:g}", verdict, None)]
        seen = [r for r in results.get(self.SEEN, []) if r.metrics.get("receptive_fields")]
        if results.get(self.SEEN) and not seen:
            notes.append("the receptive fields: its run finished before the report measured "
                         "them; delete its jobs/KEY/result.json and run the report again to "
                         "measure them (the run is not trained again)")  # fmt: skip
        notes.append(f"the equivalence: {computed_here()}")
        for r in seen:
            notes += _locality(r.metrics["receptive_fields"])
        section = self._section(results, parts, notes=notes)
        section.plot = _fields_plot(self, seen[0].metrics["receptive_fields"]) if seen else None
        return section


def receptive_fields(run: str | Path, *, images: int = IMAGES) -> dict[str, Any] | None:
    """Each head's mean attention weight on the key at each offset ``(dy, dx)`` from its query,
    over the first ``images`` dev images of a finished image run (grid tokens only: a CLS
    token's row and column are left out), per layer: ``{"grid": [R, C], "maps": [layer][head]
    (2R-1) x (2C-1) nested lists}``; None for a model without attention (the CNN)."""
    import torch

    from attnlab.lab.train.checkpoint import load_for_inference
    from attnlab.lab.train.precision import choose_precision

    task, model, cfg = load_for_inference(str(run), setup=True)
    examples = task.splits()["dev"][:images]
    bf16 = choose_precision(cfg.train.precision, torch.device("cpu")).bf16
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = model(task.encode_inputs(examples), need_weights=True)
    if not getattr(out, "weights", None):
        return None
    (rows, cols), p = out.grid, out.prefix
    r, c = torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij")
    r, c = r.flatten(), c.flatten()  # each grid token's cell
    offset = ((r[None, :] - r[:, None] + rows - 1) * (2 * cols - 1)
              + (c[None, :] - c[:, None] + cols - 1)).flatten()  # (query, key) -> offset cell  # fmt: skip
    count = torch.bincount(offset, minlength=(2 * rows - 1) * (2 * cols - 1)).double()
    maps = []
    for w in out.weights:  # (b, h, n, n)
        w = w[:, :, p:, p:].mean(0, dtype=torch.float64).flatten(1)  # (h, q * k)
        total = torch.zeros(w.shape[0], count.numel(), dtype=torch.float64)
        total.index_add_(1, offset, w)
        mean = (total / count.clamp_min(1)).view(-1, 2 * rows - 1, 2 * cols - 1)
        maps.append(mean.tolist())
    return {"grid": [rows, cols], "maps": maps}


def _locality(fields: dict[str, Any]) -> list[str]:
    """A note per layer: each head's share of its weight on the 3 x 3 cells around its query,
    against what uniform attention over the grid would give there."""
    rows, cols = fields["grid"]
    notes = []
    for i, layer in enumerate(fields["maps"], 1):
        shares = []
        for head in np.asarray(layer):
            centre = head[rows - 2 : rows + 1, cols - 2 : cols + 1]
            shares.append(float(centre.sum() / head.sum()) if head.sum() > 0 else float("nan"))
        notes.append(f"layer {i}, each head's mean weight per offset summed over the 3 x 3 "
                     "offsets around the query, as a share of its sum over all offsets: "
                     f"{', '.join(f'{s:.2f}' for s in shares)} (uniform attention: "
                     f"{9 / ((2 * rows - 1) * (2 * cols - 1)):.2f})")  # fmt: skip
    return notes


def _fields_plot(claim: Claim, fields: dict[str, Any]):
    """A heat map per layer and head of the mean weight against the offset from the query."""
    layers = [np.asarray(layer) for layer in fields["maps"]]
    heads = layers[0].shape[0]
    rows, cols = fields["grid"]
    fig = new_figure(1.5 * heads + 0.8, 1.5 * len(layers) + 0.8)
    axes = np.asarray(fig.subplots(len(layers), heads, squeeze=False))
    extent = (-cols + 0.5, cols - 0.5, rows - 0.5, -rows + 0.5)  # offsets -(C-1) .. C-1
    top = max(float(layer.max()) for layer in layers)  # one colour scale for every head
    for i, layer in enumerate(layers):
        for h in range(heads):
            ax = axes[i, h]
            image = ax.imshow(layer[h], cmap="viridis", extent=extent, vmin=0.0, vmax=top)
            ax.plot(0, 0, "r+", markersize=6)  # the query
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(f"head {h + 1}", fontsize=8)
            if h == 0:
                ax.set_ylabel(f"layer {i + 1}", fontsize=8)
    bar = fig.colorbar(image, ax=axes, shrink=0.8)
    bar.set_label("mean weight on the key there", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    fig.suptitle(f"claim {claim.number}: mean weight by offset from the query (+), "
                 f"{rows} x {cols} patch grid", fontsize=9)  # fmt: skip
    return fig
