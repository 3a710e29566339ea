"""Train the toy task under ``torchrun`` (used by test_distributed.py).

Usage::

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/train/ddp_toy.py \
        OUT_DIR REPORT_DIR [--dotted.name=value ...]

Every rank writes ``REPORT_DIR/rank<r>.json`` with its view of the run (result, world size,
threads), so the test can check that all ranks agree; only rank 0 writes into ``OUT_DIR``.

With ``DDP_TOY_SIGTERM=RANK:STEP`` in the environment, rank ``RANK`` sends itself SIGTERM during
training step ``STEP`` (1-based); the report then holds what ``TrainingInterrupted`` said.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the train package

from attnlab.lab.train import Trainer, TrainingInterrupted  # noqa: E402
from train.toy_task import ToyTask, toy_config  # noqa: E402


class SignallingToy(ToyTask):
    """The toy task; one rank sends itself SIGTERM in one training step (see above)."""

    def __init__(self, rank: int, step: int) -> None:
        super().__init__()
        self.rank, self.step, self.calls = rank, step, 0

    def loss(self, model, batch):
        if model.training:
            self.calls += 1
            if self.calls == self.step and int(os.environ["RANK"]) == self.rank:
                os.kill(os.getpid(), signal.SIGTERM)
        return super().loss(model, batch)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    out_dir, report_dir, *overrides = sys.argv[1:]
    when = os.environ.get("DDP_TOY_SIGTERM")
    task = SignallingToy(*map(int, when.split(":"))) if when else ToyTask()
    trainer = Trainer(task, toy_config(out_dir, *overrides), progress=False)
    env = trainer.env
    report = {
        "rank": env.rank,
        "world_size": env.world_size,
        "threads": torch.get_num_threads(),
        "distributed": env.distributed,
    }
    try:
        report["result"] = dataclasses.asdict(trainer.fit())
    except TrainingInterrupted as err:
        report["interrupted"] = {"signal": err.signal_name, "step": err.step}
    Path(report_dir).mkdir(parents=True, exist_ok=True)
    Path(report_dir, f"rank{env.rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
