"""``attnlab predict`` throughput on many inputs: every input in one call (before), against the
inputs in batches of similar lengths (``predict_in_batches``, now), side by side in one process.

For each run the model is loaded as ``attnlab predict`` loads it, under the run's precision; the
inputs are the first ``--limit`` examples of the run's test split as ``predict --index`` reads
them. The variants are timed in turns (``attnlab.lab.bench.time_interleaved``); the figure is
the median over rounds of inputs/s, with the
number of records that differ from the one call's (under bf16 a batch's shape can move a
rounding, and with it an argmax; in float32 none should).

    python benchmarks/predict_speed.py RUN [RUN ...] [--limit 2000] [--rounds 3] [--out F.json]

Written for issue 34 ("Inference too"; BENCHMARKS.md, "Training speed").
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import torch

from attnlab.lab.bench import time_interleaved
from attnlab.lab.predictions import predict_in_batches
from attnlab.lab.train.checkpoint import load_for_inference
from attnlab.lab.train.precision import choose_precision

#: time_interleaved's min_time: predicting 2,000 inputs takes a second or so, so each round
#: times one call after the one that sizes the block (which warms up)
ONE_CALL = 1e-3


def measure(run: str, limit: int, rounds: int, fp32: bool = False) -> dict:
    task, model, cfg = load_for_inference(run, setup=True)
    inputs = [task.example_input(x)[0] for x in task.splits()["test"][:limit]]
    bf16 = not fp32 and choose_precision(cfg.train.precision, torch.device("cpu")).bf16
    records: dict[str, list[dict]] = {}

    def prediction(name: str, fn: Callable[[], list[dict]]) -> Callable[[], None]:
        def run() -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                records[name] = fn()

        return run

    variants = {
        "one call (before)": lambda: task.predict(model, inputs),
        f"batches of {task.predict_batch} by length (now)": lambda: predict_in_batches(
            task, model, inputs, {}
        ),
    }
    fns = {name: prediction(name, fn) for name, fn in variants.items()}
    seconds = time_interleaved(fns, rounds=rounds, min_time=ONE_CALL)
    first = records[next(iter(variants))]  # the one call
    return {
        "run": run, "task": cfg.task, "inputs": len(inputs), "bf16": bf16,
        "variants": {
            name: {"inputs_per_s": len(inputs) / seconds[name],
                   "records_differing": sum(a != b for a, b in zip(records[name], first))}
            for name in variants
        },
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories (or checkpoints)")
    parser.add_argument("--limit", type=int, default=2000, help="test inputs per run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fp32", action="store_true", help="float32 whatever the run's precision")
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    results = []
    for run in args.runs:
        r = measure(run, args.limit, args.rounds, args.fp32)
        results.append(r)
        base = None
        for name, v in r["variants"].items():
            base = base or v["inputs_per_s"]
            print(f"{r['task']:<8} {r['inputs']:>6} {name:<34} {v['inputs_per_s']:>9.1f}/s "
                  f"{v['inputs_per_s'] / base:>6.2f}x  records differing: "
                  f"{v['records_differing']}")  # fmt: skip
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
