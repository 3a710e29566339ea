"""``attnlab runs [DIR]`` and ``attnlab plot RUN ... --out FILE.png``: the runs one has made.

``runs`` finds every run directory under ``DIR`` (one holding a ``config.json``) and prints one
row per run: its task, its state, its dev and test scores (the task's metric), its wall time,
and the options in which its configuration differs from the task's defaults. The state is

* ``complete``: it wrote ``metrics.json`` (its final test); ``early stop`` or ``time up`` say
  why it ended before its epochs;
* ``running``: another process holds its lock (``.lock``, a live process of this host);
* ``partial``: it stopped with a ``last.pt`` and no final test (``--resume`` continues it);
* ``failed``: nothing to resume (it stopped before its first checkpoint).

``plot`` draws the runs' learning curves from their ``metrics.csv``: the training loss and
the dev metric against the optimizer step, one line per run, on one figure.
"""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnlab.lab.tasks import TASKS
from attnlab.lab.train import RunConfig
from attnlab.lab.train.budget import format_duration
from attnlab.lab.train.metrics_log import read_metrics_csv
from attnlab.lab.train.rundir import LOCK_NAME

__all__ = ["RunSummary", "find_runs", "summarize_run", "runs_table", "plot_runs"]

#: settings never shown as a difference: where the run is, and how it was started
_NOT_OPTIONS = {"out_dir", "train.resume", "train.overwrite"}


@dataclass
class RunSummary:
    """One row of ``attnlab runs``."""

    path: Path
    task: str
    state: str
    metric: str
    dev: float | None
    test: float | None
    wall_s: float | None
    options: list[str]


