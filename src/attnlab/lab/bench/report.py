"""Reporting of :func:`attnlab.lab.bench.attention.bench_attention`: crossovers, plot, CSV."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

__all__ = ["crossovers", "plot_bench", "write_csv"]


def crossovers(rows: list[dict[str, Any]], against: str = "sdpa") -> dict[tuple[str, str], Any]:
    """``(kernel, mode) -> n``: the shortest measured length from which the kernel is faster
    than ``against`` at every longer length measured for both (None: never)."""
    times: dict[tuple[str, str], dict[int, float]] = {}
    for r in rows:
        if r["status"] == "ok":
            times.setdefault((r["kernel"], r["mode"]), {})[r["n"]] = r["time_s"]
    out: dict[tuple[str, str], Any] = {}
    for (name, mode), t in times.items():
        if name == against:
            continue
        base = times.get((against, mode), {})
        common = sorted(set(t) & set(base))
        # Past the baseline's last length (skipped: too slow or too big) the kernel wins.
        beyond = sorted(n for n in t if base and n > max(base) and n not in common)
        faster = [t[n] < base[n] for n in common] + [True] * len(beyond)
        grid = common + beyond
        start = None
        for n, win in zip(reversed(grid), reversed(faster)):
            if not win:
                break
            start = n
        out[(name, mode)] = start
    return out


def plot_bench(rows: list[dict[str, Any]], path: Path, cross: dict | None = None) -> None:
    """Log-log time and memory vs ``n``, one row of panels per mode, one line per kernel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cross = cross if cross is not None else crossovers(rows)
    modes = sorted({r["mode"] for r in rows}, key=["fwd", "fwdbwd"].index)
    fig, axes = plt.subplots(len(modes), 2, figsize=(12, 4.5 * len(modes)), squeeze=False)
    names = list(dict.fromkeys(r["kernel"] for r in rows))
    palette = plt.get_cmap("tab20").colors
    colors = {name: palette[i % len(palette)] for i, name in enumerate(names)}
    colors.update(sdpa="black", reference="black")
    for row_axes, mode in zip(axes, modes):
        for name in names:
            pts = [
                r for r in rows if r["kernel"] == name and r["mode"] == mode and r["status"] == "ok"
            ]
            if not pts:
                continue
            ns = [r["n"] for r in pts]
            label = {"sdpa": "sdpa (exact, fused)", "reference": "reference (exact, n^2)"}.get(
                name, name
            )
            if cross.get((name, mode)) is not None:
                label += f" (beats sdpa from n={cross[(name, mode)]})"
            style = dict(
                color=colors[name], ls="--" if name == "reference" else "-", marker="o", ms=3,
                lw=2 if name in ("sdpa", "reference") else 1.2,
            )  # fmt: skip
            row_axes[0].plot(ns, [r["time_s"] for r in pts], label=label, **style)
            row_axes[1].plot(ns, [max(r["peak_bytes"], 1) / 2**20 for r in pts], **style)
        for ax, what in zip(row_axes, ("time (s)", "peak extra memory (MiB)")):
            ax.set(xscale="log", yscale="log", xlabel="sequence length n", ylabel=what)
            ax.set_title(f"{mode}: {what.split(' (')[0]}")
            ax.grid(True, which="both", alpha=0.3)
        row_axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_csv(path: Path, rows: list[dict[str, Any]], fields: list[str]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
