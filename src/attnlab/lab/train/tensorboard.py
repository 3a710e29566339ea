"""TensorBoard event files of a run (``--train.tensorboard=true``), beside ``metrics.csv``.

The run's directory gets ``tensorboard/`` with one event file per training segment (a resume adds
one). Scalars, all at the optimizer step:

* ``train/loss``, ``train/lr`` and ``train/UNIT_per_s`` every ``train.log_every`` steps;
* ``dev/METRIC`` at every evaluation, and ``dev/train_loss`` (the loss since the last one);
* ``test/METRIC`` of the best model, at the last step.

A resumed run purges the events past its checkpoint's step, so that the curves hold the steps the
run kept, as ``metrics.csv`` does. ``tensorboard --logdir runs`` shows every run under ``runs``.

TensorBoard is an optional extra (``pip install 'attnlab[tensorboard]'``); asking for it without
the package fails before training starts, naming the package.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from pathlib import Path

__all__ = ["TENSORBOARD_DIR", "TensorBoardLog", "require_tensorboard"]

#: the event files' folder inside a run directory
TENSORBOARD_DIR = "tensorboard"


def require_tensorboard() -> None:
    """Raise ``ImportError`` with the install line when the ``tensorboard`` package is absent."""
    try:
        import tensorboard  # noqa: F401
    except ImportError as err:
        raise ImportError(
            "train.tensorboard=true needs the tensorboard package, which is not installed: "
            "pip install 'attnlab[tensorboard]' (or pip install tensorboard)"
        ) from err


class TensorBoardLog:
    """Scalars of one run into ``out_dir/tensorboard`` (a no-op when not ``enabled``).

    Args:
        out_dir: the run's directory.
        enabled: write events (the main rank of a run with ``train.tensorboard``).
        resume_step: a resumed run's step: events after it (from the segment that was cut
            short) are purged, as ``metrics.csv`` drops its rows after the checkpoint.
    """

    def __init__(self, out_dir: str | Path, *, enabled: bool, resume_step: int | None = None):
        self._writer = None
        if not enabled:
            return
        require_tensorboard()
        from torch.utils.tensorboard import SummaryWriter

        folder = Path(out_dir) / TENSORBOARD_DIR
        if resume_step is None and folder.is_dir():  # a new run: no curves of an earlier one
            shutil.rmtree(folder)
        purge = resume_step + 1 if resume_step is not None else None
        self._writer = SummaryWriter(str(folder), purge_step=purge)

    def scalars(self, step: int, values: Mapping[str, float], prefix: str = "") -> None:
        """Write ``prefix + name`` for each finite number of ``values`` at ``step``."""
        if self._writer is None:
            return
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if math.isfinite(value):
                self._writer.add_scalar(prefix + name, float(value), global_step=step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
