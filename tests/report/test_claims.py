"""The claims' own verdict logic on synthetic results with known answers (claims 3, 7, 14 and
15 have theirs in test_long_range.py, test_rescore.py and test_lra_claim.py)."""

from __future__ import annotations

import pytest

from attnlab.lab.report.claim import SA, fc
from attnlab.lab.report.claims import BUDGETS, CLAIMS, select
from attnlab.lab.report.jobs import JobResult
from attnlab.lab.report.stats import Verdict

H, N, I, P = Verdict.HELD, Verdict.NOT_HELD, Verdict.INCONCLUSIVE, Verdict.PENDING


def runs(label: str, devs, task: str = "pos", options=(), **metrics) -> list[JobResult]:
    """One finished job per dev score (seeds 0, 1, ...)."""
    return [JobResult(f"{label}{seed}", task, list(options), seed, label,
                      {"best_score": dev, "metric_name": "accuracy", "test": {"accuracy": dev},
                       **metrics}, 1.0, {})
            for seed, dev in enumerate(devs)]  # fmt: skip


def claim(number: int):
    (found,) = select([str(number)])
    return found


def test_claim_1_shows_the_window_of_5_and_rules_on_3_and_attention():
    c = claim(1)
    assert [label for label, _ in c.variants()] == [fc(1)[0], fc(3)[0], fc(5)[0], SA[0]]
    results = {fc(1)[0]: runs("k1", [0.90, 0.91, 0.90]), fc(3)[0]: runs("k3", [0.95, 0.96, 0.95]),
               fc(5)[0]: runs("k5", [0.80, 0.81, 0.80]), SA[0]: runs("sa", [0.97, 0.97, 0.98])}  # fmt: skip
    assert c.analyse(results).verdict is H  # k=5 is shown, not ruled on
    results[SA[0]] = runs("sa", [0.85, 0.86, 0.85])
    assert c.analyse(results).verdict is N


def _windows(devs_by_k: dict[int, list[float]], params_by_k: dict[int, int] | None = None):
    params_by_k = params_by_k or {k: 1000 * k for k in devs_by_k}
    results = {fc(k)[0]: runs(f"k{k}", devs, parameters=params_by_k[k])
               for k, devs in devs_by_k.items()}  # fmt: skip
    results[SA[0]] = runs("sa", [0.97, 0.97, 0.97], parameters=5000)
    return results


FLAT = {1: [0.90, 0.90, 0.91], 3: [0.95] * 3, 5: [0.96, 0.96, 0.97], 9: [0.96] * 3,
        15: [0.95, 0.96, 0.95]}  # fmt: skip


def test_claim_2_holds_when_the_widest_window_stops_helping_and_costs_more():
    c = claim(2)
    section = c.analyse(_windows(FLAT))
    assert section.verdict is H
    assert [v for _, v, _ in section.comparisons] == [H, H]
    assert section.plot is not None and len(section.plot.axes) == 2  # accuracy, parameters vs k
    assert any("for a sentence of any length (rotary positions" in n for n in section.notes)


def test_claim_2_does_not_hold_if_k15_is_clearly_better_or_parameters_do_not_grow():
    c = claim(2)
    better = {**FLAT, 15: [0.99, 0.99, 0.995]}  # k=15 beats k=5 by 3 points: the flip
    assert c.analyse(_windows(better)).comparisons[1][1] is N
    flat_params = {k: 1000 for k in FLAT}
    assert c.analyse(_windows(FLAT, flat_params)).comparisons[0][1] is N
    straddles = {**FLAT, 15: [0.955, 0.975, 0.965]}
    assert c.analyse(_windows(straddles)).verdict is I


def test_claim_2_is_pending_until_every_window_has_run():
    results = _windows(FLAT)
    results[fc(9)[0]] = []
    section = claim(2).analyse(results)
    assert section.comparisons[0][1] is P and section.verdict is P


