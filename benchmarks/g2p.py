"""Test PER / WER of the ``g2p`` models on CMUdict (90/5/5 split by word), one JSON line a run.

Each run is ``attnlab train g2p`` with a preset (below) and any extra ``--a.b=value`` options;
its test metrics (greedy decoding of the best dev checkpoint), and optionally the same
checkpoint decoded with beam search (``--beam 5``), are appended to ``--out`` with the config,
the steps, the wall time and the machine's load. ``--minutes M`` sizes ``train.max_steps`` so
that training takes about ``M`` minutes: it first times a few training steps on this machine,
now (a busy machine gets fewer steps). ``--collect RUN_DIR`` only records an existing run.

    OMP_NUM_THREADS=1 python benchmarks/g2p.py --preset transformer --minutes 60 \
        --out results/g2p.jsonl --beam 5
    OMP_NUM_THREADS=1 python benchmarks/g2p.py --preset lstm --minutes 25 --out results/g2p.jsonl
    python benchmarks/g2p.py --collect runs/g2p-transformer --beam 5 --out results/g2p.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

from attnlab.cli import main as attnlab

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

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


def seconds_per_step(options: list[str], steps: int = 6) -> float:
    """Time ``steps`` training steps (after one warm-up) of the run ``options`` describe."""
    from attnlab.train.config import resolve_config

    cfg = resolve_config(task="g2p", overrides=options)
    from attnlab.tasks import TASKS

    task = TASKS.get("g2p")()
    task.setup(cfg.task_options)
    model = task.build_model(cfg.model).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train = task.splits()["train"]
    gen = torch.Generator().manual_seed(0)
    order = torch.randperm(len(train), generator=gen).tolist()
    size = cfg.train.batch_size
    batches = [task.collate([train[i] for i in order[k * size : (k + 1) * size]])
               for k in range(steps + 1)]  # fmt: skip
    start = 0.0
    for k, batch in enumerate(batches):
        if k == 1:
            start = time.perf_counter()
        loss, units = task.loss(model, batch)
        opt.zero_grad()
        (loss / units).backward()
        opt.step()
    return (time.perf_counter() - start) / steps


def beam_metrics(run: Path, beam: int) -> dict:
    """Test metrics of ``run``'s best checkpoint decoded with beam ``beam``."""
    from dataclasses import replace

    from attnlab.train.checkpoint import load_for_inference

    task, model, cfg = load_for_inference(run / "best.pt")
    task.setup(replace(cfg.task_options, eval_beam=beam))
    test = task.splits()["test"]
    model.eval()
    with torch.no_grad():
        batches = (task.collate(test[i : i + 512]) for i in range(0, len(test), 512))
        return task.evaluate(model, batches)


def record(run: Path, out: Path | None, *, beam: int, extra: dict) -> dict:
    metrics = json.loads((run / "metrics.json").read_text())
    config = json.loads((run / "config.json").read_text())
    row = {"run": str(run), "model": config["model"], "train": config["train"],
           "task_options": config["task_options"], "test": metrics.get("test"),
           "machine": machine(), "load_avg": os.getloadavg(), **extra}  # fmt: skip
    if beam > 1:
        row[f"test_beam{beam}"] = beam_metrics(run, beam)
    print(json.dumps(row))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="transformer")
    p.add_argument("--minutes", type=float, default=0.0, help="training budget (0: epochs)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--beam", type=int, default=1, help="also test with this beam width")
    p.add_argument("--run_dir", default=None, help="default runs/g2p-PRESET")
    p.add_argument("--collect", help="only record this existing run")
    p.add_argument("--out", help="append the JSON line here")
    args, extra = p.parse_known_args(argv)
    out = Path(args.out) if args.out else None
    if args.collect:
        record(Path(args.collect), out, beam=args.beam, extra={"collected": True})
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
