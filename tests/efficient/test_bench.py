"""The kernel benchmark: its memory probe measures what it claims, a tiny sweep writes its
outputs, crossovers and skips are reported, accuracy and recurrent-step helpers run."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from attnlab.efficient._measure import peak_tensor_bytes
from attnlab.efficient.bench import (
    approximation_errors,
    bench_attention,
    bench_recurrent_linear,
    crossovers,
)

MB = 1_000_000


def test_peak_tensor_bytes_counts_live_tensors_at_their_peak():
    def run():
        a = torch.ones(MB)  # 4 MB
        b = torch.ones(2 * MB)  # 8 MB: 12 MB live
        del a
        c = b * 2  # 8 MB: 16 MB live at the peak
        del b
        return c  # 8 MB still alive at the end

    peak, out = peak_tensor_bytes(run)
    assert abs(peak - 16 * MB) < 1024 and out.numel() == 2 * MB  # (+ a few scalar tensors)
    assert peak_tensor_bytes(lambda: None)[0] == 0
    existing = torch.ones(4 * MB)  # tensors made before the call are not counted
    assert peak_tensor_bytes(lambda: existing.add_(1))[0] < 1024


def test_peak_tensor_bytes_sees_the_backward_pass():
    x = torch.randn(256, 256, requires_grad=True)  # 256 KiB

    def run():
        (x @ x).sum().backward()

    peak, _ = peak_tensor_bytes(run)
    assert peak >= 2 * x.numel() * 4  # the product and x.grad at least
    assert x.grad is not None


@pytest.mark.slow
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


def test_crossovers_need_the_kernel_to_stay_faster():
    def row(kernel, n, t, status="ok"):
        return dict(kernel=kernel, mode="fwd", n=n, time_s=t, status=status)

    rows = [row("sdpa", n, n**2) for n in (1, 2, 4)] + [row("sdpa", 8, None, "skipped")]
    rows += [row("a", n, t) for n, t in ((1, 2), (2, 1), (4, 100), (8, 1))]  # loses at 4
    rows += [row("b", n, t) for n, t in ((1, 2), (2, 1), (4, 1), (8, 1))]
    rows += [row("c", n, 1e9) for n in (1, 2, 4)]
    cross = crossovers(rows)
    assert cross[("a", "fwd")] == 8  # only past the baseline's reach
    assert cross[("b", "fwd")] == 2
    assert cross[("c", "fwd")] is None


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