def test_claim_6_needs_no_loss_from_heads_and_heads_that_differ():
    c = claim(6)
    one = ("self-attention, 1 head", runs("one", [0.960, 0.961, 0.960]))
    many = lambda js, devs=(0.961, 0.962, 0.961): runs("many", devs, head_js=js)  # noqa: E731
    held = c.analyse({SA[0]: many(0.2), one[0]: one[1]})
    assert held.verdict is H and "0.200 nats" in held.comparisons[1][0]
    assert c.analyse({SA[0]: many(0.01), one[0]: one[1]}).comparisons[1][1] is N  # alike
    worse = c.analyse({SA[0]: many(0.2, (0.90, 0.90, 0.91)), one[0]: one[1]})
    assert worse.comparisons[0][1] is N
    single = c.analyse({SA[0]: many(0.2, (0.961,)), one[0]: one[1]})
    assert single.comparisons[1][1] is I  # one seed's maps are never a verdict


def _sizes(cnn_small, sa_small, cnn_large, sa_large):
    name = lambda model, n: f"{model}, {n:,} images"  # noqa: E731
    cnn, sa = "CNN", "self-attention (patches)"
    return {name(cnn, 100): runs("c1", cnn_small, "digits"),
            name(sa, 100): runs("s1", sa_small, "digits"),
            name(cnn, 1100): runs("c3", cnn_large, "digits"),
            name(sa, 1100): runs("s3", sa_large, "digits")}  # fmt: skip


def test_claim_10_reads_its_sizes_from_the_labels():
    c = claim(10)
    catches_up = _sizes([0.80, 0.81, 0.80], [0.60, 0.62, 0.61], [0.97, 0.97, 0.98],
                        [0.975, 0.97, 0.975])  # fmt: skip
    section = c.analyse(catches_up)
    assert section.verdict is H
    assert "at 100" in section.comparisons[0][0] and "at 1,100" in section.comparisons[1][0]
    behind = _sizes([0.80, 0.81, 0.80], [0.60, 0.62, 0.61], [0.97, 0.97, 0.98],
                    [0.90, 0.91, 0.90])  # fmt: skip
    assert c.analyse(behind).verdict is N  # still 7 points behind at the largest size


def test_claim_10_says_when_its_largest_point_trained_to_the_epoch_cap():
    c = claim(10)
    results = _sizes([0.80] * 3, [0.60] * 3, [0.97] * 3, [0.975] * 3)
    assert not any("epoch cap" in n for n in c.analyse(results).notes)  # no cap given
    capped = ("--train.epochs=30", "--train.patience=5")
    for label in ("CNN, 1,100 images", "self-attention (patches), 1,100 images"):
        for r, (epochs, best) in zip(results[label], ((30, 260), (30, 300), (16, 100))):
            r.options, r.metrics["epochs"] = list(capped), epochs
            r.metrics["best_step"], r.metrics["steps"] = best, 10 * epochs
    assert ("at 1,100 images, 4 of the 6 runs trained to the epoch cap (30) before early "
            "stopping ended them (best dev at epochs 26, 30, 26, 30): that point is not shown to "
            "have converged, and more epochs might move it") in c.analyse(results).notes  # fmt: skip


def test_claim_11_shows_each_seeds_score_and_which_were_still_improving():
    c = CLAIMS["self-attention recalls what an RNN forgets"]
    (a, _), (b, _) = c.variants()
    sa = runs("sa", [0.364, 0.742, 0.51], "recall", steps=100)
    for r, best in zip(sa, (100, 80, 100)):
        r.metrics["best_step"] = best
    notes = c.analyse({a: sa, b: runs("rnn", [0.36, 0.35, 0.34], "recall")}).notes
    assert (f"{a}, dev by seed (0, 1, 2): 36.4, 74.2, 51.0%; best at the last step of the run "
            "(still improving when it ended): seeds 0, 2") in notes  # fmt: skip
    assert f"{b}, dev by seed (0, 1, 2): 36.0, 35.0, 34.0%" in notes


@pytest.mark.parametrize(
    ("sa", "rnn", "expected"),
    [([0.95, 0.96, 0.95], [0.40, 0.41, 0.40], H),  # learnt by SA, forgotten by the RNN
     ([0.30, 0.31, 0.30], [0.20, 0.21, 0.20], I),  # nobody learnt it: says nothing
     ([0.90, 0.91, 0.90], [0.89, 0.90, 0.91], N)],  # both learnt it: no forgetting
)  # fmt: skip
def test_claim_11_first_asks_that_recall_was_learnt(sa, rnn, expected):
    c = CLAIMS["self-attention recalls what an RNN forgets"]
    (a, _), (b, _) = c.variants()
    section = c.analyse({a: runs("sa", sa, "recall"), b: runs("rnn", rnn, "recall")})
    assert section.verdict is expected
    assert any("not learnt" in n for n in section.notes) == (expected is I)


