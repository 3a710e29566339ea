"""A run's wall-clock budget (``--train.max_time=30m``): parsing it, and saying it.

The budget counts the training loop's wall time (steps and evaluations, not loading the data
or building the model), summed over every resumed segment of the run: ``state.elapsed_s``,
which ``last.pt`` keeps. A run that reaches it stops after the current step, evaluates,
saves ``last.pt`` and tests its best model, as at the end of its epochs; ``--resume`` with a
larger ``max_time`` continues it for the difference (and says so), with the same one it
reports the run complete.
"""

from __future__ import annotations

import math
import re

__all__ = ["DURATION_FORMS", "parse_duration", "format_duration"]

#: what ``train.max_time`` accepts, for error messages and ``--help``
DURATION_FORMS = "90s, 30m, 2h, 1h30m or plain seconds (0: no limit)"

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)")
_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str | float | int, where: str = "train.max_time") -> float:
    """Seconds of a duration: ``"90s"``, ``"30m"``, ``"2h"``, ``"1h30m"``, ``"45"`` or a number.

    Raises:
        ValueError: one line naming ``where``, the accepted forms and the value given.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip().lower().replace(" ", "")
        pos, seconds = 0, 0.0
        for match in _PART.finditer(text):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _SECONDS[match.group(2)]
            pos = match.end()
        if not text or pos != len(text):
            raise ValueError(f"{where}: expected a duration ({DURATION_FORMS}), got {value!r}")
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"{where}: expected a duration ({DURATION_FORMS}), got {value!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """``42 s``, ``12.3 min`` or ``1.5 h``: a duration rounded for a log line."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
