"""The lecture's claims, each an experiment with its verdict rule written before any result.

A :class:`Claim` names its runs per variant (:meth:`Claim.variants`: a label and the
``--a.b=value`` options that make the variant) and reads the finished ones back
(:meth:`Claim.analyse`), giving a :class:`Section`: the claim in one sentence, the setup, a table
per variant, a plot, the comparisons its rule made and the verdict. Variants that several claims
need (the self-attention tagger, the window of 1 or 3) are one job, run once.

Every claim here runs on ``pos`` (Brown, universal tags): the lecture's running example, "I saw
a saw", is a tagging problem. :data:`BUDGETS` says what each budget trains.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .jobs import Job, JobResult
from .stats import MIN_SEEDS, Better, Comparison, Equivalent, Verdict, combine

__all__ = ["Budget", "BUDGETS", "Claim", "Section", "CLAIMS", "claim_names"]


@dataclass(frozen=True)
class Budget:
    """What one budget trains: the seeds and the options added to every job."""

    name: str
    seeds: tuple[int, ...]
    options: tuple[str, ...]
    note: str


BUDGETS = {
    "smoke": Budget(
        "smoke",
        (0,),
        (
            "--train.max_steps=3",
            "--task_options.max_train_sentences=200",
            "--model.input.dim=32",
            "--train.log_every=0",
        ),
        "checks the plumbing only: 3 training steps on 200 sentences, one seed; its verdicts "
        "say nothing about the claims",
    ),  # fmt: skip
    "quick": Budget(
        "quick",
        (0, 1),
        (
            "--train.max_steps=250",
            "--task_options.max_train_sentences=8000",
            "--train.log_every=0",
        ),
        "250 steps on 8,000 Brown sentences, seeds 0 and 1: a first look, not the recipe",
    ),  # fmt: skip
    "full": Budget(
        "full",
        (0, 1, 2),
        ("--train.log_every=0",),
        "each task's documented recipe (pos: 10 epochs), seeds 0, 1 and 2",
    ),  # fmt: skip
}

TASK = "pos"
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


class Claim:
    """A claim of the lecture (module docstring)."""

    number: int = 0
    name: str = ""
    claim: str = ""
    setup: str = ""
    rule: str = ""

    def variants(self) -> list[tuple[str, tuple[str, ...]]]:
        raise NotImplementedError

    def jobs(self, budget: Budget) -> dict[str, list[Job]]:
        """Per variant label, its job per seed of ``budget``."""
        return {
            label: [Job(TASK, (*budget.options, *options), seed, label) for seed in budget.seeds]
            for label, options in self.variants()
        }

    def analyse(self, results: dict[str, list[JobResult]]) -> Section:
        raise NotImplementedError

    # helpers
    def _section(self, results: dict[str, list[JobResult]], parts, **extra) -> Section:
        rows = [_row(label, rs) for label, rs in results.items()]
        verdicts = [v for _, v, _ in parts]
        return Section(self.number, self.name, self.claim, self.setup, self.rule, rows, parts,
                       combine(verdicts), plot=_bar_plot(self, rows), **extra)  # fmt: skip


def _scores(rs: Sequence[JobResult]) -> list[float]:
    return [r.dev for r in rs]


def _row(label: str, rs: Sequence[JobResult]) -> dict[str, Any]:
    dev = _scores(rs)
    test = [float(r.metrics.get("test", {}).get("accuracy", np.nan)) for r in rs]
    return {
        "variant": label,
        "seeds": len(rs),
        "dev": float(np.mean(dev)) if dev else None,
        "dev_sd": float(np.std(dev, ddof=1)) if len(dev) > 1 else None,
        "test": float(np.nanmean(test)) if test else None,
        "parameters": int(rs[0].metrics.get("parameters", 0)) if rs else None,
        "wall_s": float(np.mean([r.wall_s for r in rs])) if rs else None,
    }


def _compare(name: str, rule: Callable, a: Sequence[JobResult], b: Sequence[JobResult]):
    """One part of a verdict: ``rule`` on the dev scores of ``a`` and ``b`` (pending while
    either has none)."""
    if not a or not b:
        return name, Verdict.PENDING, None
    verdict, comparison = rule(_scores(a), _scores(b))
    return name, verdict, comparison


def _bar_plot(claim: Claim, rows: list[dict[str, Any]]):
    """Dev accuracy per variant with its seeds' spread (a matplotlib Figure)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    done = [r for r in rows if r["dev"] is not None]
    if not done:
        return None
    fig = Figure(figsize=(6.4, 0.45 * len(done) + 1.2), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(done))
    ax.barh(y, [100 * r["dev"] for r in done], xerr=[100 * (r["dev_sd"] or 0) for r in done],
            color="#4c72b0", capsize=3)  # fmt: skip
    ax.set_yticks(y, [r["variant"] for r in done], fontsize=8)
    ax.invert_yaxis()
    lo = min(100 * r["dev"] for r in done)
    ax.set_xlim(max(0.0, lo - 5), 100)
    ax.set_xlabel("dev accuracy (%), mean over seeds (bar: standard deviation)", fontsize=8)
    ax.set_title(f"claim {claim.number}: {claim.name}", fontsize=9)
    return fig


