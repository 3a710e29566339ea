"""Claim 14: the efficient "-former" kernels train faster than exact attention and score worse,
on ListOps (the Long Range Arena's figure: accuracy against training speed, memory as the bubble).

Each kernel trains the ``listops`` task's default model with only its attention kernel changed
(options scaled to the budget's longest tree by :func:`~attnlab.lab.bench.attention.
scaled_options`, as ``benchmarks/lra.py`` does). What the report takes of a finished run besides
its scores (:func:`listops_rules`, called by the runner): the fitted no-training rules' dev
accuracy (:mod:`attnlab.lab.tasks.longrange.baselines`). What it times, after the training and
side by side (:func:`listops_costs`, :mod:`.timing`): one training step of each kernel's model
of seed 0 at half, once and twice the budget's bound on tree length, its time and its peak
tensor memory, and the speed the rule compares: a step at the bound on the training batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .claim import Claim, Section, compare, new_figure
from .jobs import JobResult
from .passes import sources
from .stats import Better, Verdict

__all__ = ["EfficientKernels", "listops_costs", "listops_rules"]

EXACT = "exact (softmax)"
#: the kernels of LRA's figure that this library has (sinkhorn, synthesizer, longformer and
#: nystrom too, but every one costs a job per seed)
KERNELS = ("linear", "performer", "linformer", "local", "reformer", "bigbird")
#: sequences per timed step of :func:`listops_costs`
BATCH = 4


def max_length(options: tuple[str, ...]) -> int:
    """The longest ListOps tree of a budget's ``listops`` options (the task's default if unset)."""
    from attnlab.lab.tasks.longrange.task import ListOpsOptions

    for option in options:
        if option.startswith("--task_options.max_length="):
            return int(option.split("=", 1)[1])
    return ListOpsOptions().max_length


def kernel_options(name: str, length: int, own: dict[str, Any] | None = None) -> tuple[str, ...]:
    """The options that make the listops model use kernel ``name`` at ``length`` tokens (``own``:
    options of the kernel's own on top, e.g. ``{"block": 16}``; ``benchmarks/lra.py`` builds
    its runs with this too)."""
    from attnlab.lab.bench.attention import scaled_options

    opts = scaled_options(name, length, own)
    return (f"--model.encoder.attention.kernel={name}",
            *(f"--model.encoder.attention.kernel_options.{k}={v}" for k, v in opts.items()))  # fmt: skip


class EfficientKernels(Claim):
    number, task, name = 14, "listops", "the xxformers are faster but worse"
    timed = "bound_step"  # its speeds are compared: timed side by side after the training
    claim = ("The efficient approximations of attention (linear, Performer, Linformer, local, "
             "Reformer, BigBird) train faster than exact attention on long sequences, and score "
             "worse: the Long Range Arena's trade-off.")  # fmt: skip
    setup = ("ListOps (nested MAX / MIN / MED / SUM_MOD lists; the value 0-9), the listops "
             "task's default model (width 64, 2 blocks of 4 heads) with only its attention kernel "
             "changed, every kernel at the same steps and seeds. Speed and memory: one training step "
             "of each kernel's trained model (seed 0's) on 4 random sequences of half, once and "
             "twice the longest trees' bound (task_options.max_length), its time and peak tensor "
             "memory, timed side by side after every run has finished (so that the runs may "
             "share the machine); the speed compared is a step at the bound itself on as many "
             "sequences as the training batch. "
             "Beside them, the no-training 'top level' rule (a table of the answer per operator "
             "and its direct digits, fitted on train).")  # fmt: skip
    rule = ("Precondition: exact attention's mean dev accuracy is above the top-level rule's "
            "(else inconclusive: nothing was learnt that an approximation could lose). Then "
            "every kernel that trains faster than exact (a training step of the training batch at "
            "the longest trees' bound quicker than exact's, timed side by side) must be "
            "worse on dev: exact - kernel, " + str(Better(0.0)) + "; the claim held if every "
            "faster kernel is worse, did not hold if a faster kernel is better, else (or when no "
            "kernel is faster at this length) inconclusive. Slower kernels are shown, not judged.")  # fmt: skip
    revisions = ("2026-12-05, the quick budget (not the rule): 100 training steps (were 150, "
                 "after which exact attention was at 19% dev, below the top-level rule's 48%: "
                 "nothing learnt, at 7.8 of the quick report's 52 minutes)",
                 "2026-12-05 again, the quick budget, for time alone: 50 steps (at 100 exact "
                 "attention was at 18% dev, so the quick budget shows the speeds only; its 14 "
                 "jobs, run alone, were 4.7 of the quick report's 22 minutes)",
                 "2026-12-06, the speed (not the threshold): a training step of the training "
                 "batch at the trees' bound, timed side by side after the training (was each "
                 "run's sequences/s over "
                 "its run, which needed every run alone, one at a time: about 30 hours of a "
                 "2-core machine at the full budget)")  # fmt: skip

    def variants(self) -> list[tuple[str, tuple[str, ...]]]:
        return self.variants_for(())

    def variants_for(self, options: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
        """Exact attention and each kernel, sized for the longest trees of ``options`` (the
        budget's listops options; the task's default without)."""
        length = max_length(options)
        return [(EXACT, ()), *((name, kernel_options(name, length)) for name in KERNELS)]

    def time_run(self, run: Path) -> dict[str, Any]:
        return listops_costs(run)

    def analyse(self, results: dict[str, list[JobResult]]) -> Section:
        exact = results[EXACT]
        parts, notes, judged = [], [], []
        rule = _mean([r.metrics.get("rules", {}).get("top level") for r in exact])
        learnt = bool(exact) and rule is not None and _mean([r.dev for r in exact]) > rule
        name = "exact attention beats the no-training top-level rule on dev"
        if not exact or rule is None:
            parts.append((name, Verdict.PENDING, None))
        else:
            parts.append((name, Verdict.HELD if learnt else Verdict.NOT_HELD, None))
            notes.append(f"the top-level rule scores {100 * rule:.1f}% on dev; exact attention "
                         f"{100 * _mean([r.dev for r in exact]):.1f}%")  # fmt: skip
        speed, said = _speeds(results)
        notes.extend(said)
        for label in KERNELS:
            ratio = speed.get(label)
            shown = "speed pending" if ratio is None else f"{ratio:.2f}x exact's speed"
            part = compare(f"dev(exact) - dev({label}), {shown}", Better(0.0), exact,
                           results[label])  # fmt: skip
            if ratio is None:  # not known to be faster or slower yet: nothing to judge by
                part = (part[0], Verdict.PENDING, part[2])
                judged.append(Verdict.PENDING)
            elif ratio > 1.0:
                judged.append(part[1])
            else:
                part = (part[0] + ": slower, not judged", *part[1:])
            parts.append(part)
        section = self._section(results, parts, notes=notes, details=self._costs(results))
        section.verdict = self._verdict(parts[0][1], judged)
        if parts[0][1] is Verdict.NOT_HELD:
            section.notes.append("exact attention did not learn more than the lookup rule at "
                                 "this budget: the trade-off cannot be judged")  # fmt: skip
        section.plot = _lra_plot(self, results, speed, rule)
        return section

    @staticmethod
    def _verdict(learnt: Verdict, judged: list[Verdict]) -> Verdict:
        if learnt is Verdict.PENDING or any(v is Verdict.PENDING for v in judged):
            return Verdict.PENDING
        if learnt is not Verdict.HELD or not judged:  # nothing learnt, or no kernel faster
            return Verdict.INCONCLUSIVE
        if any(v is Verdict.NOT_HELD for v in judged):
            return Verdict.NOT_HELD
        return Verdict.HELD if all(v is Verdict.HELD for v in judged) else Verdict.INCONCLUSIVE

    @staticmethod
    def _costs(results: dict[str, list[JobResult]]):
        """One training step at each length: time relative to exact's, and peak memory."""
        costs = {label: _measured(rs) for label, rs in results.items()}
        costs = {label: c for label, c in costs.items() if c}
        if EXACT not in costs:
            return None
        lengths = sorted(costs[EXACT], key=int)
        header = ["kernel", *(f"speed at {n} tokens (x exact)" for n in lengths),
                  *(f"peak MiB at {n}" for n in lengths)]  # fmt: skip
        rows = []
        for label, c in costs.items():
            speeds, peaks = [], []
            for n in lengths:
                got, ref = c.get(n, {}), costs[EXACT].get(n, {})
                ok = "step_s" in got and "step_s" in ref
                missing = got.get("error") or ("exact failed" if "step_s" in got else "-")
                speeds.append(f"{ref['step_s'] / got['step_s']:.2f}" if ok else missing)
                peaks.append(f"{got['peak_mib']:.1f}" if "peak_mib" in got else "-")
            rows.append([label, *speeds, *peaks])
        title = (f"one training step of {BATCH} random sequences per length, each trained model "
                 "(seed 0's, timed after the training)")  # fmt: skip
        return title, header, rows


