"""Claim 11 of the report, on ``recall``: self-attention reaches a key far back in one step, an
RNN must carry it through every step between; and what each pays per training step as the
sequences grow (:func:`recall_measures`, timed side by side after the training: :mod:`.timing`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .claim import Claim, by_seed, compare, new_figure, scores_of, small_axes
from .jobs import JobResult
from .stats import Better, Verdict

__all__ = ["ForgettingRNN", "recall_measures"]

#: sequences per timed step of :func:`recall_measures`, and their lengths (tokens)
SPEED_BATCH = 8
LENGTHS = (20, 80, 320, 1280)


class ForgettingRNN(Claim):
    number, task, name = 11, "recall", "self-attention recalls what an RNN forgets"
    timed = "step_s_at"  # its speeds are compared: timed side by side after the training
    claim = ("Self-attention reaches any earlier position in one step; an RNN must carry it "
             "through every step between, and forgets a key far back.")  # fmt: skip
    setup = ("The recall task (key-value pairs, the queried one 8 to 16 tokens back, then its "
             "key: give the value; read out at the query's position): the self-attention encoder "
             "against a bidirectional LSTM (rnn). Recall is learnt late, in one jump (BENCHMARKS.md: "
             "about 20,000 steps on 500,000 sequences at distance 16), so the rule first asks that "
             "some model learnt it. Beside it, the speed of a training step of each trained model on "
             f"{SPEED_BATCH} random sequences of {', '.join(map(str, LENGTHS))} tokens: "
             "self-attention computes every position at once, the RNN one after another.")  # fmt: skip
    rule = ("if the better model's mean dev accuracy is under 50% (not learnt: the comparison says "
            "nothing about forgetting), inconclusive; else self-attention beats the RNN by more "
            "than 5 points: " + str(Better(0.05)))  # fmt: skip
    LEARNT = 0.5
    OPTIONS = ("--task_options.distance=16", "--model.head.pooling=last")
    #: the two models (the task's self-attention encoder; the rnn encoder's defaults, a 2-layer
    #: BiLSTM), which ``benchmarks/rnn_vs_attention.py recall`` runs too, at other distances
    ATTENTION: tuple[str, ...] = ()
    RNN = ("--model.encoder.kind=rnn",)
    revisions = ("2026-12-04, after the first quick run (both models near chance at distance 32-64, "
                 "SA 17.7%, RNN 16.4%, scored 'did not hold'): the 'learnt' precondition added, and "
                 "distance 16 with the query-position readout, where BENCHMARKS.md had seen recall "
                 "learnt",)  # fmt: skip

    def variants(self):
        return [("self-attention", (*self.OPTIONS, *self.ATTENTION)),
                ("RNN (BiLSTM)", (*self.OPTIONS, *self.RNN))]  # fmt: skip

    def time_run(self, run: Path) -> dict[str, Any]:
        return recall_measures(run)

    def analyse(self, results):
        sa, rnn = (results[v[0]] for v in self.variants())
        name, verdict, comparison = compare("dev(SA) - dev(RNN)", Better(0.05), sa, rnn)
        notes = []
        best = max((float(np.mean(scores_of(rs))) for rs in (sa, rnn) if rs), default=None)
        if best is not None and best < self.LEARNT and verdict is not Verdict.PENDING:
            verdict = Verdict.INCONCLUSIVE
            notes.append(f"not learnt at this budget: the better model's dev accuracy is "
                         f"{100 * best:.1f}% (< {100 * self.LEARNT:.0f}%)")  # fmt: skip
        notes += [by_seed(label, rs) for label, rs in results.items() if rs]
        steps = {label: _steps(rs) for label, rs in results.items()}
        for label, measured in steps.items():
            if measured:
                notes.append(f"{label}, a training step on {SPEED_BATCH} sequences: " + ", ".join(
                    f"{n} tokens {1000 * t:.1f} ms" for n, t in measured.items()))  # fmt: skip
        section = self._section(results, [(name, verdict, comparison)], notes=notes)
        section.plot = _speed_plot(self, steps) or section.plot
        return section


def _steps(rs: list[JobResult]) -> dict[int, float]:
    """Seconds of a training step per length, from the run that measured them (seed 0)."""
    for r in rs:
        if r.metrics.get("step_s_at"):
            return {int(n): float(t) for n, t in sorted(r.metrics["step_s_at"].items(),
                                                         key=lambda item: int(item[0]))}  # fmt: skip
    return {}


def recall_measures(run: str | Path, *, repeats: int = 3) -> dict[str, Any]:
    """Claim 11's timed measure of a finished ``recall`` run (:mod:`.timing`): ``step_s_at``, the
    seconds of a training step of the run's model (in its precision) on :data:`SPEED_BATCH`
    random sequences of each of :data:`LENGTHS` tokens (``step_errors``: the message of a
    length the model cannot run, e.g. beyond learned positions' maximum)."""
    from attnlab.lab.train.checkpoint import load_for_inference

    from .step_costs import random_step_costs

    task, model, cfg = load_for_inference(str(run))
    costs = random_step_costs(task, model, cfg, LENGTHS, SPEED_BATCH, repeats=repeats)
    measured = {n: c["step_s"] for n, c in costs.items() if "step_s" in c}
    errors = {n: c["error"] for n, c in costs.items() if "error" in c}
    return {"step_s_at": measured, **({"step_errors": errors} if errors else {})}


def _speed_plot(claim: Claim, steps: dict[str, dict[int, float]]):
    """A training step's time against the sequence length, per model (log-log)."""
    if not any(steps.values()):
        return None
    fig = new_figure(6.4, 3.4)
    ax = fig.add_subplot()
    for label, measured in steps.items():
        if measured:
            ax.plot(list(measured), [1000 * t for t in measured.values()], marker="o",
                    label=label)  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="tokens per sequence",
           ylabel=f"ms per training step ({SPEED_BATCH} sequences)")  # fmt: skip
    small_axes(ax, claim)
    return fig
