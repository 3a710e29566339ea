"""Training speed of every task's default recipe: ``attnlab bench train`` task by task.

One task at a time (never two PyTorch processes at once: on 2 cores they oversubscribe the
threads), each in its own process; the variants of a task take turns inside it. Writes
``OUT/TASK.json`` and prints the Markdown tables of BENCHMARKS.md ("Training speed").

    python benchmarks/train_speed.py [--tasks pos fsdd ...] [--variants eager,bf16]
        [--steps 8] [--out results/train_speed] [--table-only]

A task whose data is missing is reported as skipped, with the reason, and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

TASKS = [
    "pos", "sst2", "sst5", "trec", "mlm", "fsdd", "phones", "fashion", "digits", "cora",
    "citeseer", "karate", "freesolv", "solubility", "listops", "recall", "positions", "g2p",
]  # fmt: skip


def run(task: str, args: argparse.Namespace) -> str | None:
    """Bench ``task`` into ``OUT/TASK.json``; None, or why it was skipped."""
    out = Path(args.out) / f"{task}.json"
    cmd = [
        sys.executable, "-m", "attnlab", "bench", "train", task, "--variants", args.variants,
        "--steps", str(args.steps), "--rounds", str(args.rounds), "--warmup", str(args.warmup),
        "--profile-steps", str(args.profile_steps), "--out", str(out),
    ]  # fmt: skip
    print("$", " ".join(cmd[1:]), flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["failed"])[-1]
    return None


def table(results: dict[str, dict]) -> str:
    """Speed (examples/s and the ratio to eager per variant) and the eager step's profile."""
    variants = sorted({v for r in results.values() for v in r["variants"]},
                      key=["eager", "bf16", "compile", "compile+bf16"].index)  # fmt: skip
    head = "| task | unit | eager ex/s | eager units/s | GFLOP/s (% fp32 peak) |"
    head += "".join(f" {v} x |" for v in variants[1:]) + " peak RSS MiB |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for task, r in results.items():
        e = r["variants"]["eager"]
        row = (f"| {task} | {r['unit']} | {e['examples_per_s']:.1f} | {e['units_per_s']:.0f} | "
               f"{e['flops_per_s'] / 1e9:.1f} ({100 * e['share_of_peak']:.1f}%) |")  # fmt: skip
        row += "".join(f" {r['variants'][v]['speedup']:.2f} |" if v in r["variants"] else " - |"
                       for v in variants[1:])  # fmt: skip
        lines.append(row + f" {e['peak_rss_mib'] or 0:.0f} |")
    cats = None
    for r in results.values():
        cats = cats or list(r["variants"]["eager"].get("profile", {}))
    if cats:
        lines += ["", "Share of the eager step's time (%):", "",
                  "| task | " + " | ".join(cats) + " |", "|---|" + "---|" * len(cats)]  # fmt: skip
        for task, r in results.items():
            p = r["variants"]["eager"].get("profile", {})
            lines.append(
                f"| {task} | " + " | ".join(f"{100 * p.get(c, 0):.0f}" for c in cats) + " |"
            )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=TASKS)
    p.add_argument("--variants", default="eager,bf16")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--out", default="results/train_speed")
    p.add_argument("--table-only", action="store_true", help="only print the tables of OUT")
    args = p.parse_args()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    skipped = {}
    if not args.table_only:
        for task in args.tasks:
            reason = run(task, args)
            if reason:
                skipped[task] = reason
                print(f"  skipped {task}: {reason}", flush=True)
    results = {}
    for task in args.tasks:
        path = Path(args.out) / f"{task}.json"
        if path.exists() and task not in skipped:
            results[task] = json.loads(path.read_text())
    if results:
        m = next(iter(results.values()))["machine"]
        print(f"\n{m['cpu']} ({' '.join(m['isa'])}), {m['threads']} threads, torch {m['torch']}\n")
        print(table(results))
    for task, reason in skipped.items():
        print(f"- {task}: skipped ({reason})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
