"""What every task trained on a user's own files shares (``--data.train=...``): the seeded cut
of dev and test from train, the order of string labels, and the splits a run keeps.

A run that read the user's files keeps its three splits in its directory (``RUN/data/``:
``train``, ``dev`` and ``test`` in one format of the task, and ``splits.json`` saying where each
came from), so that ``eval``, ``predict --index`` and ``--resume`` read what the run trained on,
even after the original files have moved or changed. Each file is written atomically and
``splits.json`` last: a run directory holds all the splits, or none that is read.

The text tasks (``tasks/text/files.py``), speech (``tasks/speech/files.py``) and images
(``tasks/images/files.py``) build their ``--data.*`` options on it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

OptionsT = TypeVar("OptionsT")
logger = logging.getLogger(__name__)

__all__ = [
    "SAVED_DIR",
    "SPLITS",
    "as_options",
    "atomic_write",
    "check_labels",
    "check_split",
    "complete_splits",
    "cut_splits",
    "keep_unseen",
    "label_order",
    "save_splits",
    "saved_splits",
]

#: the folder of a run directory that keeps the splits read from the user's files
SAVED_DIR = "data"
_MANIFEST = "splits.json"
SPLITS = ("train", "dev", "test")


def check_split(split: Sequence[float]) -> None:
    """Refuse ``--data.split`` fractions that are not two in [0, 1) leaving some train."""
    if len(split) != 2 or not all(0.0 <= f < 1.0 for f in split):
        raise ValueError(
            f"data.split: two fractions in [0, 1), dev then test (e.g. 0.1,0.1), got {split}"
        )
    if sum(split) >= 1.0:
        raise ValueError(f"data.split: the dev and test fractions {split} leave no train")


@dataclasses.dataclass
class FileSplits:
    """What every task's ``data`` options (``--data.NAME``) begin with: the user's files and
    the seeded cut of the splits not given. A modality's options subclass it, adding how its
    files are read (their docstrings may say more of these fields).

    Args:
        train: the train file (or a directory of *train*, *dev*, *test* files).
        dev: the dev file; cut from train when not given.
        test: the test file; cut from train when not given.
        split: the fractions of train cut as dev and test when those are not given (0 cuts
            none).
        seed: seeds the cut of dev and test from train.
    """

    train: str = ""
    dev: str = ""
    test: str = ""
    split: tuple[float, float] = (0.1, 0.1)
    seed: int = 0

    def __post_init__(self) -> None:
        check_split(self.split)


def as_options(cls: type[OptionsT], value: Any) -> OptionsT:
    """``value`` (a ``cls``, the dataclass of a task's ``data`` options, or a mapping of its
    fields: a list ``split`` becomes a tuple) as ``cls``.

    Raises:
        ValueError: a mapping naming an option ``cls`` does not have (listing the valid ones).
    """
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        valid = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(value) - valid)
        if unknown:
            raise ValueError(f"unknown data option(s) {unknown}; valid: {', '.join(sorted(valid))}")
        value = dict(value)
        if "split" in value:
            value["split"] = tuple(value["split"])
        return cls(**value)
    raise TypeError(f"expected data options, got {type(value).__name__}")


def complete_splits(
    read: Mapping[str, list], files: Mapping[str, str], split: Sequence[float], seed: int
) -> tuple[dict[str, list], dict[str, str], list[str]]:
    """The three splits from those ``read`` from the user's ``files`` (``{split: path}``, train
    at least): dev and test that were not given are cut from train (:func:`cut_splits`).

    Returns:
        ``(splits, sources, cut)``: the splits, where each came from (a file, or ``cut from
        TRAIN (--data.split=..., --data.seed=...)``, for ``splits.json``) and the names of the
        splits cut.
    """
    cut = [s for s in ("dev", "test") if s not in read]
    splits = cut_splits(read["train"], split, seed, cut, files["train"])
    splits.update({s: read[s] for s in ("dev", "test") if s in read})
    seeded = f"(--data.split={split[0]},{split[1]}, --data.seed={seed})"
    sources = {s: files.get(s) or f"cut from {files['train']} {seeded}" for s in SPLITS}
    return splits, sources, cut


def check_labels(rows: Iterable[tuple[str, str]], labels: Sequence[str], split: str) -> None:
    """Refuse a ``(label, where)`` of a dev or test split whose label is not one of ``labels``
    (train's), in one line naming ``where`` (a file, or ``FILE:LINE``).

    Raises:
        ValueError: the first such label.
    """
    known = set(labels)
    for label, where in rows:
        if label not in known:
            raise ValueError(
                f"{where}: label {label!r} of the {split} split is not one of the labels of "
                f"the train data ({', '.join(labels)})"
            )


def cut_splits(
    examples: Sequence, split: Sequence[float], seed: int, cut: Sequence[str], where: str
) -> dict[str, list]:
    """``{"train": ..., "dev": ..., "test": ...}``: the splits named in ``cut`` drawn from
    ``examples`` (a seeded shuffle, ``split`` = the dev and test fractions, at least one example
    each for a fraction above 0), the rest train in file order.

    Raises:
        ValueError: too few examples to leave one for training (naming ``where``).
    """
    sizes = {}
    for name, fraction in zip(("dev", "test"), split):
        n = round(fraction * len(examples)) if name in cut else 0
        sizes[name] = max(n, 1) if fraction > 0 and name in cut else n
    if sum(sizes.values()) >= len(examples):
        raise ValueError(
            f"{where}: {len(examples)} examples are too few to cut dev and test fractions "
            f"{split[0]},{split[1]} from and train on the rest; give --data.dev/--data.test "
            "or a smaller --data.split"
        )
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    dev = order[: sizes["dev"]]
    test = order[sizes["dev"] : sizes["dev"] + sizes["test"]]
    train = sorted(order[sizes["dev"] + sizes["test"] :])
    return {"train": [examples[i] for i in train], "dev": [examples[i] for i in sorted(dev)],
            "test": [examples[i] for i in sorted(test)]}  # fmt: skip


def keep_unseen(labels: Sequence[str], others: Iterable[str], what: str = "label") -> list[str]:
    """``labels`` (train's) followed by the distinct ``others`` (of the dev and test files) that
    train lacks (``--data.unseen=keep``), with a warning naming them: classes the model never
    trains on, so that the examples that carry them count as errors, as a fixed tag set scores
    them."""
    known = set(labels)
    new = sorted(set(others) - known)
    if new:
        logger.warning(
            "data.unseen=keep: %s(s) %s of the dev/test files are not in the train file; kept as "
            "classes the model never trains on (their examples count as errors)",
            what, ", ".join(map(repr, new)),
        )  # fmt: skip
    return [*labels, *new]


def label_order(labels: Iterable[str]) -> list[str]:
    """The distinct ``labels`` sorted: numerically when every one is a number (``2`` before
    ``10``), else as strings. A generic task's class ``i`` is the ``i``-th."""
    distinct = set(labels)
    numeric = all(_is_number(label) for label in distinct)
    return sorted(distinct, key=float) if numeric else sorted(distinct)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def save_splits(
    run_dir: str | Path,
    splits: Mapping[str, list],
    write: Callable[[list], str | bytes],
    ext: str,
    sources: Mapping[str, str],
    data: Any,
) -> Path:
    """Write the splits into ``run_dir/data/`` (``write`` renders a split as the file's text or
    bytes), each file atomically, then ``splits.json`` naming them, their sizes, their
    ``sources`` and the ``data`` options (a dataclass or a mapping)."""
    folder = Path(run_dir) / SAVED_DIR
    folder.mkdir(parents=True, exist_ok=True)
    names = {split: f"{split}{ext}" for split in SPLITS}
    for split in SPLITS:
        atomic_write(folder / names[split], write(list(splits.get(split) or [])))
    options = dataclasses.asdict(data) if dataclasses.is_dataclass(data) else dict(data)
    manifest = {"files": names, "examples": {s: len(splits.get(s) or []) for s in SPLITS},
                "sources": dict(sources), "options": options}  # fmt: skip
    atomic_write(folder / _MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return folder


def saved_splits(run_dir: str | Path) -> dict[str, Path] | None:
    """``{split: file}`` of the splits a run saved (:func:`save_splits`), or None."""
    folder = Path(run_dir) / SAVED_DIR
    try:
        manifest = json.loads((folder / _MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {split: folder / name for split, name in manifest["files"].items()}


def atomic_write(path: Path, content: str | bytes) -> None:
    """Write ``content`` (text as UTF-8) to ``path`` through a temporary file and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content.encode("utf-8") if isinstance(content, str) else content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
