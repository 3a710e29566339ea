"""Fixtures of the task tests: the tiny corpus of ``data/``, no dataset mirror, one thread.

Every test here runs with ``ATTNLAB_DATA`` and ``ATTNLAB_CACHE`` pointing at empty
directories, so a task that reached for a registered corpus would fail (the mirror is never
needed, and the network is never touched: a mirror in use forbids downloads).
"""

from __future__ import annotations

from pathlib import Path

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
