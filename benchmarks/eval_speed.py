"""Evaluation throughput of trained runs: examples in file order against examples batched by
length, under ``no_grad`` and ``inference_mode``, side by side in one process.

For each run directory the model is loaded as ``attnlab eval`` loads it (the run's precision and
evaluation batch size) and its split is evaluated by each variant in turns
(``attnlab.lab.bench.time_interleaved``); the figure is the median over rounds of examples/s, with the largest difference of any metric from file order
(what batching by length changes: padding, and the order floating-point sums add up in).

    python benchmarks/eval_speed.py RUN [RUN ...] [--split dev] [--rounds 3] [--out F.json]

Written for issue 34 ("Inference too"; BENCHMARKS.md, "Training speed").
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator

import torch

from attnlab.lab.bench import time_interleaved
from attnlab.lab.train.batching import eval_order, make_batches
from attnlab.lab.train.checkpoint import load_for_inference
from attnlab.lab.train.precision import choose_precision

#: time_interleaved's min_time: a pass over a split takes a second or more, so each round times
#: one call after the one that sizes the block (which warms up)
ONE_CALL = 1e-3

VARIANTS: dict[str, tuple[bool, Callable]] = {
    # name: (batched by length, grad mode)
    "file order, no_grad": (False, torch.no_grad),
    "by length, no_grad": (True, torch.no_grad),
    "by length, inference_mode": (True, torch.inference_mode),
}


def batches(task, examples: list, size: int, by_length: bool) -> Iterator[dict]:
    order = eval_order(task, examples) if by_length else range(len(examples))
    for indices in make_batches(order, batch_size=size):
        yield task.collate([examples[i] for i in indices])


def measure(run: str, split: str, rounds: int) -> dict:
    task, model, cfg = load_for_inference(run, setup=True)
    examples = task.splits()[split]
    size = cfg.train.eval_batch_size or cfg.train.batch_size
    bf16 = choose_precision(cfg.train.precision, torch.device("cpu")).bf16
    metrics: dict[str, dict[str, float]] = {}

    def evaluation(name: str, by_length: bool, mode: Callable) -> Callable[[], None]:
        def run() -> None:
            with mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                got = task.evaluate(model, batches(task, examples, size, by_length))
            metrics[name] = {k: float(v) for k, v in got.items()}

        return run

    fns = {name: evaluation(name, *variant) for name, variant in VARIANTS.items()}
    seconds = time_interleaved(fns, rounds=rounds, min_time=ONE_CALL)
    base = metrics["file order, no_grad"]
    out = {"run": run, "task": cfg.task, "split": split, "examples": len(examples),
           "batch_size": size, "bf16": bf16, "variants": {}}  # fmt: skip
    for name in VARIANTS:
        rate = len(examples) / seconds[name]
        diff = max(abs(metrics[name][k] - base[k]) for k in base)
        out["variants"][name] = {"examples_per_s": rate, "max_metric_diff": diff,
                                 "metrics": metrics[name]}  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run directories (or checkpoints)")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    results = []
    print(f"{'task':<10} {'examples':>8} {'variant':<28} {'ex/s':>9} {'x file order':>12} "
          f"{'max metric diff':>15}")  # fmt: skip
    for run in args.runs:
        r = measure(run, args.split, args.rounds)
        results.append(r)
        base = r["variants"]["file order, no_grad"]["examples_per_s"]
        for name, v in r["variants"].items():
            print(f"{r['task']:<10} {r['examples']:>8} {name:<28} {v['examples_per_s']:>9.1f} "
                  f"{v['examples_per_s'] / base:>11.2f}x {v['max_metric_diff']:>15.2e}")  # fmt: skip
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