class WindowGivesContext(Claim):
    number, name = 1, "a window gives context"
    claim = ('A vector on its own cannot tag "I saw a saw"; a window of neighbours gives the '
             "context it needs, and self-attention gives it too.")  # fmt: skip
    setup = ("Part-of-speech tagging (pos, Brown, universal tags): a fully connected network over "
             "each word alone (k=1) and over a window of 3, against the self-attention tagger.")  # fmt: skip
    rule = "k=3 beats k=1, and self-attention beats k=1: " + str(Better(0.0))

    def variants(self):
        return [fc(1), fc(3), SA]

    def analyse(self, results):
        k1, k3, sa = (results[v[0]] for v in self.variants())
        parts = [_compare("FC k=3 - FC k=1", Better(0.0), k3, k1),
                 _compare("self-attention - FC k=1", Better(0.0), sa, k1)]  # fmt: skip
        return self._section(results, parts)


class WideWindowsOverfit(Claim):
    number, name = 2, "a wide window costs parameters and stops helping"
    claim = ("A window wide enough to see the whole sentence needs a parameter per position and "
             "overfits; self-attention's parameters do not grow with the length it sees.")  # fmt: skip
    setup = ("pos with FC windows k = 1, 3, 5, 9, 15 against the self-attention tagger: "
             "parameters and dev accuracy per k.")  # fmt: skip
    rule = ("FC parameters grow with k (counted); and the widest window, k=15, does not beat "
            "k=5: held if the 95% interval of dev(k=15) - dev(k=5) lies below 0.005 "
            "(half a point), did not hold if above it, else inconclusive.")  # fmt: skip
    WINDOWS = (1, 3, 5, 9, 15)

    def variants(self):
        return [*(fc(k) for k in self.WINDOWS), SA]

    def analyse(self, results):
        fcs = [results[fc(k)[0]] for k in self.WINDOWS]
        counts = [rs[0].metrics.get("parameters") for rs in fcs if rs]
        if len(counts) < len(fcs):
            grows = ("FC parameters grow with k", Verdict.PENDING, None)
        else:
            ok = all(a < b for a, b in zip(counts, counts[1:]))
            grows = ("FC parameters grow with k", Verdict.HELD if ok else Verdict.NOT_HELD, None)
        name, verdict, comparison = _compare("dev(k=15) - dev(k=5)", Better(0.005), fcs[-1], fcs[2])
        # "k=15 beats k=5 by half a point" holding is this claim not holding, and vice versa
        flipped = {Verdict.HELD: Verdict.NOT_HELD, Verdict.NOT_HELD: Verdict.HELD}.get(
            verdict, verdict
        )
        return self._section(results, [grows, (name, flipped, comparison)])


class Scores(Claim):
    number, name = 4, "dot-product or additive scores"
    claim = ("The relevance score can be a scaled dot product or additive (tanh) attention: "
             "both work, within a point of each other.")  # fmt: skip
    setup = "The self-attention tagger with scaled dot-product scores, and with additive scores."
    rule = "additive vs scaled dot-product: " + str(Equivalent(0.01))

    def variants(self):
        return [SA, ("additive (tanh) scores", ("--model.encoder.attention.score=additive",))]

    def analyse(self, results):
        sa, additive = (results[v[0]] for v in self.variants())
        return self._section(results, [_compare("additive - dot", Equivalent(0.01), additive, sa)])


