"""Claim 14 of ``attnlab report`` (the -formers are faster but worse, on ListOps): its jobs, its
verdict on synthetic results with known answers, and the no-training rules it is set beside."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.lab.report.claims import BUDGETS, CLAIMS, select
from attnlab.lab.report.claims_lra import EXACT, KERNELS, EfficientKernels
from attnlab.lab.report.jobs import JobResult
from attnlab.lab.report.stats import Verdict
from attnlab.lab.tasks.longrange.baselines import rule_accuracies, top_level_key

CLAIM = CLAIMS["the xxformers are faster but worse"]


def tree(text: str) -> list[str]:
    """A ListOps tree's tokens, written as text."""
    return text.split()


def _result(label: str, seed: int, dev: float, speed: float, rule: float = 0.3) -> JobResult:
    """A run at dev accuracy ``dev``; seed 0's timed, as the timing pass does (a training step
    of ``1 / speed`` s at the trees' bound, 60 tokens; none if ``speed`` is 0)."""
    metrics = {"best_score": dev, "metric_name": "accuracy", "test": {"accuracy": dev},
               "rules": {"top level": rule}}  # fmt: skip
    if seed == 0 and speed:
        metrics["costs"] = {"30": {"step_s": 0.5 / speed, "peak_mib": 1.0},
                            "60": {"step_s": 1.0 / speed, "peak_mib": 2.0},
                            "120": {"error": "n/a: max_len"}}  # fmt: skip
    return JobResult(f"{label}{seed}", "listops", [], seed, label, metrics, 1.0, {})


def _analyse(exact=(0.40, 0.41), kernels=None, rule=0.3):
    """Exact at ``exact`` dev accuracies and 1,000 steps/s; each kernel ``(devs, speed)``
    (default: every kernel faster, 2,000 steps/s, and worse, 0.30 / 0.31)."""
    kernels = kernels or {}
    results = {EXACT: [_result(EXACT, s, d, 1000.0, rule) for s, d in enumerate(exact)]}
    for label in KERNELS:
        devs, speed = kernels.get(label, ((0.30, 0.31), 2000.0))
        results[label] = [_result(label, s, d, speed, rule) for s, d in enumerate(devs)]
    return CLAIM.analyse(results)


def test_held_when_every_faster_kernel_is_worse():
    section = _analyse()
    assert section.verdict is Verdict.HELD
    assert all("2.00x exact's speed" in name for name, _, _ in section.comparisons[1:])


def test_a_faster_kernel_better_than_exact_means_it_did_not_hold():
    section = _analyse(kernels={"performer": ((0.50, 0.51), 1500.0)})
    assert section.verdict is Verdict.NOT_HELD


def test_a_slower_kernel_is_shown_but_not_judged():
    section = _analyse(kernels={"reformer": ((0.50, 0.51), 500.0)})  # better, but slower
    assert section.verdict is Verdict.HELD
    (name, verdict, _), = [c for c in section.comparisons if "reformer" in c[0]]  # fmt: skip
    assert "0.50x exact's speed: slower, not judged" in name and verdict is Verdict.NOT_HELD


def test_inconclusive_when_nothing_was_learnt_or_no_kernel_is_faster():
    below_rule = _analyse(exact=(0.25, 0.26), rule=0.49)
    assert below_rule.verdict is Verdict.INCONCLUSIVE
    assert any("did not learn more than the lookup rule" in n for n in below_rule.notes)
    all_slower = _analyse(kernels={k: ((0.30, 0.31), 900.0) for k in KERNELS})
    assert all_slower.verdict is Verdict.INCONCLUSIVE
    one_seed = _analyse(exact=(0.40,), kernels={k: ((0.30,), 2000.0) for k in KERNELS})
    assert one_seed.verdict is Verdict.INCONCLUSIVE  # no spread to judge by


