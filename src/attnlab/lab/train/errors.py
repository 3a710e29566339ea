"""What can stop a run, as exception types a caller can tell apart.

* :class:`RunError` (a ``ValueError``): a problem the user fixes by changing the command: the
  run directory (unwritable, in use, already holding a run, nothing to resume), a diverging
  loss. The CLI prints its message as one line, without a traceback, and exits with status 2.
* :class:`RunComplete`: ``--resume`` of a run that is already complete; the CLI says so and
  exits with 0.
* :class:`TrainingInterrupted`: SIGINT / SIGTERM stopped the run after a step and ``last.pt``
  was saved; the CLI prints the message and the command that resumes, and exits with 130.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "RunError",
    "RunComplete",
    "DivergenceError",
    "TrainingInterrupted",
    "INTERRUPTED_EXIT_CODE",
]

#: exit status of a run stopped by a signal after saving (128 + SIGINT, as a shell reports Ctrl-C)
INTERRUPTED_EXIT_CODE = 130


class RunError(ValueError):
    """A run cannot start or go on, for a reason the message states with what to do instead."""


class RunComplete(Exception):
    """``--resume`` of a run that has nothing left to train: it reached its epochs,
    ``max_steps``, ``max_time`` or early stopping, and was tested. Not an error (the CLI prints
    the message and exits 0); raising ``--train.epochs`` (or the others) continues it."""


class DivergenceError(RunError):
    """The loss or the gradient became non-finite more often than ``train.max_bad_steps``."""


class TrainingInterrupted(Exception):
    """A signal stopped training after a complete step; ``checkpoint`` resumes it.

    Attributes:
        signal_name: ``"SIGINT"`` or ``"SIGTERM"``.
        step: optimizer steps done (and saved).
        total_steps: steps the run was to take.
        checkpoint: the ``last.pt`` just written.
    """

    def __init__(self, signal_name: str, step: int, total_steps: int, checkpoint: Path) -> None:
        self.signal_name, self.step, self.total_steps = signal_name, step, total_steps
        self.checkpoint = Path(checkpoint)
        super().__init__(
            f"interrupted by {signal_name} after step {step} of {total_steps}; "
            f"saved {self.checkpoint}"
        )
