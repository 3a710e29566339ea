"""FSDD test accuracy of the speech encoders and attention windows, over seeds: the runs
behind BENCHMARKS.md's fsdd tables.

Usage:
    python benchmarks/fsdd_accuracy.py [--configs attention cnn bilstm] [--seeds 0 1 2]
        [--epochs 30] [--out runs/fsdd-accuracy] [--extra --task_options.split=speaker:theo]

Configs (each the fsdd task's defaults plus the overrides below and ``--extra``):
``attention`` (self-attention, attention pooling), ``cnn`` and ``bilstm`` (the baselines on the
same frames and front end), ``w4`` ... ``w64`` (attention truncated to ``|i - j| <= w``
frames; after the Conv2d x4 front end a frame is 40 ms). Each run is a job of ``attnlab
report`` (claim 8 compares windows of 2 and 8 frames with full attention the same way), run by
``run_jobs`` into ``OUT/jobs/KEY``: a finished job is read, not re-run, and a job of other
settings has another key. Prints a markdown table (mean and min-max over seeds) and writes
``windows.json`` (``{w: mean test accuracy}``) for ``speech_windows.py --accuracy``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import train_jobs  # noqa: E402
from stored import differences  # noqa: E402

from attnlab.lab.report.jobs import Job  # noqa: E402

COMMON = ["--model.frontend.subsample=conv2d", "--train.lr=3e-3", "--train.log_every=0"]
CONFIGS = {
    "attention": [],
    "cnn": ["--model.encoder.kind=cnn", "--model.encoder.depth=3"],
    "bilstm": ["--model.encoder.kind=rnn", "--model.encoder.depth=1"],
    **{f"w{w}": [f"--model.encoder.window={w}"] for w in (4, 8, 16, 32, 64)},
}


def job(name: str, seed: int, epochs: int, extra: list[str]) -> Job:
    return Job("fsdd", (f"--train.epochs={epochs}", *COMMON, *CONFIGS[name], *extra), seed, name)


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
        results = train_jobs([job(name, s, args.epochs, args.extra) for s in args.seeds], out)
        failed = [r for r in results if isinstance(r, str)]
        if failed:
            raise SystemExit(f"{name}: {failed[0]}")
        accs = [r.metrics["test"]["accuracy"] for r in results]
        mean = statistics.mean(accs)
        rows.append(f"| {name} | {results[0].metrics['parameters']:,} | {mean:.2%} | "
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
