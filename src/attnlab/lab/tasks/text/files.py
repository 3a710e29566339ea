"""A user's own files as a text task's data (``--data.train=FILE``): the options, the files of a
directory, the seeded cut of dev and test from train, and the splits a run keeps.

A run that read the user's files keeps its three splits in its directory (``RUN/data/``:
``train``, ``dev`` and ``test`` in one format of the task, and ``splits.json`` saying where each
came from), so that ``eval``, ``predict --index`` and ``--resume`` read what the run trained on,
even after the original files have moved or changed. The cut and the kept splits are shared with
the other modalities' own data (:mod:`attnlab.lab.data.own`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from attnlab.lab.data.own import (
    SAVED_DIR,
    SPLITS,
    FileSplits,
    as_options,
    cut_splits,
    save_splits,
    saved_splits,
)

__all__ = [
    "DataOptions",
    "SAVED_DIR",
    "as_data_options",
    "data_files",
    "cut_splits",
    "save_splits",
    "saved_splits",
]


@dataclass
class DataOptions(FileSplits):
    """Your own files instead of the task's corpus (``--data.NAME`` for short).

    Args:
        train: the training file, or a directory holding files named ``*train*``, ``*dev*``
            and ``*test*`` (none: the task's corpus).
        dev: the dev file (none: cut from train, see split).
        test: the test file (none: cut from train, see split).
        split: the fractions of the train file cut as dev and test when those files are not
            given (seeded by seed; 0 cuts none); the cut splits are saved in the run.
        seed: seeds the cut of dev and test from train.
        format: auto (from the extension, else from the first lines), or for tagging conllu,
            tsv (word TAB tag), slash (word/TAG), columns (word TAG); for classification csv,
            tsv, jsonl, sentences (label sentence).
        column: the CoNLL-U column of the tags: upos or xpos.
        text_column: CSV / TSV / JSON lines: the column (key) of the sentence, split on spaces.
        label_column: CSV / TSV / JSON lines: the column (key) of the label (any string).
        unseen: a tag or label of the dev or test file that the train file lacks: error (naming
            its line), or keep: a class the model never trains on, so that its words or
            sentences count as errors (as the corpus tasks' fixed tag sets score them; a UD
            treebank's dev may hold a tag its train lacks).
    """

    format: str = "auto"
    column: str = "upos"
    text_column: str = "text"
    label_column: str = "label"
    unseen: str = "error"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.unseen not in ("error", "keep"):
            raise ValueError(f"data.unseen: error or keep, got {self.unseen!r}")
        if self.column not in ("upos", "xpos"):
            raise ValueError(f"data.column: upos or xpos, got {self.column!r}")

    def reading(self) -> dict[str, str]:
        """How a file of this run is read (kept in the task's state for ``eval --data``)."""
        return {"column": self.column, "text_column": self.text_column,
                "label_column": self.label_column}  # fmt: skip


def as_data_options(value: Any) -> DataOptions:
    """``value`` (a :class:`DataOptions` or a mapping of its fields) as :class:`DataOptions`."""
    return as_options(DataOptions, value)


def data_files(data: DataOptions) -> dict[str, str]:
    """``{split: file}`` of the given files, a directory's ``train`` resolved into its files.

    Raises:
        FileNotFoundError: a file or directory that does not exist (naming the option).
        ValueError: a directory without exactly one train file, or with several dev / test files.
    """
    files = {s: getattr(data, s) for s in SPLITS if getattr(data, s)}
    if os.path.isdir(data.train):
        found = _directory_files(data.train)
        files = {**found, **{s: p for s, p in files.items() if s != "train"}}
    for split, path in files.items():
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--data.{split}: no such file {path}")
    return files


def _directory_files(folder: str) -> dict[str, str]:
    names = sorted(n for n in os.listdir(folder) if not n.startswith(".")
                   and os.path.isfile(os.path.join(folder, n)))  # fmt: skip
    out: dict[str, str] = {}
    for split in SPLITS:
        matches = [n for n in names if split in n.lower()]
        if len(matches) > 1:
            raise ValueError(
                f"--data.train={folder}: a directory needs one file per split; {split!r} names "
                f"{len(matches)}: {', '.join(matches)}"
            )
        if matches:
            out[split] = os.path.join(folder, matches[0])
    if "train" not in out:
        raise ValueError(
            f"--data.train={folder}: no file named *train* in the directory (it holds "
            f"{', '.join(names) or 'no files'}); name the files or pass --data.train=FILE"
        )
    return out
