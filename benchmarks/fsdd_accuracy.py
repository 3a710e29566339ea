"""FSDD test accuracy of the speech encoders and attention windows, over seeds: the runs
behind BENCHMARKS.md's fsdd tables.

Usage:
    python benchmarks/fsdd_accuracy.py [--configs attention cnn bilstm] [--seeds 0 1 2]
        [--epochs 30] [--out runs/fsdd-accuracy] [--extra --task_options.split=speaker:theo]

Configs (each the fsdd task's defaults plus the overrides below and ``--extra``):
``attention`` (self-attention, attention pooling), ``cnn`` and ``bilstm`` (the baselines on the
same frames and front end), ``w4`` ... ``w64`` (attention truncated to ``|i - j| <= w``
frames; after the Conv2d x4 front end a frame is 40 ms). Each run is ``attnlab train fsdd``
in its own directory; a finished run (its ``metrics.json`` exists) is read, not re-run. Prints
a markdown table (mean and min-max over seeds) and writes ``windows.json`` (``{w: mean test
accuracy}``) for ``speech_windows.py --accuracy``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stored import differences, refuse, run_differences  # noqa: E402

from attnlab.lab.cli import main as attnlab

COMMON = ["--model.frontend.subsample=conv2d", "--train.lr=3e-3", "--train.log_every=0"]
CONFIGS = {
    "attention": [],
    "cnn": ["--model.encoder.kind=cnn", "--model.encoder.depth=3"],
    "bilstm": ["--model.encoder.kind=rnn", "--model.encoder.depth=1"],
    **{f"w{w}": [f"--model.encoder.window={w}"] for w in (4, 8, 16, 32, 64)},
}


def run(name: str, seed: int, epochs: int, out: Path, extra: list[str]) -> dict:
    run_dir = out / f"{name}-s{seed}"
    metrics = run_dir / "metrics.json"
    args = ["train", "fsdd", f"--out_dir={run_dir}", f"--train.seed={seed}",
            f"--train.epochs={epochs}", *COMMON, *CONFIGS[name], *extra]  # fmt: skip
    if metrics.is_file() and (changes := run_differences(run_dir, "fsdd", args[2:])):
        refuse(f"{run_dir}", changes, "give this run its own --out, or remove the directory")
    if not metrics.is_file():
        print("attnlab " + " ".join(args), flush=True)
        if attnlab(args) != 0:
            raise SystemExit(f"run {run_dir} failed")
    return json.loads(metrics.read_text())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", nargs="+", default=["attention", "cnn", "bilstm"],
                   choices=list(CONFIGS))  # fmt: skip
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--out", default="runs/fsdd-accuracy")
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[],
                   help="more overrides for every run (last on the command line)")  # fmt: skip
    args = p.parse_args(argv)
    out = Path(args.out)
    windows = {}
    rows = []
    for name in args.configs:
        results = [run(name, s, args.epochs, out, args.extra) for s in args.seeds]
        accs = [r["test"]["accuracy"] for r in results]
        mean = statistics.mean(accs)
        rows.append(f"| {name} | {results[0]['parameters']:,} | {mean:.2%} | "
                    f"{min(accs):.2%} - {max(accs):.2%} | {len(accs)} |")  # fmt: skip
        if name == "attention":
            windows["full"] = mean
        elif name.startswith("w"):
            windows[name[1:]] = mean
    print("| model | params | test accuracy (mean) | min - max | seeds |")
    print("|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    if windows:  # merged with earlier invocations' windows of the same settings
        path = out / "windows.json"
        setup = {"task": "fsdd", "epochs": args.epochs, "seeds": args.seeds, "extra": args.extra}
        known = json.loads(path.read_text()) if path.is_file() else {}
        if known and (changes := differences(known.get("_config"), setup)):
            print(f"{path}: its earlier windows {sorted(k for k in known if k != '_config')} "
                  f"were made otherwise ({'; '.join(changes)}); replaced")  # fmt: skip
            known = {}
        path.write_text(json.dumps({**known, **windows, "_config": setup}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
