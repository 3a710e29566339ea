"""Sentence classification (SST-2, TREC) from scratch: variants x seeds, test accuracy mean ± std.

Usage:
  python benchmarks/sentences.py [--tasks sst2 trec] [--only NAME ...] [--seeds 0 1 2]
                                 [--out runs/sentences] [--quick | --report]

Every run trains on the task's train split, keeps the checkpoint of the best dev accuracy and
reports its test accuracy (the test set is never used to choose anything). SST-2 has its own
dev file; TREC has none, so its dev split is a seeded 10% of train (``load_sentences``), the
same for every run. Embeddings are 300-d, randomly initialised (Kim's "rand"), no character
features, words lowercased. One JSON file per run under ``--out`` (a finished run is read back,
not retrained, if it records the overrides this script gives its variant and seed now, and
stops the script, naming the differences, if not; an interrupted one resumes from its
``last.pt``); the markdown table goes to stdout (``--report``: the finished runs whose
overrides match; the others are listed under it).
An ensemble variant's seed ``s`` trains (or reads back) ``MEMBERS`` runs of its base variant,
seeds ``3s .. 3s + 2``, and evaluates their averaged class probabilities (``attnlab eval RUN
RUN RUN`` does the same from the command line).
``--quick``: tiny models on the 12 sentences of the test fixture, to check the script runs
(numbers meaningless).

Run it with ``OMP_NUM_THREADS=1`` when the machine is shared; accuracy does not depend on speed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stored import differences, keep_matching, left_out_note, refuse  # noqa: E402

from attnlab.lab.train import Trainer, load_ensemble, resolve_config

#: the inputs of every variant: 300-d random embeddings (Kim's "rand"), no characters
COMMON = [
    "--model.input.dim=300",
    "--model.input.char_features=false",
    "--task_options.lowercase=true",
    "--train.batch_size=50",
]
#: Kim's head: max over time, dropout 0.5 before the classifier
KIM_HEAD = ["--model.head.pooling=max", "--model.head.dropout=0.5"]
CNN_ATTENTION = [
    "--model.encoder.kind=cnn-attention",
    "--model.encoder.depth=1",
    "--model.encoder.ff_hidden=300",
    "--model.encoder.dropout=0.2",
]
#: Kim's embedding init U[-0.25, 0.25] (PyTorch's N(0, 1) rows hardly move under Adam)
KIM_INIT = ["--model.input.embed_init=0.25", "--train.lr=2e-3"]
CNN_RAND = ["--model.encoder.kind=cnn-attention", "--model.encoder.depth=0", *KIM_HEAD, *KIM_INIT]
#: model selection on dev four times an epoch (SST-2: 139 steps of 50) instead of once
DEV_QUARTER = ["--train.eval_every=35", "--train.patience=8"]
VARIANTS = {
    "CNN + self-attention, max pool; N(0,1) embeddings, lr 1e-3": [
        *CNN_ATTENTION, *KIM_HEAD, "--train.lr=1e-3",
    ],
    "CNN + self-attention, max pool; U(±0.25) embeddings, lr 2e-3": [
        *CNN_ATTENTION, *KIM_HEAD, *KIM_INIT,
    ],
    "CNN + self-attention, max pool; U(±0.25), lr 2e-3, word/embedding dropout 0.25": [
        *CNN_ATTENTION, *KIM_HEAD, *KIM_INIT,
        "--model.input.word_dropout=0.25", "--model.input.dropout=0.25",
    ],
    "CNN-rand (depth 0), max pool; U(±0.25) embeddings, lr 2e-3": [*CNN_RAND],
    "CNN-rand, dev every 35 steps (~1/4 epoch), patience 8": [*CNN_RAND, *DEV_QUARTER],
    "CNN-rand, 8 epochs, dev every 35 steps, patience 8": [
        *CNN_RAND, *DEV_QUARTER, "--train.epochs=8",
    ],
    "CNN-rand from MLM pre-training (runs/mlm/kim), dev every 35 steps, patience 8": [
        *CNN_RAND, *DEV_QUARTER, "--model.init=runs/mlm/kim",
    ],
    "CNN + self-attention, max pool; U(±0.25), lr 2e-3, 10% warm-up": [
        *CNN_ATTENTION, *KIM_HEAD, *KIM_INIT, "--train.warmup_fraction=0.1",
    ],
}  # fmt: skip
#: ensembles: seed s of one averages the class probabilities (``attnlab eval RUN RUN RUN``) of
#: its base variant's runs with seeds MEMBERS*s .. MEMBERS*s + MEMBERS - 1
ENSEMBLES = {
    "Ensemble of 3 x (CNN-rand, dev every 35 steps), probabilities averaged":
        "CNN-rand, dev every 35 steps (~1/4 epoch), patience 8",
}  # fmt: skip
MEMBERS = 3
#: epochs and patience per task (dev accuracy peaks early on these small sets)
BUDGET = {
    "sst2": ["--train.epochs=4", "--train.patience=2"],
    "trec": ["--train.epochs=6", "--train.patience=2"],
}
QUICK = ["--train.epochs=1", "--model.input.dim=16", "--model.encoder.maps=4"]


def slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text).strip("_")[:60]


def overrides_of(task: str, name: str, seed: int, quick: bool) -> list[str]:
    """The ``attnlab train`` overrides of one run of variant ``name``."""
    overrides = [*COMMON, *BUDGET[task], *VARIANTS[name], f"--train.seed={seed}"]
    if quick:
        overrides += [*QUICK, "--task_options.train_file=tests/tasks/data/sentiment.train.txt",
                      "--task_options.dev_file=tests/tasks/data/sentiment.test.txt",
                      "--task_options.test_file=tests/tasks/data/sentiment.test.txt"]  # fmt: skip
    return overrides


def wanted(task: str, name: str, seed: int, quick: bool) -> dict:
    """What a row of ``name``'s seed ``seed`` records when this script makes it now."""
    if name in ENSEMBLES:
        base, seeds = ENSEMBLES[name], [MEMBERS * seed + k for k in range(MEMBERS)]
        return {"overrides": overrides_of(task, base, seeds[0], quick)[:-1], "member_seeds": seeds}
    return {"overrides": overrides_of(task, name, seed, quick)}


