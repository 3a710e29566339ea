"""Molecule property regression: attention (structure none / mask / spd) against Morgan
fingerprint baselines (MLP, random forest) and FreeSolv's physics ``calc``, on the same splits.

Accuracy only (RMSE in the property's units); no timing. Every model row of one split/seed
trains and tests on exactly the molecules the baselines and ``calc`` are scored on (the task's
own splits). Usage::

    OMP_NUM_THREADS=1 ATTNLAB_DATA=../shared/data python benchmarks/molecules.py \
        --task freesolv --splits random scaffold --seeds 0 1 2 3 4 --out runs/bench_molecules

    python benchmarks/molecules.py --quick   # a smoke run: 1 seed, 2 epochs, tiny model

The attention runs are ``attnlab report`` jobs (claim 13, freesolv's none / mask / spd, is
their subset: :attr:`~attnlab.lab.report.claims.MoleculeBonds.STRUCTURES` gives both the
structure options), trained by :func:`~attnlab.lab.report.run.run_jobs` into
``OUT/jobs/KEY/`` (KEY: a hash of the run's resolved configuration): a run that finished in
``--out`` is read back, not trained again; an interrupted one resumes; another configuration
is another job. The baselines score the splits of each split/seed's first attention run, its
task rebuilt from its run directory as ``attnlab eval`` does (no second training).

Prints a markdown table (mean +- std over seeds) and writes ``results.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import tempfile
from pathlib import Path

import numpy as np

from attnlab.lab.chem import mol_from_smiles, morgan_fingerprints, read_sdf
from attnlab.lab.data.registry import dataset_path
from attnlab.lab.report.budgets import QUIET
from attnlab.lab.report.claims import MoleculeBonds
from attnlab.lab.report.jobs import Job, job_dir
from attnlab.lab.report.run import run_jobs
from attnlab.lab.tasks import Task
from attnlab.lab.train import load_for_inference

STRUCTURES = ("none", "mask", "spd")


def attention_job(task: str, structure: str, split: str, seed: int, args) -> Job:
    """One attention model of the table: claim 13's options for ``structure``, this script's
    model and recipe (``args``), ``seed`` for both the model and the random split."""
    options = [
        *MoleculeBonds.STRUCTURES[structure][1], f"--model.dim={args.dim}",
        f"--model.ff_hidden={2 * args.dim}",  # the width BENCHMARKS' runs had (2 x dim)
        f"--model.depth={args.depth}", f"--model.heads={args.heads}",
        f"--model.dropout={args.dropout}", f"--model.pooling={args.pooling}",
        f"--train.epochs={args.epochs}", f"--train.lr={args.lr}",
        f"--train.batch_size={args.batch_size}", f"--train.weight_decay={args.weight_decay}",
        f"--train.warmup_fraction={args.warmup}", f"--train.patience={args.patience}",
        "--train.device=cpu", *QUIET, f"--task_options.seed={seed}",
    ]  # fmt: skip
    if task == "freesolv":
        options.append(f"--task_options.split={split}")
    return Job(task, tuple(options), seed, f"{task} {split}, structure {structure}")


def task_of(run: Path) -> Task:
    """The task of the finished run in ``run`` with its splits set up, rebuilt as ``attnlab
    eval`` rebuilds it (the run's config and kept data): the molecules the run was scored on."""
    task, _, _ = load_for_inference(run, setup=True)
    return task


def fingerprint_baselines(task_obj, seed: int) -> dict[str, float]:
    """Morgan (r=2, 2048 bits) + MLP / random forest on the task's own splits: test RMSE."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.neural_network import MLPRegressor

    # The molecule as the task read it: an SDF's SMILES field may not parse (solubility has
    # such records; the task reads the molblock), so SDF molecules come from the file again.
    from_file: dict[str, object] = {}
    if task_obj.name == "solubility":
        for key in ("train", "test"):
            for r in read_sdf(dataset_path("solubility", key), target_field="SOL").records:
                from_file[r.smiles] = r.mol

    def xy(split: str) -> tuple[np.ndarray, np.ndarray]:
        examples = task_obj.splits()[split]
        mols = [from_file.get(e.smiles) or mol_from_smiles(e.smiles) for e in examples]
        return morgan_fingerprints(mols, radius=2, bits=2048), np.array(
            [e.target for e in examples]
        )

    (x_tr, y_tr), (x_dev, y_dev), (x_te, y_te) = xy("train"), xy("dev"), xy("test")
    mean, std = y_tr.mean(), y_tr.std()
    rmse = lambda p, y: float(np.sqrt(np.mean((p - y) ** 2)))  # noqa: E731
    # MLP: pick the weight decay on dev (the fingerprint is sparse and the set small).
    best = None
    for alpha in (1e-4, 1e-2, 1.0):
        mlp = MLPRegressor(hidden_layer_sizes=(512, 128), alpha=alpha, max_iter=300,
                           early_stopping=True, random_state=seed)  # fmt: skip
        mlp.fit(np.vstack([x_tr]), (y_tr - mean) / std)
        dev = rmse(mlp.predict(x_dev) * std + mean, y_dev) if len(y_dev) else 0.0
        if best is None or dev < best[0]:
            best = (dev, mlp)
    mlp_rmse = rmse(best[1].predict(x_te) * std + mean, y_te)
    rf = RandomForestRegressor(n_estimators=300, random_state=seed, n_jobs=1)
    rf.fit(x_tr, y_tr)
    return {"fp_mlp": mlp_rmse, "fp_rf": rmse(rf.predict(x_te), y_te)}


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="freesolv", choices=["freesolv", "solubility"])
    p.add_argument("--splits", nargs="+", default=["random", "scaffold"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument("--structures", nargs="+", default=list(STRUCTURES), choices=STRUCTURES)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--pooling", default="attention")
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--weight_decay", type=float, default=0.01)
    p.add_argument("--warmup", type=float, default=0.05)
    p.add_argument("--patience", type=int, default=0)
    p.add_argument("--no-baselines", action="store_true")
    p.add_argument("--out", default="")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 seed, 2 epochs, dim 16")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.epochs, args.dim, args.depth, args.heads = [0], 2, 16, 1, 2
    if args.task == "solubility":
        args.splits = ["given"]
    logging.basicConfig(level=logging.WARNING)
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_molecules_"))
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[tuple[str, str], list[float]] = {}
    records = []
    jobs = {(split, seed, structure): attention_job(args.task, structure, split, seed, args)
            for split in args.splits for seed in args.seeds for structure in args.structures}  # fmt: skip
    results = dict(zip(jobs, run_jobs(list(jobs.values()), out)))
    for split in args.splits:
        for seed in args.seeds:
            for structure in args.structures:
                job, result = jobs[split, seed, structure], results[split, seed, structure]
                test, dev = result.metrics["test"], result.metrics["best_dev"]
                rmse = test["rmse"]
                rows.setdefault((split, f"attention, {structure}"), []).append(rmse)
                records.append({"split": split, "seed": seed, "model": structure, "test": test,
                                "dev": dev, "command": job.command()})  # fmt: skip
                if "reference_rmse" in test and structure == args.structures[0]:
                    rows.setdefault((split, "physics calc"), []).append(test["reference_rmse"])
                print(f"{split} seed {seed} {structure}: test rmse {rmse:.3f}", flush=True)
            if not args.no_baselines:
                first = jobs[split, seed, args.structures[0]]
                base = fingerprint_baselines(task_of(job_dir(out, first)), seed)
                for name, value in base.items():
                    rows.setdefault((split, name), []).append(value)
                records.append({"split": split, "seed": seed, "baselines": base})
                print(f"{split} seed {seed} baselines: {base}", flush=True)
    (out / "results.json").write_text(json.dumps({"args": vars(args), "runs": records}, indent=1))
    print(f"\n| split | model | test RMSE (mean ± std over seeds {args.seeds}) |")
    print("|---|---|---|")
    for (split, model), values in rows.items():
        finite = [v for v in values if math.isfinite(v)]
        print(f"| {split} | {model} | {summary(finite)} |")
    print(f"\nresults: {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
