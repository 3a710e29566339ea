"""A user's own recordings as a speech classification task's data (``--data.train=FOLDER``):
the options, the two layouts, and the splits a run keeps.

Two layouts, for ``--data.train``, ``--data.dev`` and ``--data.test`` alike:

* a folder with one sub-folder per class, holding that class's ``.wav`` / ``.flac`` files (the
  sub-folder's name is the label; other files are ignored, and so are hidden ones);
* a CSV file of ``path,label`` rows (a ``path,label`` header is optional; paths relative to the
  CSV's folder, or absolute).

A run keeps its splits as CSV files of absolute paths and labels in ``RUN/data/``
(:mod:`attnlab.lab.data.own`): ``eval``, ``predict --index`` and ``--resume`` read the
recordings those name, not ``--data.train`` again. The recordings themselves are not copied.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from attnlab.lab.audio import AUDIO_SUFFIXES, read_audio
from attnlab.lab.data.own import (
    SPLITS,
    FileSplits,
    as_options,
    check_labels,
    complete_splits,
    label_order,
    save_splits,
    saved_splits,
)
from attnlab.lab.tasks.speech.base import Utterance

__all__ = ["AudioDataOptions", "KeptSpeechData", "OwnRecordings", "Recording", "as_audio_options",
           "list_recordings", "render_recordings"]  # fmt: skip


@dataclass
class AudioDataOptions(FileSplits):
    """Your own recordings instead of the task's corpus (``--data.NAME`` for short).

    Args:
        train: a folder with one sub-folder of .wav / .flac files per class (its name is the
            label), or a CSV of path,label rows (paths relative to the CSV); none: the task's
            corpus.
        dev: the dev recordings, laid out as train (none: cut from train, see split).
        test: the test recordings, laid out as train (none: cut from train, see split).
        split: the fractions of the train recordings cut as dev and test when those are not
            given (seeded by seed; 0 cuts none); the cut splits are saved in the run.
        seed: seeds the cut of dev and test from train.
        sample_rate: the rate (Hz) every recording is resampled to (0: the task's, 8000 for
            fsdd, 16000 for audio-classify); stereo is averaged to mono.
    """

    sample_rate: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sample_rate < 0:
            raise ValueError(f"data.sample_rate: expected Hz > 0 (0: the task's), got "
                             f"{self.sample_rate}")  # fmt: skip


def as_audio_options(value: Any) -> AudioDataOptions:
    """``value`` (an :class:`AudioDataOptions` or a mapping of its fields) as one."""
    return as_options(AudioDataOptions, value)


class Recording(NamedTuple):
    """One labelled file of the user's: its absolute ``path``, its ``label`` (a string) and
    ``where`` it was named (the CSV's ``file:line``, or the path), for error messages."""

    path: str
    label: str
    where: str


def list_recordings(source: str, split: str = "train") -> list[Recording]:
    """The labelled recordings of a class folder or a ``path,label`` CSV (module docstring).

    Raises:
        FileNotFoundError: no such file or folder (naming the option).
        ValueError: one line naming the folder or the CSV's line: a folder without class
            folders, a class folder without recordings, a CSV row that is not ``path,label``
            or names no file.
    """
    path = Path(source)
    if path.is_dir():
        return _class_folders(path)
    if not path.is_file():
        raise FileNotFoundError(f"--data.{split}: no such file or folder {source}")
    return _csv_rows(path)


def _class_folders(root: Path) -> list[Recording]:
    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise ValueError(
            f"{root}: expected one sub-folder of recordings per class (its name is the label), "
            "found none; or give a CSV of path,label rows"
        )
    out = []
    for folder in classes:
        files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")
                       and p.suffix.lower() in AUDIO_SUFFIXES)  # fmt: skip
        if not files:
            raise ValueError(f"{folder}: the class folder {folder.name!r} holds no .wav or .flac "
                             "files")  # fmt: skip
        out += [Recording(str(f.resolve()), folder.name, str(f)) for f in files]
    return out