def test_claim_12_rules_on_each_graph_of_the_budget():
    c = claim(12)
    full = c.jobs(BUDGETS["full"])
    assert len(full) == 8 and {j.task for runs in full.values() for j in runs} == {
        "cora",
        "citeseer",
    }
    assert {j.task for runs in c.jobs(BUDGETS["quick"]).values() for j in runs} == {"cora"}
    scores = {"GAT (along edges)": [0.82, 0.83, 0.82], "dot-product along edges": [0.78, 0.79, 0.78],
              "full attention, no edges": [0.60, 0.61, 0.62],
              "full attention, edges as a bias": [0.75, 0.76, 0.75]}  # fmt: skip
    results = {f"{v}, {g}": runs(v, d, g.lower()) for v, d in scores.items()
               for g in ("Cora", "CiteSeer")}  # fmt: skip
    section = c.analyse(results)
    assert [name for name, _, _ in section.comparisons] == [
        "dev(edges) - dev(full), Cora", "dev(bias) - dev(full), Cora",
        "dev(edges) - dev(full), CiteSeer", "dev(bias) - dev(full), CiteSeer"]  # fmt: skip
    assert section.verdict is H
    results["full attention, edges as a bias, CiteSeer"] = runs("b", [0.5, 0.5, 0.51], "citeseer")
    assert c.analyse(results).verdict is N  # the bias did not help on one graph
    results["full attention, edges as a bias, CiteSeer"] = []
    assert c.analyse(results).verdict is P


def test_claim_11_draws_each_models_step_against_the_length():
    c = CLAIMS["self-attention recalls what an RNN forgets"]
    (a, _), (b, _) = c.variants()
    sa = runs("sa", [0.95, 0.96], "recall", step_s_at={"80": 0.004, "20": 0.002})  # as stored
    rnn = runs("rnn", [0.40, 0.41], "recall", step_s_at={"20": 0.001, "80": 0.003})
    section = c.analyse({a: sa, b: rnn})
    assert f"{a}, a training step on 8 sequences: 20 tokens 2.0 ms, 80 tokens 4.0 ms" in (
        section.notes)  # fmt: skip
    assert [line.get_label() for line in section.plot.axes[0].lines] == [a, b]
    assert not any("not timed yet" in n for n in section.notes)
    unmeasured = c.analyse({a: runs("sa", [0.95, 0.96], "recall"), b: []})
    assert unmeasured.plot is not None  # the scores' bars until a step is measured
    assert any(n.startswith(f"{a}: not timed yet") for n in unmeasured.notes)


def test_claim_8_gives_each_windows_timed_step_against_full_attention():
    c = claim(8)
    labels = [label for label, _ in c.variants()]
    step = {"full attention": 0.010, "window ±8 frames": 0.020, "window ±2 frames": 0.025}
    stamp = {"at": "2026-12-06 01:00:00 UTC", "cpu": "a CPU", "threads": 2}
    results = {label: runs(label, [0.97, 0.98, 0.97], "fsdd",
                           dev_step={"step_s": step[label], "units": 100.0}, timed=stamp)
               for label in labels}  # fmt: skip
    notes = c.analyse(results).notes
    assert "window ±8 frames: a training step on the 16 longest dev utterances 20.0 ms, 0.50x full " \
           "attention's speed" in notes  # fmt: skip
    assert any(n.startswith("the speeds were timed side by side after the training, in one "
                            "pass: 2026-12-06 01:00:00 UTC on a CPU, 2 threads") for n in notes)  # fmt: skip