def test_the_speed_is_the_timed_step_at_the_bound_not_a_runs_throughput():
    """The timed step at the trees' bound (the middle length; seed 0's run) decides which
    kernels are faster: not the throughput a run recorded while it trained (which a neighbour
    on the machine changes), nor the other lengths."""
    results = {EXACT: [_result(EXACT, s, d, 1000.0) for s, d in enumerate((0.40, 0.41))]}
    results.update({k: [_result(k, s, d, 2000.0) for s, d in enumerate((0.30, 0.31))]
                    for k in KERNELS})  # fmt: skip
    linear = results["linear"][0].metrics
    linear["units_per_s"] = 1e9  # trained fast, beside nothing: ignored
    linear["costs"]["30"]["step_s"] = 1e-9  # fast at half the bound: ignored
    linear["costs"]["60"]["step_s"] = 2e-3  # slower than exact's 1e-3 at the bound
    section = CLAIM.analyse(results)
    (name, _, _), = [c for c in section.comparisons if "(linear)" in c[0]]  # fmt: skip
    assert "0.50x exact's speed: slower, not judged" in name
    assert section.verdict is Verdict.HELD


def test_the_step_of_the_training_batch_is_the_speed_where_it_was_timed():
    """A run timed with ``bound_step`` (a step of the training batch at the bound) is judged by
    it, not by the 4-sequence ``costs``; a kernel without one beside an exact that has one has
    no speed yet (figures of two methods are not compared)."""

    def timed(label: str, seed: int, dev: float, bound_s: float | None) -> JobResult:
        r = _result(label, seed, dev, 2000.0)  # costs: twice exact's speed...
        if seed == 0 and bound_s is not None:
            r.metrics["bound_step"] = {"length": 60, "batch": 32, "step_s": bound_s}
        return r

    results = {EXACT: [timed(EXACT, s, d, 0.1) for s, d in enumerate((0.40, 0.41))]}
    results.update({k: [timed(k, s, d, 0.05) for s, d in enumerate((0.30, 0.31))]
                    for k in KERNELS})  # fmt: skip
    results["local"] = [timed("local", s, d, 0.2) for s, d in enumerate((0.30, 0.31))]
    results["bigbird"] = [timed("bigbird", s, d, None) for s, d in enumerate((0.30, 0.31))]
    section = CLAIM.analyse(results)
    names = {c[0].split(",")[0]: c for c in section.comparisons[1:]}
    assert "2.00x exact's speed" in names["dev(exact) - dev(linear)"][0]
    assert "0.50x exact's speed: slower" in names["dev(exact) - dev(local)"][0]  # not costs' 2x
    assert "speed pending" in names["dev(exact) - dev(bigbird)"][0]
    assert section.verdict is Verdict.PENDING
    assert not any("timed before the step of the training batch" in n for n in section.notes)
    assert any("timed before the step of the training batch" in n for n in _analyse().notes)


def test_speeds_of_two_timing_passes_are_not_compared():
    def timed(label: str, seed: int, dev: float, at: str) -> JobResult:
        r = _result(label, seed, dev, 2000.0)
        if seed == 0:
            r.metrics["bound_step"] = {"length": 60, "batch": 32, "step_s": 0.1}
            r.metrics["timed"] = {"at": at, "cpu": "a CPU", "threads": 2}
        return r

    results = {label: [timed(label, s, d, "then") for s, d in enumerate((0.40, 0.41))]
               for label in (EXACT, *KERNELS)}  # fmt: skip
    results["linear"][0].metrics["timed"]["at"] = "later"  # e.g. trained again since
    section = CLAIM.analyse(results)
    assert section.verdict is Verdict.PENDING
    assert all("speed pending" in c[0] for c in section.comparisons[1:])
    assert any(n.startswith("the speeds come from more than one timing pass") for n in
               section.notes)  # fmt: skip
    exact_failed = {k: list(v) for k, v in results.items()}
    exact_failed["linear"][0].metrics["timed"]["at"] = "then"
    exact_failed[EXACT][0].metrics["bound_step"] = {"length": 60, "batch": 32,
                                                    "error": "out of memory"}  # fmt: skip
    section = CLAIM.analyse(exact_failed)
    assert section.verdict is Verdict.PENDING
    assert f"{EXACT}: its step at the trees' bound failed (out of memory)" in section.notes


def test_pending_until_every_run_is_in():
    results = {EXACT: [_result(EXACT, 0, 0.4, 1000.0)], **{k: [] for k in KERNELS}}
    assert CLAIM.analyse(results).verdict is Verdict.PENDING