def _measured(rs: list[JobResult]) -> dict[str, Any] | None:
    """The step costs of a variant: its seed-0 run's (the only one measured)."""
    return next((r.metrics["costs"] for r in rs if r.metrics.get("costs")), None)


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _speeds(results: dict[str, list[JobResult]]) -> tuple[dict[str, float], list[str]]:
    """Each timed variant's speed relative to exact's: exact's time of a training step at the
    trees' bound, at the runs' batch size (``bound_step``), over the variant's; and what the
    page should say of them. Results timed before that step was (the quick pages of 2026-12-05)
    have the middle length of ``costs`` instead, 4 sequences a step: used only when exact's run
    has no ``bound_step``. Figures of more than one timing pass are not side by side: then no
    variant has a speed."""
    key = "costs" if _bound_step(results[EXACT]) is None else "bound_step"
    notes = [f"{label}: its step at the trees' bound failed ({bound['error']})"
             for label, rs in results.items()
             if "error" in (bound := _bound_step(rs) or {})]  # fmt: skip
    timed = [r for rs in results.values() for r in rs if r.metrics.get(key)]
    if len(sources(timed, key)) > 1:
        return {}, [*notes, "the speeds come from more than one timing pass, so they are not "
                    "compared: `attnlab report` times every run of seed 0 again, together"]  # fmt: skip
    exact = _step_at_bound(results[EXACT], key == "costs")
    if exact is None:
        return {}, notes
    if key == "costs":
        notes.append(f"the speeds are of a step of {BATCH} sequences at the trees' bound: "
                     "these runs were timed before the step of the training batch was")  # fmt: skip
    steps = {label: _step_at_bound(rs, key == "costs") for label, rs in results.items()}
    return {label: exact / step for label, step in steps.items() if step}, notes


