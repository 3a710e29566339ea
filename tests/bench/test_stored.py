"""The benchmarks' checks of stored results against the command given (benchmarks/stored.py),
run through benchmarks/check_stored.py: no training, no timing, no datasets."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from check_stored import *  # noqa: E402, F403  (its test_* functions)