def row_changes(row: dict, quick: bool) -> list[str]:
    """How a stored row differs from what this script would make for it now."""
    if row["variant"] not in VARIANTS and row["variant"] not in ENSEMBLES:
        return [f"variant {row['variant']!r} is no longer in this script"]
    want = wanted(row["task"], row["variant"], row["seed"], quick)
    return differences({k: row.get(k) for k in want}, want)


def read_back(path: Path, quick: bool) -> dict | None:
    """The finished run's row at ``path`` (None if there is none); stops if it was made with
    other overrides than this script gives it now."""
    if not path.is_file():
        return None
    row = json.loads(path.read_text())
    if changes := row_changes(row, quick):
        refuse(f"{path}", changes, "give this run its own --out, or remove the file")
    return row


def run(task: str, name: str, seed: int, out: Path, quick: bool) -> dict:
    path = out / task / f"{slug(name)}_seed{seed}.json"
    if (row := read_back(path, quick)) is not None:
        return row
    overrides = overrides_of(task, name, seed, quick)
    cfg = resolve_config(task=task, overrides=overrides)
    cfg.out_dir = str(path.with_suffix(""))
    # an interrupted run continues from its last.pt (exact resume); anything else starts over
    resume = (path.with_suffix("") / "last.pt").is_file()
    trainer = Trainer(task, cfg, resume=resume, overwrite=not resume)
    try:
        res = trainer.fit()
    finally:
        trainer.close()
    row = dict(task=task, variant=name, seed=seed, test_accuracy=res.test["accuracy"],
               dev_accuracy=res.best_score, parameters=res.parameters,
               overrides=overrides)  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(row, indent=1))
    print(f"  {task} {name} seed {seed}: test {row['test_accuracy']:.2%} "
          f"dev {row['dev_accuracy']:.2%}", file=sys.stderr, flush=True)  # fmt: skip
    return row


