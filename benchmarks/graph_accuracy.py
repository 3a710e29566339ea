"""Test accuracy of every graph model on Cora and CiteSeer (Planetoid public split), seeds.

Each run is what ``attnlab train DATASET --model.kind=KIND --train.seed=S`` does (the task's
loss with its L2 penalty, Adam at lr 0.005 with no decoupled decay, constant lr, no clipping,
dev evaluation every epoch, best dev score = dev accuracy with ties to the lower dev loss,
patience 100, test accuracy of the best model), in a lean loop: no checkpoint files, and one
forward pass per epoch serves dev and test (test metrics are recorded when dev improves,
which equals testing the best checkpoint at the end).

Results go, one JSON line per run, to ``--out`` (appended, so an interrupted run keeps what it
finished and a rerun skips what is done); the markdown table of mean +- std is printed.

    OMP_NUM_THREADS=2 python benchmarks/graph_accuracy.py --datasets cora citeseer \
        --models gat:10 mlp:10 gcn:10 gatv2:3 graph_attention:3 full_lappe:3 \
        --out runs/graph_accuracy.jsonl

Data: ``$ATTNLAB_DATA`` (the mirror) or the cache, as for ``attnlab train``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from attnlab.tasks import TASKS
from attnlab.tasks.graph import GraphModelConfig, GraphOptions


def run_one(
    dataset: str, kind: str, seed: int, *, epochs: int, patience: int, select: str = "task"
) -> dict:
    task = TASKS.get(dataset)()
    task.setup(GraphOptions())
    recipe = task.default_train_options()
    torch.manual_seed(seed)
    model = task.build_model(GraphModelConfig(kind=kind))
    # AdamW with weight_decay 0 (the trainer's, with these tasks' recipe) is Adam.
    opt = torch.optim.Adam(model.parameters(), lr=recipe["lr"])
    train, dev, test = (task.collate([s]) for s in ("train", "dev", "test"))
    best, best_epoch, bad, result = None, 0, 0, {}
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        model.train()
        opt.zero_grad(set_to_none=True)
        loss, units = task.loss(model, train)
        (loss / units).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(dev)  # all nodes: serves dev and test

            def cached(batch, logits=logits):
                return logits

            dev_m = task.evaluate(cached, [dev])
            score = task.score(dev_m) if select == "task" else -dev_m["loss"]
            if task.is_better(score, best):
                best, best_epoch, bad = score, epoch, 0
                result = {"dev": dev_m, "test": task.evaluate(cached, [test])}
            else:
                bad += 1
                if bad >= patience:
                    break
    return {
        "dataset": dataset, "model": kind, "seed": seed, "epochs": epoch,
        "select": select, "best_epoch": best_epoch, "dev_accuracy": result["dev"]["accuracy"],
        "test_accuracy": result["test"]["accuracy"], "seconds": time.perf_counter() - start,
    }  # fmt: skip


def table(rows: list[dict]) -> str:
    groups: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["dataset"]), []).append(100 * r["test_accuracy"])
    datasets = sorted({d for _, d in groups}, key=["cora", "citeseer"].index)
    models = list(dict.fromkeys(r["model"] for r in rows))
    lines = ["| model | " + " | ".join(datasets) + " |", "|---" * (len(datasets) + 1) + "|"]
    for m in models:
        cells = []
        for d in datasets:
            acc = groups.get((m, d), [])
            if not acc:
                cells.append("-")
                continue
            std = statistics.stdev(acc) if len(acc) > 1 else 0.0
            cells.append(f"{statistics.mean(acc):.1f} ± {std:.1f} (n={len(acc)})")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    p.add_argument("--models", nargs="+", default=["gat:10", "mlp:3", "gcn:3"],
                   help="KIND:SEEDS, run in this order (seeds 0..SEEDS-1)")  # fmt: skip
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--patience", type=int, default=100)
    p.add_argument("--select", choices=["task", "loss"], default="task",
                   help="model selection and patience: the task's rule (dev accuracy, ties to "
                   "the lower loss) or the lowest dev loss")  # fmt: skip
    p.add_argument("--out", default="runs/graph_accuracy.jsonl")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    done = {(r["dataset"], r["model"], r["seed"]) for r in rows}
    plan = [(kind, int(n or 1)) for kind, _, n in (m.partition(":") for m in args.models)]
    # Seed by seed, so that an interrupted run has a few seeds of everything.
    for seed in range(max(n for _, n in plan)):
        for kind, n in plan:
            for dataset in args.datasets if seed < n else ():
                if (dataset, kind, seed) in done:
                    continue
                row = run_one(dataset, kind, seed, epochs=args.epochs, patience=args.patience,
                              select=args.select)  # fmt: skip
                rows.append(row)
                with out.open("a") as f:
                    f.write(json.dumps(row) + "\n")
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
