"""Test PER / WER of the ``g2p`` models on CMUdict (90/5/5 split by word), one JSON line a run.

Each run is ``attnlab train g2p`` with a preset (below) and any extra ``--a.b=value`` options;
its test metrics (greedy decoding of the best dev checkpoint), and optionally the same
checkpoint decoded with beam search (``--beam 5``; decoded as ``attnlab eval`` and claim 15 of
``attnlab report`` decode, by :func:`attnlab.lab.report.rescore.beam_scores`: the run's batch
size and precision; before 2026-12-05 this script decoded in float32), are appended to ``--out`` with the config,
the steps, the wall time and the machine's load. ``--minutes M`` sizes ``train.max_steps`` so
that training takes about ``M`` minutes: it first times a few training steps on this machine,
now (a busy machine gets fewer steps). ``--collect RUN_DIR`` only records an existing run,
with the config from its own ``config.json``; a ``--preset`` or ``--a.b=value`` options given
with it are checked against that config, and the run is refused, naming the differences, if it
was not made with them; with ``--average K ...`` also the mean weights of its last K epoch
snapshots (``train.keep_epochs``), K chosen on dev.
``--bucketing K`` trains nothing: it measures what ``train.bucket=K`` (length bucketing) saves,
the share of padding in the batches of an epoch and the training words/s of the preset's model
on plain and on bucketed batches, timed in alternating rounds in one process.

    OMP_NUM_THREADS=1 python benchmarks/g2p.py --preset transformer --minutes 60 \
        --out results/g2p.jsonl --beam 5
    OMP_NUM_THREADS=1 python benchmarks/g2p.py --preset lstm --minutes 25 --out results/g2p.jsonl
    python benchmarks/g2p.py --collect runs/g2p-transformer --beam 5 --out results/g2p.jsonl
    python benchmarks/g2p.py --collect runs/g2p-wide --average 5 10 --beam 5 --out results/g2p.jsonl
    OMP_NUM_THREADS=1 python benchmarks/g2p.py --bucketing 50 --model.dim=192 --model.ff_hidden=512
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from attnlab.lab.cli import main as attnlab
from attnlab.lab.report.rescore import beam_scores
from attnlab.lab.train.batching import bucket_batches, epoch_order, make_batches

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402
from stored import refuse, run_lacks  # noqa: E402

#: model and training options of each preset (over the task's defaults)
PRESETS = {
    "transformer": [
        "--model.kind=transformer", "--model.dim=128", "--model.ff_hidden=256",
        "--model.heads=4", "--model.encoder_depth=3", "--model.decoder_depth=2",
        "--model.dropout=0.0", "--train.batch_size=128", "--train.lr=0.002",
    ],
    "lstm": [
        "--model.kind=lstm", "--model.dim=192", "--model.encoder_depth=1",
        "--model.decoder_depth=1", "--model.dropout=0.0", "--train.batch_size=128",
        "--train.lr=0.002",
    ],
}  # fmt: skip


def _setup(options: list[str]):
    """The task (set up), a fresh model in train mode, and the resolved config of ``options``."""
    from attnlab.lab.tasks import TASKS
    from attnlab.lab.train.config import resolve_config

    cfg = resolve_config(task="g2p", overrides=options)
    task = TASKS.get("g2p")()
    task.setup(cfg.task_options)
    return task, task.build_model(cfg.model).train(), cfg


def _time_steps(task, model, opt, batches: list) -> float:
    """Seconds to take one optimizer step on each of ``batches`` (collated)."""
    start = time.perf_counter()
    for batch in batches:
        loss, units = task.loss(model, batch)
        opt.zero_grad()
        (loss / units).backward()
        opt.step()
    return time.perf_counter() - start


def _sample_batches(task, train: list, size: int, n: int, bucket: int) -> list[list[int]]:
    """``n`` batches of ``size`` from the first ``n * size`` words of epoch 0's order: cut as
    they come, or (``bucket`` > 0) length-bucketed in pools of ``bucket`` batches."""
    order = epoch_order(len(train), seed=0, epoch=0)[: n * size]
    if not bucket:
        return make_batches(order, batch_size=size)
    costs = {i: task.batch_size_of(train[i]) for i in order}
    return bucket_batches(order, costs=costs, bucket=bucket, batch_size=size, seed=0)


def seconds_per_step(options: list[str], steps: int = 6) -> float:
    """Time ``steps`` training steps (after one warm-up) of the run ``options`` describe."""
    task, model, cfg = _setup(options)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train, tc = task.splits()["train"], cfg.train
    batches = _sample_batches(task, train, tc.batch_size, steps + 1, tc.bucket)
    collated = [task.collate([train[i] for i in b]) for b in batches]
    _time_steps(task, model, opt, collated[:1])
    return _time_steps(task, model, opt, collated[1:]) / steps


def bucketing(options: list[str], bucket: int, *, steps: int = 10, rounds: int = 4) -> dict:
    """Padding share, and training words/s and tokens/s, without and with
    ``train.bucket=bucket``: both arms train on the same ``steps * rounds`` batches' words,
    cut as they come or bucketed, timed in rounds of ``steps`` steps in the order ABBA."""
    task, model, cfg = _setup(options)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train, size = task.splits()["train"], cfg.train.batch_size
    row: dict = {"bucket": bucket, "batch_size": size, "model": asdict(cfg.model)}
    # the padding of a whole epoch
    order = epoch_order(len(train), seed=0, epoch=0)
    costs = [task.batch_size_of(ex) for ex in train]
    epoch = {"plain": make_batches(order, batch_size=size),
             "bucketed": bucket_batches(order, costs=costs, bucket=bucket, batch_size=size,
                                        seed=0)}  # fmt: skip
    sides = {"letters": lambda ex: len(ex.word), "phones": lambda ex: len(ex.prons[0]) + 1}
    for name, batches in epoch.items():
        for side, length in sides.items():
            real = sum(length(train[i]) for b in batches for i in b)
            padded = sum(len(b) * max(length(train[i]) for i in b) for b in batches)
            row[f"{name}_padding_{side}"] = round(1 - real / padded, 4)
    # the speed, on the same words
    n = steps * rounds
    arms = {
        name: [
            task.collate([train[i] for i in b]) for b in _sample_batches(task, train, size, n, k)
        ]
        for name, k in (("plain", 0), ("bucketed", bucket))
    }
    _time_steps(task, model, opt, arms["plain"][:2])  # warm-up
    seconds = dict.fromkeys(arms, 0.0)
    for r in range(rounds):  # ABBA: a drift in the machine's load hits both arms alike
        for name in ("plain", "bucketed") if r % 2 == 0 else ("bucketed", "plain"):
            seconds[name] += _time_steps(task, model, opt, arms[name][r * steps : (r + 1) * steps])
    words = n * size
    tokens = sum(costs[i] for i in order[:words])
    for name in arms:
        row[f"{name}_words_per_s"] = round(words / seconds[name], 1)
        row[f"{name}_tokens_per_s"] = round(tokens / seconds[name], 1)
    row["speedup"] = round(seconds["plain"] / seconds["bucketed"], 3)
    return row


def averaged(run: Path, lasts: list[int], beam: int) -> dict:
    """Checkpoint averaging of ``run``'s epoch snapshots (``train.keep_epochs``): dev PER/WER
    of its last epoch and of the mean of its last K for each K in ``lasts``; the K with the
    lowest dev PER is then decoded on test (greedy, and with ``beam``). K is chosen on dev."""
    from attnlab.lab.train import average_checkpoints, save_checkpoint
    from attnlab.lab.train.rundir import EPOCH_SNAPSHOTS

    snapshots = sorted(run.glob(EPOCH_SNAPSHOTS))
    if len(snapshots) < max(lasts):
        raise SystemExit(f"{run}: {len(snapshots)} epoch snapshots, --average needs {max(lasts)}")
    dev = {1: beam_scores(snapshots[-1], 1, ("dev",))["dev"]}
    for k in lasts:
        save_checkpoint(run / f"avg{k}.pt", average_checkpoints(snapshots[-k:]))
        dev[k] = beam_scores(run / f"avg{k}.pt", 1, ("dev",))["dev"]
    best = min(dev, key=lambda k: dev[k]["per"])
    chosen = snapshots[-1] if best == 1 else run / f"avg{best}.pt"
    row = {"average_dev": {str(k): m for k, m in dev.items()}, "average_chosen": best,
           "average_test": beam_scores(chosen, 1, ("test",))["test"]}  # fmt: skip
    if beam > 1:
        row[f"average_test_beam{beam}"] = beam_scores(chosen, beam, ("test",))["test"]
    return row


def emit(row: dict, out: Path | None) -> None:
    """Print ``row`` as one JSON line, and append it to ``out`` if given."""
    print(json.dumps(row))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")


def record(
    run: Path, out: Path | None, *, beam: int, extra: dict, average: list[int] | None = None
) -> dict:
    metrics = json.loads((run / "metrics.json").read_text())
    config = json.loads((run / "config.json").read_text())
    row = {"run": str(run), "model": config["model"], "train": config["train"],
           "task_options": config["task_options"], "test": metrics.get("test"),
           "machine": machine(), "load_avg": os.getloadavg(), **extra}  # fmt: skip
    if beam > 1:
        row[f"test_beam{beam}"] = beam_scores(run / "best.pt", beam, ("test",))["test"]
    if average:
        row.update(averaged(run, average, beam))
    emit(row, out)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="default transformer; with --collect: check the run was made with it",
    )
    p.add_argument("--minutes", type=float, default=0.0, help="training budget (0: epochs)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--beam", type=int, default=1, help="also test with this beam width")
    p.add_argument("--run_dir", default=None, help="default runs/g2p-PRESET")
    p.add_argument("--collect", help="only record this existing run")
    p.add_argument("--average", type=int, nargs="+", metavar="K",
                   help="also average the run's last K epoch snapshots (train.keep_epochs), "
                   "pick K on dev, test it")  # fmt: skip
    p.add_argument("--out", help="append the JSON line here")
    p.add_argument("--bucketing", type=int, metavar="K", help="measure train.bucket=K instead")
    args, extra = p.parse_known_args(argv)
    out = Path(args.out) if args.out else None
    if args.collect:
        given = [*PRESETS.get(args.preset, []), *extra]
        if given and (changes := run_lacks(args.collect, given)):
            refuse(args.collect, changes, "--collect records a run as it was made")
        record(Path(args.collect), out, beam=args.beam, extra={"collected": True},
               average=args.average)  # fmt: skip
        return 0
    args.preset = args.preset or "transformer"
    if args.bucketing:
        options = [*PRESETS[args.preset], *extra]
        row = {**bucketing(options, args.bucketing), "machine": machine(),
               "load_avg": os.getloadavg()}  # fmt: skip
        emit(row, out)
        return 0
    run = Path(args.run_dir or f"runs/g2p-{args.preset}")
    options = [*PRESETS[args.preset], f"--train.epochs={args.epochs}", *extra]
    info: dict = {"preset": args.preset, "budget_minutes": args.minutes}
    if args.minutes > 0:
        step = seconds_per_step(options)
        max_steps = max(1, int(args.minutes * 60 / step))
        options.append(f"--train.max_steps={max_steps}")
        info.update(seconds_per_step=step, max_steps=max_steps)
    start = time.time()
    code = attnlab(["train", "g2p", *options, f"--out_dir={run}", "--train.overwrite=true"])
    if code:
        return code
    info["train_minutes"] = (time.time() - start) / 60
    record(run, out, beam=args.beam, extra=info)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
