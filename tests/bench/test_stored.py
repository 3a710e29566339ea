"""The benchmarks' checks of stored results against the command given (benchmarks/stored.py),
and of the scripts whose trainings are report jobs, run through benchmarks/check_stored.py: no
timing, no datasets, two tiny trainings."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from check_stored import *  # noqa: E402, F403  (its test_* functions)
