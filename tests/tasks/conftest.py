"""Fixtures of the task tests: the tiny corpus of ``data/``, no dataset mirror, one thread, and
``cli``, the commands run in this process with their exit status and output.

Every test here runs with ``ATTNLAB_DATA`` and ``ATTNLAB_CACHE`` pointing at empty
directories, so a task that reached for a registered corpus would fail (the mirror is never
needed, and the network is never touched: a mirror in use forbids downloads).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import NamedTuple

import pytest
import torch

DATA = Path(__file__).resolve().parent / "data"

#: a tagger and a classifier small enough to train in about a second on one thread
TINY_MODEL = [
    "--model.input.dim=32", "--model.encoder.depth=1",
    "--model.encoder.heads=2", "--model.encoder.ff_hidden=64", "--model.encoder.dropout=0.0",
]  # fmt: skip
TINY_TRAIN = [
    "--train.epochs=25", "--train.batch_size=4", "--train.lr=1e-2", "--train.device=cpu",
    "--train.log_every=0", "--train.warmup_steps=5",
]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def no_mirror(tmp_path_factory) -> Path:
    """``ATTNLAB_DATA`` and ``ATTNLAB_CACHE`` at empty directories (per module: set before
    its module-scoped fixtures, restored after, so other test directories keep theirs)."""
    root = tmp_path_factory.mktemp("no-mirror")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTNLAB_DATA", str(root / "mirror"))
        mp.setenv("ATTNLAB_CACHE", str(root / "cache"))
        yield root


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def tagger_options() -> list[str]:
    return [
        "--task_options.corpus=files",
        f"--task_options.train_file={DATA / 'tagged.train.txt'}",
        f"--task_options.dev_file={DATA / 'tagged.dev.conllu'}",
        f"--task_options.test_file={DATA / 'tagged.test.txt'}",
    ]


def classifier_options() -> list[str]:
    return [
        f"--task_options.train_file={DATA / 'sentiment.train.txt'}",
        f"--task_options.test_file={DATA / 'sentiment.test.txt'}",
    ]


# -- the commands as a user meets them ------------------------------------------------------------


class Ran(NamedTuple):
    """What one ``attnlab ...`` command did: its exit status, what it printed, and the
    messages of the warnings it issued (in a terminal, ``attnlab CMD: warning: ...`` lines on
    stderr; here recorded, as pytest records every warning)."""

    rc: int
    out: str
    err: str
    warned: list[str]

    def user_error(self, command: str, *fragments: str) -> str:
        """Assert this was a user error: exit status 2, nothing on stdout, one stderr line
        ``attnlab COMMAND: error: ...`` holding every fragment; return that line."""
        assert self.rc == 2, (self.rc, self.out, self.err)
        assert self.out == "", self.out
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith(f"attnlab {command}: error: "), self.err
        for fragment in fragments:
            assert fragment in lines[0], (fragment, lines[0])
        return lines[0]

    def warnings(self) -> list[str]:
        """The messages of the ``UserWarning``s issued (attnlab's own)."""
        return self.warned


@pytest.fixture
def cli(capsys):
    """``cli("predict", RUN, "text")``: run ``attnlab`` in this process, return :class:`Ran`."""
    from attnlab.lab.cli import main

    def run(*args: object) -> Ran:
        capsys.readouterr()
        with warnings.catch_warnings(record=True) as log:
            warnings.simplefilter("always")
            rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        warned = [str(w.message) for w in log if issubclass(w.category, UserWarning)]
        return Ran(rc, out, err, warned)

    return run
