"""Training speed of this tree against an earlier commit, side by side: each task's default recipe.

The earlier commit (default: issue 34's starting point, affaaa0) is checked out in a git
worktree; a child process per side and round imports attnlab from that side's ``src`` and times
the trainer's own steps (collation included) on the task's real, seeded batches, with the
task's default options (precision included: ``auto`` today, fp32 before it existed) plus any
``--options``. The two sides take turns, one process at a time (never two PyTorch processes at
once on 2 cores), so that a busy machine slows both alike; the figure is the median over rounds
of each side's examples/s, and their ratio.

    python benchmarks/train_speed_against.py [--against REV] [--tasks pos fsdd ...]
        [--steps 30] [--warmup 5] [--rounds 3] [--options --a.b=v ...] [--out F.json]
        [--env NAME=VALUE ...]

``--env`` sets variables for this tree's side only: with ``--against HEAD`` it compares a
process setting, e.g. jemalloc (``--env jemalloc`` stands for ``jemalloc_env()``'s variables).

Written for issue 34's targets (BENCHMARKS.md, "Training speed").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from common import parse_with_options

ROOT = Path(__file__).resolve().parents[1]
START = "affaaa0"  # issue 34's starting commit

CHILD = r"""
import json, shutil, sys, tempfile, time
import torch
from tqdm import tqdm
from attnlab.lab.train import Trainer
from attnlab.lab.train.config import resolve_config

task, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cfg = resolve_config(task=task, overrides=sys.argv[4:])
cfg.out_dir = tempfile.mkdtemp(prefix="attnlab-against-")
trainer = Trainer(cfg.task, cfg, progress=False)
feed = trainer.feed

def stream():
    epoch = 0
    while True:
        batches = feed.epoch_batches(epoch)
        yield from zip(feed.steps(batches, 0), map(len, batches))
        epoch += 1

bar = tqdm(disable=True)
trainer._log_loss = trainer._log_units = trainer._log_time = 0.0  # what _fit sets up
trainer._stopping = False
def step(micros):  # the trainer's step, as each version names it
    if hasattr(trainer, "train_step"):
        trainer.train_step(micros)
    else:
        trainer._step(micros, bar)

it = stream()
for _ in range(warmup):
    step(next(it)[0])
examples, t0 = 0, time.perf_counter()
for _ in range(steps):
    micros, n = next(it)
    step(micros)
    examples += n
seconds = time.perf_counter() - t0
getattr(trainer, "close", lambda: None)()
shutil.rmtree(cfg.out_dir, ignore_errors=True)  # the run's scratch directory
precision = getattr(cfg.train, "precision", "bf16" if getattr(cfg.train, "bf16", False) else "fp32")
print(json.dumps({"examples_per_s": examples / seconds, "seconds": seconds,
                  "precision": getattr(getattr(trainer, "precision", None), "name", precision),
                  "attnlab": __import__("attnlab").__file__}))
"""


def worktree(rev: str) -> Path:
    """A checkout of ``rev`` beside the system's temp files (made once, reused)."""
    sha = subprocess.check_output(["git", "-C", str(ROOT), "rev-parse", "--short", rev], text=True)
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"attnlab-{sha.strip()}"
    if not path.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
            check=True, capture_output=True,
        )  # fmt: skip
    return path


def time_side(src: Path, task: str, args: argparse.Namespace, extra: dict[str, str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), **extra}
    cmd = [sys.executable, "-c", CHILD, task, str(args.steps), str(args.warmup), *args.options]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{task} in {src}: {done.stderr.strip().splitlines()[-1:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if not figures["attnlab"].startswith(str(src)):
        raise RuntimeError(f"imported {figures['attnlab']}, not the tree under {src}")
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default=START, help="the earlier commit (default: %(default)s)")
    ap.add_argument("--tasks", nargs="+", default=["pos"])
    ap.add_argument("--steps", type=int, default=30, help="timed steps per process")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--rounds", type=int, default=3, help="turns of the two sides")
    ap.add_argument("--options", nargs="*", default=[], help="--a.b=value for both sides")
    ap.add_argument("--out", help="write the figures as JSON here")
    ap.add_argument("--env", nargs="*", default=[], help="NAME=VALUE for this tree's side only")
    args = parse_with_options(ap)
    extra = dict(pair.split("=", 1) for pair in args.env if pair != "jemalloc")
    if "jemalloc" in args.env:
        from attnlab.lab.train.host_memory import jemalloc_env

        extra.update(
            jemalloc_env()
            or sys.exit(
                "--env jemalloc: no jemalloc here, or the environment chose an allocator already"
            )
        )
    old = worktree(args.against) / "src"
    sides = {args.against: old, "this tree": ROOT / "src"}
    results = {}
    for task in args.tasks:
        runs: dict[str, list[dict]] = {side: [] for side in sides}
        for r in range(args.rounds):
            for side, src in sides.items():
                runs[side].append(time_side(src, task, args, extra if src == ROOT / "src" else {}))
            print(f"{task}: round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
        med = {s: statistics.median(f["examples_per_s"] for f in fs) for s, fs in runs.items()}
        results[task] = {"runs": runs, "median_examples_per_s": med,
                         "ratio": med["this tree"] / med[args.against]}  # fmt: skip
        precisions = {s: fs[0]["precision"] for s, fs in runs.items()}
        print(f"| {task} | {med[args.against]:.1f} ({precisions[args.against]}) | "
              f"{med['this tree']:.1f} ({precisions['this tree']}) | "
              f"{results[task]['ratio']:.2f}x |", flush=True)  # fmt: skip
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
