"""``attnlab bench train``: :func:`~attnlab.lab.bench.train.bench_train` as a table and JSON.

``attnlab bench attention``: run :func:`~attnlab.lab.bench.attention.bench_attention` and print
the Long Range Arena-style summary (Tay et al. 2021, Table 2): speed relative to exact
attention at 1K-4K tokens, peak memory, the 16K speed-ups, the scaling exponent, the
approximation errors and the recurrent linear step."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from attnlab.efficient import KERNELS
from attnlab.lab.bench.attention import (
    approximation_errors,
    bench_attention,
    bench_recurrent_linear,
)

DEFAULT_LENGTHS = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]


def _index(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], dict[str, Any]]:
    return {(r["kernel"], r["mode"], r["n"]): r for r in rows if r["status"] == "ok"}


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def summarize(rows: list[dict[str, Any]], kernels: list[str]) -> dict[str, Any]:
    """The figures BENCHMARKS.md reports, from the raw rows."""
    ok = _index(rows)
    mode = "fwdbwd"
    out: dict[str, Any] = {"relative_speed": {}, "peak_mib": {}, "at_16k": {}, "exponent": {}}
    for name in ["sdpa", "reference", *kernels]:
        rel, mem = {}, {}
        for n in sorted({r["n"] for r in rows}):
            r, base = ok.get((name, mode, n)), ok.get(("sdpa", mode, n))
            rel[n] = base["time_s"] / r["time_s"] if r and base else None
            mem[n] = r["peak_bytes"] / 2**20 if r else None
        out["relative_speed"][name], out["peak_mib"][name] = rel, mem
        r16, s16, ref16 = (ok.get((k, mode, 16384)) for k in (name, "sdpa", "reference"))
        out["at_16k"][name] = {
            "speedup_vs_sdpa": s16["time_s"] / r16["time_s"] if r16 and s16 else None,
            "memory_vs_reference": (
                r16["peak_bytes"] / ref16["peak_bytes"] if r16 and ref16 else None
            ),  # fmt: skip
            "peak_mib": r16["peak_bytes"] / 2**20 if r16 else None,
        }
        a, b = ok.get((name, mode, 16384)), ok.get((name, mode, 65536))
        out["exponent"][name] = (math.log(b["time_s"] / a["time_s"]) / math.log(4)
                                 if a and b else None)  # fmt: skip
    return out


def print_summary(summary: dict[str, Any], kernels: list[str]) -> None:
    names = ["sdpa", "reference", *kernels]
    print("\nfwd+bwd speed relative to exact SDPA (higher is faster), as in LRA Table 2:")
    print(f"  {'kernel':<12}" + "".join(f"{n:>9}" for n in (1024, 2048, 4096)) +
          "   peak MiB at 1K / 2K / 4K")  # fmt: skip
    for name in names:
        rel, mem = summary["relative_speed"][name], summary["peak_mib"][name]
        print(f"  {name:<12}" + "".join(f"{_fmt(rel.get(n)):>9}" for n in (1024, 2048, 4096))
              + "   " + " / ".join(_fmt(mem.get(n), ".0f") for n in (1024, 2048, 4096)))  # fmt: skip
    print("\nat n = 16384 (fwd+bwd): speed-up vs SDPA, memory vs the reference path; "
          "scaling exponent 16K -> 64K:")  # fmt: skip
    for name in names:
        s, e = summary["at_16k"][name], summary["exponent"][name]
        print(f"  {name:<12} x{_fmt(s['speedup_vs_sdpa']):>7}   memory {_fmt(s['memory_vs_reference'], '.3f'):>6}"
              f" of reference ({_fmt(s['peak_mib'], '.0f')} MiB)   exponent {_fmt(e)}")  # fmt: skip


def bench_command(args: argparse.Namespace) -> int:
    kernels = args.kernels or KERNELS.names()
    for name in kernels:
        KERNELS.get(name)  # unknown names list the valid ones before any work
    lengths = args.lengths or DEFAULT_LENGTHS
    out = Path(args.out)
    rows = bench_attention(
        kernels, lengths, dim=args.dim, heads=args.heads, batch=args.batch, out_dir=out,
        repeats=args.repeats, memory_budget=int(args.max_memory_gib * 2**30),
        time_budget=args.time_budget, threads=args.threads,
    )  # fmt: skip
    for r in rows:
        if r["status"] != "ok":
            print(f"  skipped {r['kernel']} {r['mode']} n={r['n']}: {r['reason']}")
    summary = summarize(rows, kernels)
    print_summary(summary, kernels)
    errors = approximation_errors(kernels, n=1024, dim=args.dim, heads=args.heads)
    print("\napproximation error vs exact softmax attention (n=1024, random q,k,v; relative "
          "Frobenius; 'uniform' = every query averages all values):")  # fmt: skip
    for e in errors:
        print(f"  {e['kernel']:<12} {e['rel_error']:.3f}   (uniform {e['uniform_rel_error']:.3f})")
    rec = []
    if "linear" in kernels:
        rec = bench_recurrent_linear([1024, 4096, 16384], dim=args.dim, heads=args.heads)
        print("\nrecurrent linear attention: one decoding step vs re-running the causal form:")
        for r in rec:
            print(
                f"  n={r['n']:>6} {r['method']:<15} {r['time_s'] * 1e3:9.3f} ms  "
                f"peak {r['peak_bytes'] / 2**20:8.2f} MiB  state {r['state_bytes'] / 1024:.0f} KiB"
            )
    (out / "summary.json").write_text(json.dumps(
        {"summary": summary, "errors": errors, "recurrent_linear": rec}, indent=2, default=str))  # fmt: skip
    print(f"\nwrote {out}/attention_bench.csv, attention_bench.png, summary.json")
    return 0


def bench_train_command(args: argparse.Namespace, rest: list[str]) -> int:
    """``attnlab bench train TASK [--variants ...] [--steps N] [--a.b=value ...]``."""
    from attnlab.lab.bench.train import bench_train
    from attnlab.lab.commands import normalize_overrides

    variants = [v.strip() for v in args.variants.split(",") if v.strip()] + args.variant
    result = bench_train(
        args.task, normalize_overrides(rest), variants=variants, steps=args.steps,
        warmup=args.warmup, rounds=args.rounds, profile_steps=args.profile_steps,
        config_file=args.config,
    )  # fmt: skip
    print_train_table(result)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(f"wrote {out}")
    return 0


def print_train_table(result: dict[str, Any], file: Any = None) -> None:
    """The figures of :func:`~attnlab.lab.bench.train.bench_train` as two tables: speed,
    then the profile."""
    from attnlab.lab.bench.train import CATEGORIES, DATA, OTHER, PYTHON

    m, unit = result["machine"], result["unit"]
    w = max(13, *(len(name) + 2 for name in result["variants"]))
    peaks = ", ".join(f"{k} {v / 1e9:.0f}" for k, v in result["matmul_peak_flops"].items())
    out = [
        f"{result['task']} {' '.join(result['options'])}".rstrip()
        + f": {result['steps']} steps per variant in {result['rounds']} turns, "
        f"{m['threads']} threads, {m['cpu']} ({' '.join(m['isa'])}); matmul peak GFLOP/s: {peaks}",
        f"{'variant':<{w}}{'ex/s':>9}{unit + '/s':>11}{'x eager':>8}{'step ms':>9}{'data ms':>9}"
        f"{'GFLOP/s':>9}{'% peak':>7}{'RSS MiB':>9}{'faults':>8}{'compile s':>10}",
    ]
    for name, f in result["variants"].items():
        rss = "-" if f["peak_rss_mib"] is None else f"{f['peak_rss_mib']:.0f}"
        faults = f.get("page_faults_per_step")
        faults = "-" if faults is None else f"{faults:.0f}"
        comp = "-" if f["compile_s"] is None else f"{f['compile_s']:.1f}"
        out.append(
            f"{name:<{w}}{f['examples_per_s']:>9.1f}{f['units_per_s']:>11.0f}{f['speedup']:>8.2f}"
            f"{f['step_ms']:>9.1f}{f['data_ms']:>9.1f}{f['flops_per_s'] / 1e9:>9.1f}"
            f"{100 * f['share_of_peak']:>7.1f}{rss:>9}{faults:>8}{comp:>10}"
        )
    profiled = {k: f["profile"] for k, f in result["variants"].items() if "profile" in f}
    if profiled:
        cats = [*(c for c, _ in CATEGORIES), OTHER, DATA, PYTHON]
        out.append("share of a step's time (%): " + ", ".join(cats))
        out.append(f"{'variant':<{w}}" + "".join(f"{c[:10]:>11}" for c in cats))
        for name, p in profiled.items():
            out.append(f"{name:<{w}}" + "".join(f"{100 * p.get(c, 0):>11.1f}" for c in cats))
    print("\n".join(out), file=file)
