"""Train the toy task under ``torchrun`` (used by test_distributed.py).

Usage::

    python -m torch.distributed.run --standalone --nproc_per_node=2 tests/train/ddp_toy.py \
        OUT_DIR REPORT_DIR [--dotted.name=value ...]

Every rank writes ``REPORT_DIR/rank<r>.json`` with its view of the run (result, world size,
threads), so the test can check that all ranks agree; only rank 0 writes into ``OUT_DIR``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the train package

from attnlab.train import Trainer  # noqa: E402
from train.toy_task import ToyTask, toy_config  # noqa: E402


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    out_dir, report_dir, *overrides = sys.argv[1:]
    trainer = Trainer(ToyTask(), toy_config(out_dir, *overrides), progress=False)
    env = trainer.env
    report = {
        "rank": env.rank,
        "world_size": env.world_size,
        "threads": torch.get_num_threads(),
        "distributed": env.distributed,
    }
    result = trainer.fit()
    report["result"] = dataclasses.asdict(result)
    Path(report_dir).mkdir(parents=True, exist_ok=True)
    Path(report_dir, f"rank{env.rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