def find_runs(root: str | Path) -> list[Path]:
    """The run directories under ``root`` (``root`` itself if it is one), sorted by path.

    Raises:
        FileNotFoundError: ``root`` is not a directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"runs: {root} is not a directory (give the folder of your runs)")
    return sorted(p.parent for p in root.rglob("config.json") if p.is_file())


def summarize_run(path: str | Path) -> RunSummary:
    """What ``attnlab runs`` says of the run directory ``path`` (module docstring)."""
    path = Path(path)
    config = json.loads((path / "config.json").read_text())
    task = str(config.get("task", "?"))
    summary = _read_json(path / "metrics.json")
    rows = read_metrics_csv(path / "metrics.csv") if (path / "metrics.csv").is_file() else []
    metric, higher = _metric_of(task, summary)
    if summary is not None:
        dev, test = summary.get("best_score"), (summary.get("test") or {}).get(metric)
        wall = summary.get("wall_time_s")
    else:
        scores = [r[f"dev_{metric}"] for r in rows if isinstance(r.get(f"dev_{metric}"), float)]
        scores = [s for s in scores if math.isfinite(s)]
        dev = (max if higher else min)(scores) if scores else None
        test, wall = None, (rows[-1].get("elapsed_s") if rows else None)
    return RunSummary(path, task, _state(path, summary), metric, dev, test,
                      wall if isinstance(wall, int | float) else None,
                      changed_options(config))  # fmt: skip


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _metric_of(task: str, summary: Mapping[str, Any] | None) -> tuple[str, bool]:
    if summary and summary.get("metric_name"):
        return str(summary["metric_name"]), bool(summary.get("higher_is_better", True))
    if task in TASKS:
        cls = TASKS.get(task)
        return cls.metric_name, cls.higher_is_better
    return "accuracy", True


def _state(path: Path, summary: Mapping[str, Any] | None) -> str:
    if summary is not None:
        why = [w for w, key in (("early stop", "stopped_early"), ("time up", "time_up"))
               if summary.get(key)]  # fmt: skip
        return "complete" + (f" ({', '.join(why)})" if why else "")
    if _locked(path / LOCK_NAME):
        return "running"
    return "partial" if (path / "last.pt").is_file() else "failed"


def _locked(lock: Path) -> bool:
    """Whether ``lock`` names a live process of this host (a run in progress)."""
    holder = _read_json(lock)
    if not isinstance(holder, dict) or holder.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(holder.get("pid", 0)), 0)
    except (OSError, ValueError, TypeError):
        return False
    return True


def changed_options(config: Mapping[str, Any]) -> list[str]:
    """The ``--a.b=value`` options in which a run's ``config.json`` differs from its task's
    defaults (every option, for a task not registered here)."""
    task = config.get("task", "")
    defaults = RunConfig.for_task(task).to_dict() if task in TASKS else {}
    mine, theirs = _flat(config), _flat(defaults)
    if theirs.get("train.precision") == "auto":  # saved resolved: fp32 or bf16 is its default
        theirs.pop("train.precision")
        mine.pop("train.precision", None)
    return [f"--{k}={_text(v)}" for k, v in mine.items()
            if k not in _NOT_OPTIONS and k != "task" and theirs.get(k, object()) != v]  # fmt: skip


def _flat(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(_text(v) for v in value)
    return value if isinstance(value, str) else json.dumps(value)


def runs_table(root: str | Path) -> str:
    """The text of ``attnlab runs ROOT``: an aligned table, one run a line."""
    runs = [summarize_run(p) for p in find_runs(root)]
    if not runs:
        return f"no runs under {root} (a run is a directory with a config.json)"
    header = ("RUN", "TASK", "STATE", "METRIC", "DEV", "TEST", "TIME", "OPTIONS")
    rows = [header]
    for r in runs:
        name = str(r.path.relative_to(root)) if r.path != Path(root) else str(r.path)
        rows.append((name, r.task, r.state, r.metric, _score(r.dev), _score(r.test),
                     format_duration(r.wall_s) if r.wall_s is not None else "-",
                     " ".join(r.options) or "(the task's defaults)"))  # fmt: skip
    widths = [max(len(row[c]) for row in rows) for c in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(f"{v:<{w}}" for v, w in zip(row, widths)), row[-1]]) for row in rows
    )


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def plot_runs(runs: Sequence[str | Path], out: str | Path) -> Path:
    """Learning curves of ``runs`` (run directories) on one figure, written to the PNG ``out``:
    the training loss and each run's dev metric against the optimizer step.

    Raises:
        ValueError: a run without a ``metrics.csv`` (or with no evaluation in it).
    """
    from matplotlib.figure import Figure

    curves = []
    for run in runs:
        csv = Path(run) / "metrics.csv"
        if not csv.is_file():
            raise ValueError(f"plot: {run} has no metrics.csv (not a run directory, or it "
                             "stopped before its first evaluation)")  # fmt: skip
        rows = read_metrics_csv(csv)
        summary = summarize_run(run) if (Path(run) / "config.json").is_file() else None
        metric = summary.metric if summary else "accuracy"
        curves.append((_label(Path(run), runs), rows, metric))
    fig = Figure(figsize=(11, 4.2), dpi=110, layout="constrained")
    loss_ax, dev_ax = fig.subplots(1, 2)
    metrics = sorted({m for _, _, m in curves})
    for label, rows, metric in curves:
        steps = [r["step"] for r in rows]
        line = loss_ax.plot(steps, [r.get("train_loss", math.nan) for r in rows], label=label)
        dev = [r.get(f"dev_{metric}", math.nan) for r in rows]
        dev = [v if isinstance(v, float) else math.nan for v in dev]
        name = label if len(metrics) == 1 else f"{label} ({metric})"
        dev_ax.plot(steps, dev, marker="o", markersize=3, color=line[0].get_color(), label=name)
    loss_ax.set(xlabel="optimizer step", ylabel="training loss", title="training loss")
    dev_ax.set(xlabel="optimizer step", ylabel=f"dev {' / '.join(metrics)}",
               title=f"dev {' / '.join(metrics)}")  # fmt: skip
    for ax in (loss_ax, dev_ax):
        ax.grid(alpha=0.3)
    dev_ax.legend(fontsize=8, loc="best")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def _label(run: Path, runs: Sequence[str | Path]) -> str:
    """A run's name in the legend: its directory's name, or its path if two runs share one."""
    names = [Path(r).name for r in runs]
    return run.name if names.count(run.name) == 1 else str(run)
