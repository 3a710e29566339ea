"""The kernel sweep: a tiny sweep writes its outputs and reports its skips, its memory estimate
covers the measured peak, accuracy and recurrent-step helpers run."""

from __future__ import annotations

import csv
import json

from attnlab.lab.bench import approximation_errors, bench_attention, bench_recurrent_linear


def test_memory_estimate_covers_the_measured_peak(tmp_path):
    rows = bench_attention(
        ["local", "performer"], [64, 256], dim=32, heads=2, repeats=1, progress=False,
        out_dir=tmp_path, baselines=("reference",),
    )  # fmt: skip
    for r in rows:
        assert r["status"] == "ok" and r["peak_bytes"] <= r["estimate_bytes"], r


def test_bench_attention_writes_csv_plot_config_and_skips_what_does_not_fit(tmp_path):
    rows = bench_attention(
        ["linear", "nystrom"], [32, 64], dim=32, heads=2, repeats=1, progress=False,
        out_dir=tmp_path, memory_budget=300_000,
    )  # fmt: skip
    assert {(r["kernel"], r["mode"]) for r in rows} == {
        (k, m) for k in ("sdpa", "reference", "linear", "nystrom") for m in ("fwd", "fwdbwd")
    }
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok and all(r["time_s"] > 0 and r["peak_bytes"] > 0 for r in ok)
    skipped = [r for r in rows if r["status"] == "skipped"]
    assert skipped and all("budget" in r["reason"] for r in skipped)
    assert all(r["estimate_bytes"] > 300_000 for r in skipped)
    assert all(r["estimate_bytes"] <= 300_000 for r in ok)
    with open(tmp_path / "attention_bench.csv") as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert (tmp_path / "attention_bench.png").stat().st_size > 10_000
    assert (tmp_path / "crossovers.csv").exists()
    config = json.loads((tmp_path / "bench_config.json").read_text())
    assert config["lengths"] == [32, 64] and config["memory_budget"] == 300_000


def test_approximation_errors_of_exact_configurations_are_rounding():
    rows = approximation_errors(
        ["local", "reformer"], n=64, dim=32, heads=2,
        options={"local": {"window": 64}, "reformer": {"buckets": 1}},
    )  # fmt: skip
    local, reformer = rows
    assert local["rel_error"] < 1e-5 and local["uniform_rel_error"] > 0.1
    assert reformer["rel_error_own_exact"] < 1e-5  # one bucket: full shared-QK attention
    assert reformer["rel_error"] > 0.1  # ... which is not dot-product attention over k


def test_recurrent_step_is_constant_and_the_rerun_grows():
    rows = bench_recurrent_linear([64, 512], dim=32, heads=2, repeats=1)
    step = {r["n"]: r for r in rows if r["method"] == "step"}
    rerun = {r["n"]: r for r in rows if r["method"] == "parallel_rerun"}
    assert step[64]["peak_bytes"] == step[512]["peak_bytes"]
    assert rerun[512]["peak_bytes"] > 4 * rerun[64]["peak_bytes"]
    assert step[512]["state_bytes"] == 4 * (2 * 16 * 16 + 2 * 16)
