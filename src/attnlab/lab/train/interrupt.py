"""Ctrl-C that saves: the first SIGINT / SIGTERM asks the trainer to stop after the current step,
the second one ends the process at once.

While :class:`StopOnSignal` is entered (the trainer enters it around :meth:`Trainer.fit`), the
first SIGINT or SIGTERM only records a request; the trainer finishes the step it is in, writes
``last.pt`` (atomically) and raises :class:`~attnlab.lab.train.errors.TrainingInterrupted`, which
the CLI turns into a message, the command that resumes, and exit status 130. A second signal
restores the default action and re-delivers itself: the process ends immediately (its
temporary files are removed by the next start, :mod:`~attnlab.lab.train.rundir`).

A repeat within ``grace_s`` (1 s) counts as the same request: one Ctrl-C under ``torchrun``
reaches each worker twice, from the terminal and forwarded by the launcher. Under DDP the
request is all-reduced with each step's loss, so every rank stops after the same step even if
only one was signalled.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import threading
import time
from collections.abc import Sequence
from types import FrameType

__all__ = ["StopOnSignal", "catch_signals_between_runs", "pending_signal", "request_stop",
           "resume_command", "withdraw_request"]  # fmt: skip

logger = logging.getLogger(__name__)


#: a signal received by :func:`catch_signals_between_runs`'s handler, or a
#: :func:`request_stop`, not yet taken up
_PENDING: str | None = None
#: the :class:`StopOnSignal` entered in this process (the run training now), or None
_ACTIVE: StopOnSignal | None = None


def request_stop(reason: str) -> None:
    """Ask the run training in this process to stop after its current step and save
    ``last.pt``, as a first Ctrl-C does, from any thread and without a signal (the memory
    guard's request): the run entered now takes it, or else the next one to enter. ``reason``
    names it in the run's message ("interrupted by REASON after step ..."). A request already
    made is left as it is, and a signal that follows is a first Ctrl-C, not a second: it never
    ends the process unsaved."""
    global _PENDING
    active = _ACTIVE
    if active is not None:
        if active.signal_name is None:
            active.signal_name = reason
            logger.warning("%s: stopping after the current step and saving last.pt", reason)
    elif _PENDING is None:
        _PENDING = reason


def withdraw_request(reason: str) -> None:
    """Drop a :func:`request_stop` of ``reason`` that no run has taken up (its run ended
    first), so that it does not stop the next run of the process."""
    global _PENDING
    if reason == _PENDING:
        _PENDING = None


def catch_signals_between_runs(signals: Sequence[signal.Signals] = (signal.SIGINT,)) -> None:
    """Record ``signals`` instead of acting on them, in a process that trains one run after
    another (a report's worker): one that arrives while a run sets up (before
    :class:`StopOnSignal` is entered) or between runs is kept by :func:`pending_signal`, and
    the next :class:`StopOnSignal` entered takes it as its request, so that the run stops after
    its first step, saved, instead of the signal being lost or killing the process."""

    def record(signum: int, frame: FrameType | None) -> None:
        global _PENDING
        _PENDING = signal.Signals(signum).name

    for sig in signals:
        signal.signal(sig, record)


def pending_signal() -> str | None:
    """The name of a signal :func:`catch_signals_between_runs` recorded and no run has taken
    up yet, or None."""
    return _PENDING


class StopOnSignal:
    """Context manager: turn the first SIGINT / SIGTERM into :attr:`requested`.

    Outside the main thread (where Python cannot install handlers) it does nothing.

    Args:
        signals: the signals to catch.
        grace_s: a repeat within this many seconds of the first is the same request.
    """

    def __init__(
        self,
        signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
        *,
        grace_s: float = 1.0,
    ) -> None:
        self.signals, self.grace_s = tuple(signals), grace_s
        self.signal_name: str | None = None
        self._first = 0.0
        self._previous: dict[signal.Signals, object] = {}

    @property
    def requested(self) -> bool:
        """Whether a stop was asked for."""
        return self.signal_name is not None

    def __enter__(self) -> StopOnSignal:
        global _PENDING, _ACTIVE
        _ACTIVE = self
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._handle)
        if _PENDING is not None:  # arrived before (catch_signals_between_runs, request_stop)
            self.signal_name, _PENDING = _PENDING, None
            if self.signal_name in signal.Signals.__members__:  # a signal: a repeat is a second
                self._first = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        global _ACTIVE
        if _ACTIVE is self:
            _ACTIVE = None
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self.signal_name is None or not self._first:  # none yet, or request_stop's only
            self.signal_name, self._first = signal.Signals(signum).name, now
            logger.warning(
                "%s: stopping after the current step and saving last.pt; send it again to quit "
                "at once without saving",
                self.signal_name,
            )
            return
        if now - self._first < self.grace_s:
            return  # the same request, delivered twice
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def resume_command(words: Sequence[str], *, world_size: int = 1) -> str:
    """The command line that resumes an interrupted ``attnlab`` run.

    Args:
        words: the words after ``attnlab`` of the interrupted command (``train TASK ...``,
            overrides in their ``--a.b=value`` form); ``--overwrite`` and ``--resume`` (and
            their ``--train.`` overrides) are dropped, then ``--resume`` is added.
        world_size: the number of processes: more than one is launched with ``torchrun``
            (single machine; a multi-node launch needs its own ``torchrun`` options).
    """
    drop = ("--overwrite", "--resume", "--train.overwrite", "--train.resume")
    args = [w for w in words if not w.startswith(drop)]
    launcher = ["attnlab"]
    if world_size > 1:
        launcher = ["torchrun", "--standalone", f"--nproc_per_node={world_size}", "-m", "attnlab"]
    return shlex.join([*launcher, *args, "--resume"])
