"""Which positional encoding extrapolates: claim 7 of ``attnlab report``, one code path.

Each encoding (none, sinusoidal, learned, FLOATER, an RNN's states, T5's relative bias, rotary,
ALiBi) trains ``attnlab train positions`` at length L; its best checkpoint is then tested at L,
2L and 4L (``attnlab.lab.report.rescore``). This script is that claim::

    python benchmarks/positions.py [--budget quick|full] [--out DIR] [--jobs N]
    # = attnlab report --claims 7 [--budget ...] [--out DIR] [--jobs N]

BENCHMARKS.md's figures at L = 32 were made by this script's earlier form (commit 161589a:
``--length 32 --k 3 --train 3000 --epochs 5``), which trained and evaluated the encodings
itself.
"""

import sys

from attnlab.lab.cli import main

if __name__ == "__main__":
    sys.exit(main(["report", "--claims", "7", *sys.argv[1:]]))