def test_receptive_fields_put_each_weight_at_its_offset(monkeypatch):
    """A 2 x 3 grid after a CLS token; head 1 attends each query to itself, head 2 to the key
    one column to its right (itself in the last column)."""
    from types import SimpleNamespace

    import torch

    from attnlab.lab.report import claims_conv

    rows, cols, n = 2, 3, 7
    w = torch.zeros(1, 2, n, n)
    w[0, :, 0, 0] = 1.0  # the CLS token: left out
    for q in range(rows * cols):
        right = q + 1 if q % cols < cols - 1 else q
        w[0, 0, 1 + q, 1 + q] = 1.0
        w[0, 1, 1 + q, 1 + right] = 1.0
    model = lambda batch, need_weights: SimpleNamespace(weights=[w], grid=(rows, cols), prefix=1)  # noqa: E731
    model.eval = lambda: None
    task = SimpleNamespace(splits=lambda: {"dev": [0]}, encode_inputs=lambda examples: {})
    cfg = SimpleNamespace(train=SimpleNamespace(precision="fp32"))
    monkeypatch.setattr("attnlab.lab.train.checkpoint.load_for_inference",
                        lambda run, setup: (task, model, cfg))  # fmt: skip
    fields = claims_conv.receptive_fields("run")
    assert fields["grid"] == [rows, cols]
    one, right = (torch.tensor(m, dtype=torch.float64) for m in fields["maps"][0])
    assert one.shape == (2 * rows - 1, 2 * cols - 1)
    centre = (rows - 1, cols - 1)
    assert one[centre] == 1.0 and one.sum() == 1.0
    assert right[rows - 1, cols] == 1.0  # offset (0, +1): every query that has one looks there
    assert right[centre] == pytest.approx(2 / 6)  # only the last column's 2 queries stay put
    notes = claims_conv._locality(fields)
    assert notes[0].startswith("layer 1, each head's mean weight per offset summed over the 3 x 3")


def test_claim_10_draws_dev_accuracy_against_the_subset_size_a_line_per_model():
    c = claim(10)
    devs = {"CNN": (0.80, 0.90, 0.94), "self-attention (patches)": (0.62, 0.79, 0.91)}
    results = {
        f"{model}, {n:,} images": runs(f"{model}, {n:,} images", [d, d + 0.01, d - 0.01])
        for model, ds in devs.items()
        for n, d in zip(c.SIZES["full"], ds)
    }
    section = c.analyse(results)
    (ax,) = section.plot.axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert sorted(lines) == ["CNN (mean of 3 seeds)", "self-attention (patches) (mean of 3 seeds)"]
    line = lines["self-attention (patches) (mean of 3 seeds)"]
    assert list(line.get_xdata()) == list(c.SIZES["full"])
    assert [round(y, 6) for y in line.get_ydata()] == [62.0, 79.0, 91.0]  # the seeds' means
    assert ax.get_xscale() == "log"


@pytest.mark.parametrize(("lowest", "left"), [(0.352, 30.0), (0.302, 20.0), (0.97, 90.0),
                                               (0.03, 0.0)])  # fmt: skip
def test_the_bar_plots_accuracy_axis_starts_at_a_multiple_of_ten(lowest, left):
    """At least 5 points left of the lowest bar, from a round number with its tick."""
    from attnlab.lab.report.claim import _bar_plot

    rows = [{"variant": "low", "dev": lowest, "dev_sd": 0.01, "metric": "accuracy"},
            {"variant": "high", "dev": 0.99, "dev_sd": None, "metric": "accuracy"}]  # fmt: skip
    ax = _bar_plot(next(iter(CLAIMS.values())), rows).axes[0]
    assert ax.get_xlim() == (left, 100.0)
    assert left in ax.get_xticks()


@pytest.mark.parametrize(("highest", "right"), [(0.0597, 10.0), (0.1, 20.0), (0.95, 100.0)])
def test_the_bar_plots_error_rate_axis_runs_from_zero_past_the_bars(highest, right):
    """A phone error rate of 6% on an axis to 100 was a sliver: the axis ends at the first
    multiple of 10 past the highest bar and its spread."""
    from attnlab.lab.report.claim import _bar_plot

    rows = [{"variant": "greedy", "dev": highest, "dev_sd": 0.0004, "metric": "per"},
            {"variant": "beam", "dev": 0.01, "dev_sd": None, "metric": "per"}]  # fmt: skip
    ax = _bar_plot(next(iter(CLAIMS.values())), rows).axes[0]
    assert ax.get_xlim() == (0.0, right)
