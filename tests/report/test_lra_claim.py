"""Claim 14 of ``attnlab report`` (the -formers are faster but worse, on ListOps): its jobs, its
verdict on synthetic results with known answers, and the no-training rules it is set beside."""

from __future__ import annotations

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
    metrics = {"best_score": dev, "metric_name": "accuracy", "test": {"accuracy": dev},
               "units_per_s": speed, "rules": {"top level": rule}}  # fmt: skip
    return JobResult(f"{label}{seed}", "listops", [], seed, label, metrics, 1.0, {})


def _analyse(exact=(0.40, 0.41), kernels=None, rule=0.3):
    """Exact at ``exact`` dev accuracies and 1,000 tokens/s; each kernel ``(devs, speed)``
    (default: every kernel faster, 2,000 tokens/s, and worse, 0.30 / 0.31)."""
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


def test_the_bubbles_labels_clear_each_other_and_the_other_bubbles():
    """Claim 14's figure: bubbles crowded as in the quick report (three large ones touching,
    two small ones overlapping) each get a label inside the axes that overlaps no other label
    and no other bubble."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from attnlab.lab.report.claims_lra import _label_bubbles

    bubbles = [("performer", 0.58, 15.0, 1040.0), ("reformer", 0.64, 17.5, 806.0),
               ("linformer", 0.77, 15.5, 691.0), ("exact (softmax)", 1.0, 16.5, 228.0),
               ("local", 1.73, 17.25, 300.0), ("bigbird", 1.76, 16.5, 295.0),
               ("linear", 2.54, 16.75, 210.0)]  # fmt: skip
    fig = Figure(figsize=(6.4, 4.2), layout="constrained")
    renderer = FigureCanvasAgg(fig).get_renderer()
    ax = fig.add_subplot()
    for _, x, y, area in bubbles:
        ax.scatter(x, y, s=area)
    ax.axhline(48.0)  # the rule, far above: the bubbles sit at the bottom edge
    _label_bubbles(fig, ax, bubbles)
    fig.draw_without_rendering()
    boxes = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    assert sorted(boxes) == sorted(b[0] for b in bubbles)
    inside = ax.get_window_extent(renderer)
    px = fig.dpi / 72
    for i, (label, *_) in enumerate(bubbles):
        box = boxes[label]
        assert inside.contains(*box.min) and inside.contains(*box.max), label
        assert not any(box.overlaps(boxes[o[0]]) for o in bubbles if o[0] != label), label
        for other, ox, oy, area in bubbles[:i] + bubbles[i + 1 :]:
            c = ax.transData.transform((ox, oy))
            gap = np.hypot(*(c - np.clip(c, box.min, box.max)))
            assert gap >= np.sqrt(area) / 2 * px, (label, other)
