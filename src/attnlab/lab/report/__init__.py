"""``attnlab report``: the lecture's claims, each run as an experiment, in one report
(:mod:`.claims` the claims and their rules, :mod:`.stats` the verdicts, :mod:`.jobs` the runs,
:mod:`.run` the command, :mod:`.execute` what runs the jobs, :mod:`.render` the pages)."""

from .run import report_command

__all__ = ["report_command"]