def _bound_step(rs: list[JobResult]) -> dict[str, Any] | None:
    return next((r.metrics["bound_step"] for r in rs if r.metrics.get("bound_step")), None)


def _step_at_bound(rs: list[JobResult], legacy: bool) -> float | None:
    """A variant's step time at the trees' bound: its ``bound_step``'s, or (``legacy``) the
    middle of its ``costs`` lengths."""
    if not legacy:
        bound = _bound_step(rs)
        return None if bound is None else bound.get("step_s")
    costs = _measured(rs)
    if not costs:
        return None
    middle = sorted(costs, key=int)[len(costs) // 2]
    return costs[middle].get("step_s")


def _lra_plot(claim: Claim, results, speed: dict[str, float], rule: float | None):
    """LRA's Figure 3: dev accuracy against training speed relative to exact; the bubble's
    area is the peak memory of a training step at the trees' length bound (relative to the
    largest)."""
    done = [(label, rs) for label, rs in results.items() if rs and label in speed]
    if not done:
        return None
    fig = new_figure(6.4, 4.2)
    ax = fig.add_subplot()
    peaks = []
    for label, rs in done:
        acc = 100 * _mean([r.dev for r in rs])
        costs = _measured(rs) or {}  # the middle length is the bound the kernel was built for
        middle = sorted(costs, key=int)[len(costs) // 2] if costs else ""
        peaks.append((label, speed[label], acc, costs.get(middle, {}).get("peak_mib")))
    largest = max((p for *_, p in peaks if p), default=1.0)
    bubbles = []
    for label, x, acc, peak in peaks:
        size = 40 + 1000 * (peak or 0.0) / largest  # area: peak memory, the largest 1,040 pt²
        ax.scatter(x, acc, s=size, alpha=0.5, color="#c44e52" if label == EXACT else "#4c72b0")
        bubbles.append((label, x, acc, size))
    captions = []
    if rule is not None:
        ax.axhline(100 * rule, color="grey", linestyle="--", linewidth=1)
        captions.append(ax.annotate("top-level rule (no training)", (0, 100 * rule), fontsize=7,
                                    xycoords=ax.get_yaxis_transform(), xytext=(2, 2),
                                    textcoords="offset points", color="grey"))  # fmt: skip
    ax.axvline(1.0, color="grey", linewidth=0.5)
    ax.set_xlabel("training speed relative to exact attention (a step at the trees' bound)",
                  fontsize=8)  # fmt: skip
    ax.set_ylabel("dev accuracy (%), mean over seeds", fontsize=8)
    ax.set_title(f"claim {claim.number}: {claim.name} (bubble: peak memory of a step)",
                 fontsize=9)  # fmt: skip
    _label_bubbles(fig, ax, bubbles, avoid=captions)  # last: the axes' limits are settled
    return fig


def _label_bubbles(fig, ax, bubbles: list[tuple[str, float, float, float]], avoid=()) -> None:
    """Name each bubble ``(label, x, y, area in pt²)`` beside it, left to right, in the first of
    eight places around it (above first) where its label stays inside the axes and clears the
    other bubbles, the labels placed before it and the artists ``avoid`` (a caption); where
    none does, in the place inside the axes with the fewest collisions. The axes widen first to
    leave room for a label above or below any bubble."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # the page's PNG is drawn by Agg too
    px = fig.dpi / 72  # pixels a point
    fig.draw_without_rendering()  # the layout settles where the axes are
    probes = [ax.text(0.5, 0.5, b[0], fontsize=8, transform=ax.transAxes) for b in bubbles]
    width = max(t.get_window_extent(renderer).width for t in probes)
    height = max(t.get_window_extent(renderer).height for t in probes)
    for t in probes:
        t.remove()
    radius = max(np.sqrt(a) / 2 for *_, a in bubbles) * px

    def widened(limits: tuple[float, float], values: list[float], pixels: float, size: float):
        """``limits`` (of a linear axis ``size`` pixels long) widened to leave ``pixels``
        beyond the outermost ``values``. Data a pixel is reckoned as if ``pixels`` were taken
        from both ends of the whole range (an over-estimate: a little more room than asked;
        at most 60% of the axis goes to the margins)."""
        per_px = (limits[1] - limits[0]) / max(size - 2 * pixels, 0.2 * size)
        return (min(limits[0], min(values) - pixels * per_px),
                max(limits[1], max(values) + pixels * per_px))  # fmt: skip

    ax.set_xlim(widened(ax.get_xlim(), [b[1] for b in bubbles], radius + width / 2 + 4 * px,
                        ax.bbox.width))  # fmt: skip
    ax.set_ylim(widened(ax.get_ylim(), [b[2] for b in bubbles], radius + height + 8 * px,
                        ax.bbox.height))  # fmt: skip
    fig.draw_without_rendering()
    inside = ax.get_window_extent(renderer)
    centres = [(ax.transData.transform((x, y)), np.sqrt(a) / 2 * px) for _, x, y, a in bubbles]
    placed = [artist.get_window_extent(renderer) for artist in avoid]

    def collisions(box, i: int) -> tuple[bool, int]:
        """(outside the axes, how many bubbles other than the ``i``-th and labels it touches)."""
        box = box.padded(2 * px)
        near = sum(np.hypot(*(c - np.clip(c, box.min, box.max))) < r
                   for j, (c, r) in enumerate(centres) if j != i)  # fmt: skip
        out = not (inside.contains(*box.min) and inside.contains(*box.max))
        return out, near + sum(box.overlaps(b) for b in placed)

    for i, (label, x, y, area) in sorted(enumerate(bubbles), key=lambda b: b[1][1]):
        o = np.sqrt(area) / 2 + 2  # the bubble's radius and a gap, in points
        d = o / np.sqrt(2)
        places = [(0, o, "center", "bottom"), (0, -o, "center", "top"),
                  (o, 0, "left", "center"), (-o, 0, "right", "center"),
                  (d, d, "left", "bottom"), (-d, d, "right", "bottom"),
                  (d, -d, "left", "top"), (-d, -d, "right", "top")]  # fmt: skip
        best = None  # (score, text, box): the fewest collisions so far, the earlier place
        for n, (dx, dy, ha, va) in enumerate(places):
            text = ax.annotate(label, (x, y), xytext=(dx, dy), textcoords="offset points",
                               ha=ha, va=va, fontsize=8)  # fmt: skip
            box = text.get_window_extent(renderer)
            score = (*collisions(box, i), n)
            if best is None or score < best[0]:
                if best is not None:
                    best[1].remove()
                best = (score, text, box)
            else:
                text.remove()
            if score[:2] == (False, 0):
                break
        placed.append(best[2])


def listops_rules(run: str | Path) -> dict[str, float]:
    """What claim 14 takes of every finished ``listops`` run besides its scores: each
    no-training rule's dev accuracy, fitted on the run's train trees."""
    from attnlab.lab.tasks.longrange.baselines import rule_accuracies
    from attnlab.lab.train.checkpoint import load_for_inference

    task, _, _ = load_for_inference(str(run), setup=True)
    splits = task.splits()
    return rule_accuracies(splits["train"], splits["dev"])


def listops_costs(run: str | Path, *, repeats: int = 3) -> dict[str, Any]:
    """Claim 14's timed measure of a finished ``listops`` run (:mod:`.timing`): ``costs``, per
    length (half, once and twice the run's ``task_options.max_length``) the time of a training
    step of the run's model on :data:`BATCH` random sequences and its peak tensor memory
    (:func:`~.step_costs.random_step_costs`), or the error that length gave (``"n/a: max_len"``
    for a Linformer's fixed ``max_len``); and ``bound_step``, the time of a step at that bound
    on as many sequences as the run's training batch: the speed the claim compares."""
    from attnlab.lab.train.checkpoint import load_for_inference

    from .step_costs import random_step_costs

    task, model, cfg = load_for_inference(str(run))
    longest = int(cfg.task_options.max_length)  # a ListOpsOptions, as load_for_inference gives
    lengths = (longest // 2, longest, 2 * longest)
    measured = random_step_costs(task, model, cfg, lengths, BATCH, repeats=repeats, memory=True)
    for cost in measured.values():
        if "max_len" in cost.get("error", ""):
            cost["error"] = "n/a: max_len"
    batch = int(cfg.train.batch_size)
    (bound,) = random_step_costs(task, model, cfg, (longest,), batch, repeats=repeats).values()
    return {"costs": measured, "bound_step": {"length": longest, "batch": batch, **bound}}