def test_no_kernel_is_judged_while_exacts_speed_is_unknown():
    results = {EXACT: [_result(EXACT, s, d, 0.0) for s, d in enumerate((0.40, 0.41))]}
    results.update({k: [_result(k, s, d, 2000.0) for s, d in enumerate((0.30, 0.31))]
                    for k in KERNELS})  # fmt: skip
    section = CLAIM.analyse(results)
    assert section.verdict is Verdict.PENDING
    assert all(v is Verdict.PENDING for _, v, _ in section.comparisons[1:])


def test_the_kernels_are_sized_for_the_budgets_longest_trees():
    for budget, length in (("smoke", 60), ("quick", 300), ("full", 2000)):
        jobs = CLAIM.jobs(BUDGETS[budget])
        assert list(jobs) == [EXACT, *KERNELS]
        assert not any("--model.encoder.attention.kernel" in o for o in jobs[EXACT][0].options)
        linformer = jobs["linformer"][0].options
        assert f"--model.encoder.attention.kernel_options.max_len={length}" in linformer
        assert len(jobs["local"]) == len(BUDGETS[budget].seeds)
    assert select(["xformers"]) == select(["14"]) == [CLAIM]
    assert isinstance(CLAIM, EfficientKernels)


def test_the_top_level_rule_reads_the_operator_and_its_direct_digits():
    assert top_level_key(tree("[MAX 2 9 [MIN 4 7 ] 0 ]")) == ("[MAX", 9, 1)
    assert top_level_key(tree("[SM 5 8 ]")) == ("[SM", 3, 0)
    assert top_level_key(tree("[MED 3 1 2 ]")) == ("[MED", (1, 2, 3), 0)
    flat = [(tree("[MAX 1 7 ]"), 7), (tree("[MAX 4 2 ]"), 4), (tree("[MIN 6 3 ]"), 3),
            (tree("[MIN 8 9 ]"), 8)]  # fmt: skip
    held_out = [(tree("[MAX 7 1 ]"), 7), (tree("[MIN 3 6 ]"), 3), (tree("[MAX 0 5 ]"), 5)]
    scores = rule_accuracies(flat, held_out)
    assert scores["top level"] == pytest.approx(2 / 3)  # (MAX, 5) was never seen: by operator
    assert scores["operator"] == pytest.approx(2 / 3)  # MAX -> 7 or 4 (first seen), MIN -> 3
    assert scores["majority"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="needs train and held-out trees"):
        rule_accuracies([], held_out)