def _csv_rows(path: Path) -> list[Recording]:
    text = path.read_text(encoding="utf-8-sig")
    rows = list(csv.reader(io.StringIO(text)))
    out = []
    for line, row in enumerate(rows, start=1):
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if line == 1 and [c.strip().lower() for c in row] == ["path", "label"]:
            continue
        if len(row) != 2 or not row[0].strip() or not row[1].strip():
            raise ValueError(f"{path}:{line}: expected a path,label row, got {','.join(row)!r}")
        file = Path(row[0].strip())
        file = file if file.is_absolute() else path.parent / file
        if not file.is_file():
            raise ValueError(f"{path}:{line}: no such recording {file}")
        out.append(Recording(str(file.resolve()), row[1].strip(), f"{path}:{line}"))
    if not out:
        raise ValueError(f"{path}: no path,label rows (an empty file?)")
    return out


def render_recordings(rows: list[tuple[str, str]]) -> str:
    """``(path, label)`` rows as the CSV a run keeps (a ``path,label`` header)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["path", "label"])
    writer.writerows(rows)
    return buf.getvalue()


class KeptSpeechData:
    """What a speech task on the user's recordings keeps: the run's splits (``RUN/data/``, each
    rendered by :meth:`render_kept` as a ``kept_ext`` file) and its sample rate (in the task's
    state, beside the labels), for a :class:`~.base.SpeechTask` subclass."""

    kept_ext = ".csv"
    _saved: dict[str, Path] | None = None  # the splits the run kept (load_run_data)
    _kept: tuple[Any, dict[str, str]] | None = None  # (the data options, the splits' sources)

    def render_kept(self, split: list) -> str:
        """A split as the text of the file the run keeps."""
        raise NotImplementedError

    def load_run_data(self, run_dir: str | Path) -> None:
        """Read the splits from what the run ``run_dir`` kept of the user's files, if it did."""
        self._saved = saved_splits(run_dir)

    def save_run_data(self, run_dir: str | Path) -> None:
        """Keep the splits read from the user's recordings in ``run_dir/data/``."""
        if self._kept is not None:
            data, sources = self._kept
            save_splits(run_dir, self._splits, self.render_kept, self.kept_ext, sources, data)  # type: ignore[attr-defined]

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "sample_rate": self.sample_rate}  # type: ignore[misc]

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)  # type: ignore[misc]
        self.sample_rate = int(state.get("sample_rate", type(self).sample_rate))  # type: ignore[attr-defined]


class OwnRecordings(KeptSpeechData):
    """What a speech classification task (N -> 1, a :class:`~.base.SpeechTask`) adds to read
    the user's recordings: :meth:`own_splits` in its ``setup``, the run's kept splits (CSV of
    absolute paths and labels), the sample rate in its state. Labels are train's
    (:func:`~attnlab.lab.data.own.label_order`)."""

    def own_splits(self, data: AudioDataOptions) -> bool:
        """Read the user's recordings (or the run's kept splits) into the task's splits, if
        ``--data.train`` names some or the run kept some; False: use the task's corpus."""
        if self._saved is None and not data.train:
            return False
        self.sample_rate = data.sample_rate or type(self).sample_rate
        if self._saved is not None:
            entries = {s: list_recordings(str(p), s) for s, p in self._saved.items()}
        else:
            given = {s: getattr(data, s) for s in SPLITS if getattr(data, s)}
            read = {s: list_recordings(f, s) for s, f in given.items()}
            entries, sources, _ = complete_splits(read, given, data.split, data.seed)
            self._kept = (data, sources)
        if not self.labels:
            self.labels = label_order(r.label for r in entries["train"])
        for split in ("dev", "test"):
            check_labels(((r.label, r.where) for r in entries[split]), self.labels, split)
        index = {label: i for i, label in enumerate(self.labels)}
        self._splits = {
            split: [Utterance(read_audio(r.path, self.sample_rate), index[r.label], r.path)
                    for r in rows]
            for split, rows in entries.items()
        }  # fmt: skip
        return True

    def read_examples(self, path: str | Path) -> list[Utterance]:
        """``eval --data``: a class folder or ``path,label`` CSV, with the run's labels."""
        rows = list_recordings(str(path), "eval")
        check_labels(((r.label, r.where) for r in rows), self.labels, "eval")
        index = {label: i for i, label in enumerate(self.labels)}
        return [Utterance(read_audio(r.path, self.sample_rate), index[r.label], r.path)
                for r in rows]  # fmt: skip

    def render_kept(self, split: list[Utterance]) -> str:
        """Absolute paths and labels as CSV rows."""
        return render_recordings([(u.name, self.labels[u.label]) for u in split])
