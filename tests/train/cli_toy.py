"""The ``attnlab`` command line with a slow toy task registered as ``slowtoy`` (used by
test_interrupt.py to send signals to a training run).

Usage::

    python tests/train/cli_toy.py train slowtoy [--a.b=value ...]

Environment: ``SLOWTOY_MARK`` and ``SLOWTOY_MARK_AT``: create the file ``SLOWTOY_MARK`` when
training step ``SLOWTOY_MARK_AT`` (1-based, default 1) begins, so the test knows training is
under way; ``SLOWTOY_SLEEP``: seconds to sleep in that step and each one after (default 0).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the train package

from attnlab.lab.cli import main  # noqa: E402
from attnlab.lab.tasks import TASKS, register_task  # noqa: E402
from train.toy_task import ToyTask  # noqa: E402


class SlowToy(ToyTask):
    """The toy task, slowed down and announcing a step (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def loss(self, model, batch):
        if model.training:
            self.calls += 1
            mark, mark_at = (
                os.environ.get("SLOWTOY_MARK"),
                int(os.environ.get("SLOWTOY_MARK_AT", "1")),
            )
            if mark and self.calls == mark_at:
                Path(mark).touch()
            if self.calls >= mark_at:
                time.sleep(float(os.environ.get("SLOWTOY_SLEEP", "0")))
        return super().loss(model, batch)


if "slowtoy" not in TASKS:
    register_task("slowtoy")(SlowToy)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
