"""Does a faster recipe keep the accuracy? A task's default recipe and variants of it, trained in
full under a few seeds, one run at a time; their best dev score (chosen on dev, never on test),
training throughput and wall time side by side.

    python benchmarks/recipe_check.py TASK [--seeds 0 1] [--variant NAME=--a.b=v;--c.d=w ...]
        [--options --a.b=v ...] [--out results/recipe_check] [--collect]

Each run writes ``OUT/TASK/NAME-sS/`` (a normal run directory: ``attnlab eval`` reads it); a run
already complete there is read, not trained again (``--collect`` only reads). The table gives the
mean and spread (min-max) over seeds of the best dev score, and the mean examples/s of training
(the trainer's ``units_per_s``) relative to the default recipe's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from common import parse_with_options


def variants(args: argparse.Namespace) -> dict[str, list[str]]:
    out = {"default": []}
    for text in args.variant:
        name, _, options = text.partition("=")
        out[name] = [o.strip() for o in options.split(";") if o.strip()]
    return out


def run(task: str, name: str, seed: int, options: list[str], args: argparse.Namespace) -> dict:
    out_dir = Path(args.out) / task / f"{name}-s{seed}"
    metrics = out_dir / "metrics.json"
    if not metrics.exists() and not args.collect:
        cmd = [sys.executable, "-m", "attnlab", "train", task, f"--out_dir={out_dir}",
               f"--train.seed={seed}", "--overwrite", *args.options, *options]  # fmt: skip
        print("$", " ".join(cmd[1:]), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True)
    if not metrics.exists():
        return {}
    return json.loads(metrics.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("task")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--variant", action="append", default=[], help="NAME=--a.b=v;--c.d=w")
    ap.add_argument("--options", nargs="*", default=[], help="--a.b=v for every run")
    ap.add_argument("--out", default="results/recipe_check")
    ap.add_argument("--collect", action="store_true", help="read finished runs only")
    args = parse_with_options(ap)
    rows = {}
    for name, options in variants(args).items():
        rows[name] = [run(args.task, name, s, options, args) for s in args.seeds]
    base = None
    print("| recipe | best dev (mean, min-max) | units/s (x default) | wall s | runs |")
    print("|---|---|---|---|---|")
    for name, runs in rows.items():
        done = [r for r in runs if r]
        if not done:
            print(f"| {name} | pending | | | 0 |")
            continue
        dev = [r["best_score"] for r in done]
        speed = statistics.mean(r["units_per_s"] for r in done)
        base = base or speed
        wall = statistics.mean(r["wall_time_s"] for r in done)
        print(f"| {name} | {statistics.mean(dev):.4f} ({min(dev):.4f}-{max(dev):.4f}) | "
              f"{speed:.0f} ({speed / base:.2f}x) | {wall:.0f} | {len(done)} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
