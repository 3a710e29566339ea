"""Train the *default model* of every registered task for a few steps under ``torchrun``
(used by test_distributed.py).

Usage::

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/train/ddp_tasks.py \
        OUT_DIR REPORT_DIR

Each task trains ``--train.max_steps=3`` global batches of 16 (8 sentences per rank, so the
ranks see sequences of different lengths) on its real data (``ATTNLAB_DATA``); dev and test are
cut to 64 examples to keep it fast. Every rank writes ``REPORT_DIR/rank<r>.json``: per task its
result, the longest sequence of each of its training micro-batches, and a checksum of its final
weights, so the test can check that the ranks agree.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from attnlab.lab.tasks import TASKS
from attnlab.lab.train import Trainer, resolve_config

OWN = Path(__file__).resolve().parents[1] / "tasks" / "data"

#: options that pick a small corpus where the default one is large (the model stays the default)
DATA_OPTIONS = {
    "pos": ["--task_options.corpus=ud-atis"],
    "phones": ["--task_options.sentences=40"],
    # generated: the default is LRA's 96k trees (minutes to make); 96 trees of the same spec
    "listops": ["--task_options.train=64", "--task_options.dev=16", "--task_options.test=16"],
    # the tasks on one's own files: the tiny files tests/tasks/data holds
    "text-tag": [
        f"--data.train={OWN / 'tagged.train.txt'}",
        f"--data.test={OWN / 'tagged.test.txt'}",
    ],
    "text-classify": [
        f"--data.train={OWN / 'sentiment.train.txt'}",
        f"--data.test={OWN / 'sentiment.test.txt'}",
    ],
    "seq2seq": [f"--data.train={OWN / 'own_pairs.tsv'}", "--data.tokenizer=whitespace"],
    "image-classify": [f"--data.train={OWN / 'own_images.npz'}", "--data.size=8"],
    "node-classify": [f"--data.nodes={OWN / 'own_graph.npz'}"],
    "audio-classify": [f"--data.train={OWN / 'recordings'}", "--data.sample_rate=8000"],
    "audio-frames": [f"--data.train={OWN / 'recordings'}", "--data.sample_rate=8000"],
    "molecule-property": [f"--data.train={OWN / 'own_molecules.csv'}"],
}  # fmt: skip  (phones: made by festival on first use)
BUDGET = [
    "--train.max_steps=3", "--train.batch_size=16", "--train.eval_batch_size=64",
    "--train.device=cpu", "--train.log_every=0",
]  # fmt: skip
EVAL_EXAMPLES = 64


def train_one(name: str, out_dir: Path) -> dict:
    cfg = resolve_config(task=name, overrides=[*BUDGET, *DATA_OPTIONS.get(name, [])])
    cfg.out_dir = str(out_dir / name)
    task = TASKS.get(name)()
    lengths: list[int] = []
    splits, collate = task.splits, task.collate

    def short_splits() -> dict[str, list]:
        return {k: v if k == "train" else v[:EVAL_EXAMPLES] for k, v in splits().items()}

    def recording_collate(examples: list) -> dict:
        batch = collate(examples)
        lengths.append(int(batch["lengths"].max()))
        return batch

    task.splits, task.collate = short_splits, recording_collate
    trainer = Trainer(task, cfg, progress=False)
    result = trainer.fit()
    weights = sum(p.double().abs().sum().item() for p in trainer.model.parameters())
    return {
        "steps": result.steps,
        "test": result.test,
        "best_dev": result.best_dev,
        "train_lengths": lengths[: result.steps],  # the first collates are the train steps
        "weights": weights,
    }


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    out_dir, report_dir = map(Path, sys.argv[1:3])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # one group for all tasks: the trainers only join it
    report = {name: train_one(name, out_dir) for name in TASKS.names()}
    rank = dist.get_rank()
    dist.destroy_process_group()
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / f"rank{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