def _labels_clear(fig, ax, captions=()) -> None:
    """Every bubble of ``ax`` has a label inside the axes that overlaps no other label, no
    caption and no other bubble (each bubble a scatter of one point; its label the text
    placed nearest it)."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    px = fig.dpi / 72
    bubbles = [(ax.transData.transform(c.get_offsets()[0]), np.sqrt(c.get_sizes()[0]) / 2 * px)
               for c in ax.collections]  # fmt: skip
    labels = [t.get_window_extent(renderer) for t in ax.texts if t not in captions]
    fixed = [t.get_window_extent(renderer) for t in captions]
    assert len(labels) == len(bubbles)
    inside = ax.get_window_extent(renderer)

    def gap(centre, box) -> float:
        return float(np.hypot(*(centre - np.clip(centre, box.min, box.max))))

    for n, box in enumerate(labels):
        own = min(range(len(bubbles)), key=lambda j: gap(bubbles[j][0], box))
        assert inside.contains(*box.min) and inside.contains(*box.max), n
        assert not any(box.overlaps(b) for b in labels[:n] + labels[n + 1 :] + fixed), n
        assert all(gap(c, box) >= r for j, (c, r) in enumerate(bubbles) if j != own), n


def test_the_bubbles_labels_clear_each_other_the_other_bubbles_and_the_caption():
    """Crowded as in the quick report (three large bubbles touching, two small ones
    overlapping, squeezed by a rule far above), plus two at nearly one point and a caption
    among them, on a figure of 200 dpi (points are not pixels)."""
    from matplotlib.figure import Figure

    from attnlab.lab.report.claims_lra import _label_bubbles

    bubbles = [("performer", 0.58, 15.0, 1040.0), ("reformer", 0.64, 17.5, 806.0),
               ("linformer", 0.77, 15.5, 691.0), ("exact (softmax)", 1.0, 16.5, 228.0),
               ("local", 1.73, 17.25, 300.0), ("bigbird", 1.76, 16.5, 295.0),
               ("twin", 2.2, 16.0, 200.0), ("twin's twin", 2.21, 16.05, 200.0),
               ("linear", 2.54, 16.75, 210.0)]  # fmt: skip
    fig = Figure(figsize=(6.4, 4.2), dpi=200, layout="constrained")
    ax = fig.add_subplot()
    for _, x, y, area in bubbles:
        ax.scatter(x, y, s=area)
    ax.axhline(48.0)  # a rule far above squeezes the bubbles together at the bottom
    caption = ax.annotate("a caption among them", (0, 16.2), fontsize=7,
                          xycoords=ax.get_yaxis_transform(), xytext=(2, 2),
                          textcoords="offset points")  # fmt: skip
    _label_bubbles(fig, ax, bubbles, avoid=[caption])
    assert sorted(t.get_text() for t in ax.texts) == sorted([caption.get_text(),
                                                             *(b[0] for b in bubbles)])  # fmt: skip
    _labels_clear(fig, ax, [caption])


def test_claim_14s_figure_labels_its_bubbles_clear_of_the_rules_caption():
    from attnlab.lab.report.claims_lra import _lra_plot

    def runs(label: str, dev: float, peak: float) -> list[JobResult]:
        costs = {n: {"step_s": 0.1, "peak_mib": peak} for n in ("30", "60", "120")}
        return [JobResult(f"{label}{s}", "listops", [], s, label,
                          {"best_score": dev, **({"costs": costs} if s == 0 else {})}, 1.0, {})
                for s in (0, 1)]  # fmt: skip

    results = {EXACT: runs(EXACT, 0.165, 300.0), "performer": runs("performer", 0.15, 1200.0),
               "reformer": runs("reformer", 0.175, 900.0), "local": runs("local", 0.17, 350.0),
               "bigbird": runs("bigbird", 0.165, 340.0)}  # fmt: skip
    speed = {EXACT: 1.0, "performer": 0.58, "reformer": 0.64, "local": 1.73, "bigbird": 1.76}
    fig = _lra_plot(CLAIM, results, speed, rule=0.16)
    ax = fig.axes[0]
    caption = next(t for t in ax.texts if t.get_text().startswith("top-level rule"))
    _labels_clear(fig, ax, [caption])


@pytest.mark.parametrize("obstacle", ["label", "bubble", "caption"])
def test_a_label_leaves_the_place_above_its_bubble_when_that_is_taken(obstacle):
    """The place above bubble A is taken by the label of a bubble placed before it, by the rim
    of a large bubble (within its radius in points, not within that many pixels: 200 dpi), or
    by a caption; A's label goes elsewhere, clear of it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from attnlab.lab.report.claims_lra import _label_bubbles

    fig = Figure(figsize=(6, 4), dpi=200)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(xlim=(0, 10), ylim=(0, 10))
    fig.draw_without_rendering()
    px, to_data = fig.dpi / 72, ax.transData.inverted()
    a = ax.transData.transform((5, 5))  # A, 20 pt² (a radius of 2.2 pt)
    at = lambda dx, dy: tuple(to_data.transform(a + np.array([dx, dy]) * px))  # noqa: E731
    bubbles = [("a wide label for A", 5, 5, 20.0)]
    captions = []
    if obstacle == "label":  # B 40 pt to the left, labelled first: its label above too
        bubbles.insert(0, ("a wide label for B", *at(-40, 0), 20.0))
    elif obstacle == "bubble":  # B's rim 4 pt into the place above A
        r = np.sqrt(2000.0) / 2  # 22.4 pt
        bubbles.append(("B", *at(0, 2.2 + 2 + 4 + r - 4), 2000.0))
    else:
        captions.append(ax.annotate("a caption", at(0, 2.2 + 2 + 5), ha="center", fontsize=7))
    for _, x, y, area in bubbles:
        ax.scatter(x, y, s=area)
    _label_bubbles(fig, ax, bubbles, avoid=captions)
    label = next(t for t in ax.texts if t.get_text() == "a wide label for A")
    assert label.xyann[1] <= 0 or label.get_ha() != "center"  # not above A
    _labels_clear(fig, ax, captions)
