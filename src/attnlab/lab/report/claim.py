"""A claim of the lecture as an experiment (:class:`Claim`) and its part of the report
(:class:`Section`): the helpers every claim shares, from a variant's row of the table to a
comparison under its rule and the plot. The claims themselves are in :mod:`.claims`."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .budgets import Budget
from .jobs import Job, JobResult, with_inits
from .passes import timing_note
from .stats import Comparison, Verdict, combine

__all__ = [
    "Claim",
    "Section",
    "claims_plan",
    "by_seed",
    "capped",
    "compare",
    "computed_here",
    "count",
    "scores_of",
    "new_figure",
    "small_axes",
    "is_fraction",
    "SA",
    "fc",
]


SA = ("self-attention (4 heads)", ())


def fc(k: int) -> tuple[str, tuple[str, ...]]:
    """The fully connected network over a window of ``k`` vectors."""
    return (f"FC, window k={k}", ("--model.encoder.kind=fc", f"--model.encoder.context={k}"))


@dataclass
class Section:
    """One claim's part of the report."""

    number: int
    name: str
    claim: str
    setup: str
    rule: str
    rows: list[dict[str, Any]]
    comparisons: list[tuple[str, Verdict, Comparison | None]]
    verdict: Verdict
    notes: list[str] = field(default_factory=list)
    plot: Any = None  # a matplotlib Figure, or None
    commands: list[str] = field(default_factory=list)
    #: a table shown collapsed under the comparisons: its title, header and rows (or None)
    details: tuple[str, list[str], list[list[str]]] | None = None
    #: the finished jobs it read, key -> the label it gives them (those they started from too)
    jobs: dict[str, str] = field(default_factory=dict)