class Normalisations(Claim):
    number, name = 5, "softmax is not the only normalisation"
    claim = ("The weights need not come from a softmax: ReLU (and sigmoid) normalisation reach "
             "within a point of it.")  # fmt: skip
    setup = "The self-attention tagger with softmax, ReLU and sigmoid normalisation of the scores."
    rule = "ReLU vs softmax and sigmoid vs softmax, each: " + str(Equivalent(0.01))

    def variants(self):
        return [SA, ("ReLU normalisation", ("--model.encoder.attention.normalize=relu",)),
                ("sigmoid normalisation", ("--model.encoder.attention.normalize=sigmoid",))]  # fmt: skip

    def analyse(self, results):
        sa, relu, sigmoid = (results[v[0]] for v in self.variants())
        parts = [_compare("ReLU - softmax", Equivalent(0.01), relu, sa),
                 _compare("sigmoid - softmax", Equivalent(0.01), sigmoid, sa)]  # fmt: skip
        return self._section(results, parts)


class Heads(Claim):
    number, name = 6, "several heads, several kinds of relevance"
    claim = ("Several heads at the same width look for different kinds of relevance, and do no "
             "worse than one head.")  # fmt: skip
    setup = ("The self-attention tagger with 1 head and with 4 heads at the same width; how "
             "different the 4 heads' maps are: their mean pairwise Jensen-Shannon divergence "
             "(nats; 0 = identical maps) on the report's probe sentences.")  # fmt: skip
    rule = ("4 heads do no worse than 1: held if the 95% interval of dev(4) - dev(1) lies above "
            "-0.005 (half a point), did not hold if below, else inconclusive; and the heads "
            "differ: mean pairwise JS divergence above 0.05 nats.")  # fmt: skip

    def variants(self):
        return [SA, ("self-attention, 1 head", ("--model.encoder.heads=1",))]

    def analyse(self, results):
        many, one = (results[v[0]] for v in self.variants())
        parts = [_compare("dev(4 heads) - dev(1 head)", Better(-0.005), many, one)]
        notes = []
        if many:
            js = [r.metrics["head_js"] for r in many if r.metrics.get("head_js") is not None]
            if js:
                mean = float(np.mean(js))
                verdict = Verdict.HELD if mean > 0.05 else Verdict.NOT_HELD
                if len(js) < MIN_SEEDS:  # one seed's maps: no verdict, as for the scores
                    verdict = Verdict.INCONCLUSIVE
                parts.append((f"heads' mean pairwise JS divergence {mean:.3f} nats > 0.05",
                              verdict, None))  # fmt: skip
                notes.append(f"JS divergence per seed: {', '.join(f'{v:.3f}' for v in js)}")
        return self._section(results, parts, notes=notes)


CLAIMS: dict[str, Claim] = {c.name: c for c in
                            (WindowGivesContext(), WideWindowsOverfit(), Scores(), Normalisations(),
                             Heads())}  # fmt: skip
_SHORT = {"window": 1, "wide-window": 2, "scores": 4, "normalisation": 5, "heads": 6}


def claim_names() -> list[str]:
    """The names ``--claims`` takes."""
    return list(_SHORT)


def select(names: Sequence[str] | None) -> list[Claim]:
    """The claims called ``names`` (their short names or numbers; all when None).

    Raises:
        ValueError: an unknown claim, listing the known ones.
    """
    by_number = {c.number: c for c in CLAIMS.values()}
    if not names:
        return sorted(CLAIMS.values(), key=lambda c: c.number)
    chosen = []
    for name in names:
        number = _SHORT.get(name) or (int(name) if name.isdigit() else None)
        if number not in by_number:
            known = ", ".join(f"{k} ({v})" for k, v in _SHORT.items())
            raise ValueError(f"--claims: unknown claim {name!r}; the claims are {known}")
        chosen.append(by_number[number])
    return sorted(set(chosen), key=lambda c: c.number)