def run_ensemble(task: str, name: str, seed: int, out: Path, quick: bool) -> dict:
    """Seed ``seed`` of the ensemble ``name``: its members trained (or read back) as runs of the
    base variant, then their averaged probabilities evaluated on dev and test."""
    path = out / task / f"{slug(name)}_seed{seed}.json"
    if (row := read_back(path, quick)) is not None:
        return row
    base = ENSEMBLES[name]
    seeds = [MEMBERS * seed + k for k in range(MEMBERS)]
    members = [run(task, base, s, out, quick) for s in seeds]
    dirs = [out / task / f"{slug(base)}_seed{s}" for s in seeds]
    ens_task, model, cfg = load_ensemble(dirs, setup=True)
    size = cfg.train.eval_batch_size or cfg.train.batch_size
    splits = ens_task.splits()
    acc = {}
    with torch.no_grad():
        for split in ("dev", "test"):
            examples = splits[split]
            batches = (
                ens_task.collate(examples[i : i + size]) for i in range(0, len(examples), size)
            )
            acc[split] = ens_task.evaluate(model, batches)["accuracy"]
    row = dict(task=task, variant=name, seed=seed, test_accuracy=acc["test"],
               dev_accuracy=acc["dev"], parameters=sum(m["parameters"] for m in members),
               member_seeds=seeds, overrides=members[0]["overrides"][:-1])  # fmt: skip
    path.write_text(json.dumps(row, indent=1))
    print(f"  {task} {name} seed {seed} (members {seeds}): test {acc['test']:.2%} "
          f"dev {acc['dev']:.2%}", file=sys.stderr, flush=True)  # fmt: skip
    return row


def table(rows: list[dict], tasks: list[str]) -> str:
    lines = ["| variant | " + " | ".join(f"{t} test (dev)" for t in tasks) + " |",
             "|---|" + "---:|" * len(tasks)]  # fmt: skip
    for name in dict.fromkeys(r["variant"] for r in rows):
        cells = []
        for task in tasks:
            mine = [r for r in rows if r["variant"] == name and r["task"] == task]
            if not mine:
                cells.append("")
                continue
            test = [100 * r["test_accuracy"] for r in mine]
            dev = [100 * r["dev_accuracy"] for r in mine]
            spread = f" ± {statistics.stdev(test):.1f}" if len(test) > 1 else ""
            seeds = "" if len(test) == 3 else f", {len(test)} seed{'s' * (len(test) > 1)}"
            cells.append(f"{statistics.mean(test):.1f}{spread} ({statistics.mean(dev):.1f}){seeds}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["sst2", "trec"], choices=list(BUDGET))
    parser.add_argument("--only", nargs="+", choices=[*VARIANTS, *ENSEMBLES],
                        help="variants to run")  # fmt: skip
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--out", default="runs/sentences")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--report", action="store_true",
                        help="print the table of the finished runs under --out; train nothing")  # fmt: skip
    args = parser.parse_args(argv)
    out = Path(args.out) / ("quick" if args.quick else "full")
    names = args.only or [*VARIANTS, *ENSEMBLES]
    seeds = args.seeds[:1] if args.quick else args.seeds
    tasks = ["sst2"] if args.quick else args.tasks
    if args.report:
        found = [out / t / f"{slug(n)}_seed{s}.json" for n in names for t in tasks for s in seeds]
        rows, notes = keep_matching(
            [json.loads(p.read_text()) for p in found if p.is_file()],
            lambda r: row_changes(r, args.quick),
            lambda r: f"{r['task']} {r['variant']} seed {r['seed']}",
        )  # fmt: skip
    else:
        rows = [(run_ensemble if n in ENSEMBLES else run)(t, n, s, out, args.quick)
                for n in names for t in tasks for s in seeds]  # fmt: skip
        notes = []
    print(table(rows, tasks))
    if note := left_out_note(notes, out):
        print("\n" + note)


if __name__ == "__main__":
    main()