class Claim:
    """A claim of the lecture (module docstring)."""

    number: int = 0
    task: str = "pos"
    #: changes of the rule after results were seen, each said on the page (with why)
    revisions: tuple[str, ...] = ()
    name: str = ""
    claim: str = ""
    setup: str = ""
    rule: str = ""
    #: its rule or its figures compare speeds: the key of ``JobResult.metrics`` where
    #: :meth:`time_run` puts what it measures of each variant's run of seed 0, side by side
    #: after the training (:mod:`.timing`); None for a claim that times nothing
    timed: str | None = None

    def variants(self) -> list[tuple[str, tuple[str, ...]]]:
        raise NotImplementedError

    def variants_for(self, options: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
        """The variants given the budget's ``options`` for the claim's task (default: the
        same whatever the budget, :meth:`variants`; claim 14 sizes its kernels to them)."""
        return self.variants()

    def jobs(self, budget: Budget) -> dict[str, list[Job]]:
        """Per variant label, its job per seed of ``budget``."""
        base = budget.options[self.task]
        return {
            label: [Job(self.task, (*base, *options), seed, label) for seed in budget.seeds]
            for label, options in self.variants_for(base)
        }

    def time_run(self, run: Path) -> dict[str, Any]:
        """What a timed claim (:attr:`timed`) measures of its finished ``run`` (a directory),
        to merge into its job's metrics; called in the report's own process, one run after
        another, nothing else running (:func:`~.timing.time_claims`)."""
        raise NotImplementedError(f"claim {self.number} times nothing")

    def comparisons(self) -> list[tuple]:
        """The rule's parts: ``(name, rule, variant a, variant b)``, the rule applied to the dev
        scores of ``a`` and ``b`` (or, with a fifth element ``"test"``, their test scores: for
        claims about inputs no choice was made on, such as longer test sequences)."""
        return []

    def analyse(self, results: dict[str, list[JobResult]]) -> Section:
        """The section: every part of :meth:`comparisons` (claims with other parts override)."""
        return self._section(results, self._parts(results))

    def _parts(self, results: dict[str, list[JobResult]]) -> list:
        return [compare(name, rule, results[a], results[b], *split)
                for name, rule, a, b, *split in self.comparisons()]  # fmt: skip

    # helpers
    def _timing_notes(self, results: dict[str, list[JobResult]]) -> list[str]:
        """Where this timed claim's figures come from (:func:`~.timing.timing_note`), and which
        variants have none yet."""
        said = timing_note([r for rs in results.values() for r in rs], self.timed)
        notes = [said] if said else []
        if untimed := _untimed(self, results):
            notes.append(f"{', '.join(untimed)}: not timed yet (the report times every "
                         "variant's run of seed 0 side by side once all have finished, in "
                         "`attnlab report` without --shard; a result taken from another report "
                         "without its run is not timed here)")  # fmt: skip
        return notes

    def _section(self, results: dict[str, list[JobResult]], parts, **extra) -> Section:
        rows = [_row(label, rs) for label, rs in results.items()]
        verdicts = [v for _, v, _ in parts]
        timing = self._timing_notes(results) if self.timed else []
        extra["notes"] = [*extra.get("notes", []), *timing,
                          *(f"revised: {r}" for r in self.revisions)]  # fmt: skip
        return Section(self.number, self.name, self.claim, self.setup, self.rule, rows, parts,
                       combine(verdicts), plot=_bar_plot(self, rows), **extra)  # fmt: skip


def _untimed(claim: Claim, results: dict[str, list[JobResult]]) -> list[str]:
    """The variants whose run of seed 0 has finished without the figures ``claim`` times."""
    return [label for label, rs in results.items()
            if any(r.seed == 0 and claim.timed not in r.metrics for r in rs)]  # fmt: skip


def claims_plan(claims: Sequence[Claim], budget: Budget) -> list[Job]:
    """Every job of ``claims`` at ``budget``, once, with the ``init`` jobs they start from: what
    the report runs, and what its pages count as planned."""
    return with_inits(job for claim in claims for runs in claim.jobs(budget).values()
                      for job in runs)  # fmt: skip


def computed_here() -> str:
    """The provenance of what a page computes itself, when it is rendered."""
    import torch

    from attnlab.provenance import code_identity

    code = code_identity()
    commit = f"{code.get('commit', '?')[:10]}{' (dirty)' if code.get('dirty') else ''}"
    return (f"computed when the report was rendered: commit {commit}, attnlab "
            f"{code['attnlab']}, torch {torch.__version__}")  # fmt: skip


def count(n: object, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: "1 thread", "1,280 jobs"."""
    return (f"{n:,}" if isinstance(n, int) else f"{n}") + f" {noun}" + ("" if n == 1 else "s")


#: the fractions where lower is better: their bar plots run from 0 (a 6% PER on an axis to
#: 100 was a sliver)
ERROR_RATES = ("wer", "per")


def is_fraction(metric: str | None) -> bool:
    """A metric shown in percent (accuracy and its kin), not as it is (RMSE, loss)."""
    return metric is None or "acc" in metric or metric in ("f1", *ERROR_RATES)


def scores_of(rs: Sequence[JobResult], split: str = "dev") -> list[float]:
    """Per run, its best dev score (``"dev"``), its test score (``"test"``), another metric
    of its best dev evaluation (``"dev:NAME"``), or its dev or test score when its best
    checkpoint was scored again under condition ``NAME`` after training (``"dev@NAME"``,
    ``"test@NAME"``: :mod:`~attnlab.lab.report.rescore`; NaN where it could not run)."""
    if split == "dev":
        return [r.dev for r in rs]
    if split.startswith("dev:"):
        return [float(r.metrics["best_dev"][split[4:]]) for r in rs]
    metric = lambda r: r.metrics.get("metric_name", "accuracy")  # noqa: E731
    if "@" in split:
        which, name = split.split("@", 1)
        at = [r.metrics[f"{which}_at"][name] for r in rs]
        return [float(m.get(metric(r), np.nan)) for m, r in zip(at, rs)]
    return [float(r.metrics["test"][metric(r)]) for r in rs]


def by_seed(label: str, rs: Sequence[JobResult]) -> str:
    """A note of ``label``'s dev score per seed, and which seeds were best at their very last
    step (still improving when the budget ended): a mean can hide a seed that did not learn."""
    runs = sorted(rs, key=lambda r: r.seed)
    pct = is_fraction(runs[0].metrics.get("metric_name")) if runs else True
    scores = ", ".join(f"{100 * r.dev:.1f}" if pct else f"{r.dev:.3f}" for r in runs)
    seeds = ", ".join(str(r.seed) for r in runs)
    note = f"{label}, dev by seed ({seeds}): {scores}{'%' if pct else ''}"
    last = [
        r
        for r in runs
        if r.metrics.get("steps") and r.metrics.get("best_step") == r.metrics["steps"]
    ]
    if last:
        note += (f"; best at the last step of the run (still improving when it ended): seed"
                 f"{'s' if len(last) > 1 else ''} {', '.join(str(r.seed) for r in last)}")  # fmt: skip
    return note


def capped(rs: Sequence[JobResult]) -> list[JobResult]:
    """The runs that trained to their ``--train.epochs`` cap without early stopping (given
    ``--train.patience``) ending them: not shown to have converged."""

    def at_cap(r: JobResult) -> bool:
        given = [o.split("=", 1)[1] for o in r.options if o.startswith("--train.epochs=")]
        patience = any(o.startswith("--train.patience=") for o in r.options)
        return patience and bool(given) and int(r.metrics.get("epochs", 0)) >= int(given[-1])

    return [r for r in rs if at_cap(r)]


def _row(label: str, rs: Sequence[JobResult]) -> dict[str, Any]:
    dev = scores_of(rs)
    metric = rs[0].metrics.get("metric_name", "accuracy") if rs else None
    test = [float(r.metrics.get("test", {}).get(metric, np.nan)) for r in rs]
    return {
        "variant": label,
        "metric": metric,
        "units_per_s": float(np.mean([r.metrics.get("units_per_s", np.nan) for r in rs]))
        if rs
        else None,
        "seeds": len(rs),
        "dev": float(np.mean(dev)) if dev else None,
        "dev_sd": float(np.std(dev, ddof=1)) if len(dev) > 1 else None,
        "test": float(np.nanmean(test)) if test else None,
        "parameters": int(rs[0].metrics.get("parameters", 0)) if rs else None,
        "wall_s": float(np.mean([r.seconds for r in rs])) if rs else None,
        "unit": rs[0].metrics.get("unit") if rs else None,
    }


def compare(
    name: str, rule: Callable, a: Sequence[JobResult], b: Sequence[JobResult], split: str = "dev"
):
    """One part of a verdict: ``rule`` on the ``split`` scores of ``a`` and ``b`` (pending
    while either has none)."""
    if not a or not b:
        return name, Verdict.PENDING, None
    verdict, comparison = rule(scores_of(a, split), scores_of(b, split))
    return name, verdict, comparison


def new_figure(width: float, height: float) -> Any:
    """An empty matplotlib Figure of ``width`` x ``height`` inches, constrained layout, drawn
    off-screen (matplotlib is imported here, when a page is rendered)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def small_axes(ax: Any, claim: Claim, *, legend: bool = True) -> None:
    """The report's plot style on ``ax``: labels and ticks at 8 points, a legend, the claim
    as the title."""
    ax.xaxis.label.set_size(8)
    ax.yaxis.label.set_size(8)
    ax.tick_params(labelsize=8)
    if legend:
        ax.legend(fontsize=8)
    ax.set_title(f"claim {claim.number}: {claim.name}", fontsize=9)


def _bar_plot(claim: Claim, rows: list[dict[str, Any]]):
    """Dev accuracy per variant with its seeds' spread (a matplotlib Figure)."""
    done = [r for r in rows if r["dev"] is not None]
    if not done:
        return None
    metric = done[0]["metric"]
    scale = 100.0 if is_fraction(metric) else 1.0
    fig = new_figure(6.4, 0.45 * len(done) + 1.2)
    ax = fig.add_subplot()
    y = np.arange(len(done))
    ax.barh(y, [scale * r["dev"] for r in done], xerr=[scale * (r["dev_sd"] or 0) for r in done],
            color="#4c72b0", capsize=3)  # fmt: skip
    ax.set_yticks(
        y, [textwrap.fill(r["variant"], 40, break_on_hyphens=False) for r in done], fontsize=8
    )
    ax.invert_yaxis()
    if scale == 100.0 and metric in ERROR_RATES:  # from 0 to the multiple of 10 past the bars
        hi = max(100 * (r["dev"] + (r["dev_sd"] or 0)) for r in done)
        ax.set_xlim(0, min(100.0, 10 * (math.floor(hi / 10) + 1)))
    elif scale == 100.0:
        lo = min(100 * r["dev"] for r in done)  # the axis from a multiple of 10, ticked there
        ax.set_xlim(max(0.0, 10 * math.floor((lo - 5) / 10)), 100)
    unit = " (%)" if scale == 100.0 else ""
    ax.set_xlabel(f"dev {metric}{unit}, mean over seeds (bar: standard deviation)", fontsize=8)
    ax.set_title(f"claim {claim.number}: {claim.name}", fontsize=9)
    return fig
