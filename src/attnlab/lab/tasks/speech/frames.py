"""``audio-frames``: a label per 10 ms frame of your own recordings (N -> N), no code:
``attnlab train audio-frames --data.train=my_aligned/``.

The ``phones`` task's model and metric (frame accuracy) on recordings with time alignments: a
folder holding ``NAME.wav`` (or ``.flac``) beside ``NAME.TextGrid`` (Praat, an interval tier) or
``NAME.lab`` (HTK), searched recursively. A frame takes the label of the segment holding its
centre; an empty interval or a gap is ``--data.empty_label``. The labels are train's, kept in the
checkpoint with the sample rate; the splits (the recordings' absolute paths and their segments)
in ``RUN/data/*.jsonl``, so the alignments are not read again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from attnlab.lab.audio import AUDIO_SUFFIXES, read_audio
from attnlab.lab.audio.alignments import ALIGNMENT_SUFFIXES, read_alignment
from attnlab.lab.data.own import (
    SPLITS,
    FileSplits,
    as_options,
    check_labels,
    complete_splits,
    label_order,
)
from attnlab.lab.speechgen import Segment
from attnlab.lab.tasks.base import options_as
from attnlab.lab.tasks.speech.files import KeptSpeechData
from attnlab.lab.tasks.speech.phones import PhonesTask, PhoneUtterance

__all__ = ["AudioFramesOptions", "AudioFramesTask", "FramesDataOptions", "aligned_recordings"]


@dataclass
class FramesDataOptions(FileSplits):
    """Your own aligned recordings (``--data.NAME`` for short).

    Args:
        train: a folder of NAME.wav / NAME.flac files, each beside NAME.TextGrid or NAME.lab
            (searched recursively).
        dev: the dev recordings, laid out as train (none: cut from train, see split).
        test: the test recordings, laid out as train (none: cut from train, see split).
        split: the fractions of the train recordings cut as dev and test when those are not
            given (seeded by seed; 0 cuts none); the cut splits are saved in the run.
        seed: seeds the cut of dev and test from train.
        sample_rate: the rate (Hz) every recording is resampled to (0: 16000).
        tier: the TextGrid interval tier holding the labels (none: the first interval tier).
        empty_label: the label of an empty interval and of a gap between labelled segments.
    """

    sample_rate: int = 0
    tier: str = ""
    empty_label: str = "sil"


@dataclass
class AudioFramesOptions:
    """Options of the ``audio-frames`` task (a label per frame of your own recordings).

    Args:
        data: your recordings and their alignments (TextGrid or HTK .lab).
    """

    data: FramesDataOptions = field(default_factory=FramesDataOptions)


def aligned_recordings(
    folder: str, data: FramesDataOptions, split: str = "train"
) -> list[tuple[PhoneUtterance, str]]:
    """``(utterance, alignment file)`` of every recording under ``folder`` (sorted by path).

    Raises:
        FileNotFoundError: no such folder (naming the option).
        ValueError: naming the file: no recordings, a recording without an alignment, an
            unreadable recording or alignment.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"--data.{split}: no such folder {folder} (expected a folder "
                                "of recordings beside their .TextGrid or .lab files)")  # fmt: skip
    wavs = sorted(p for p in root.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES)
    if not wavs:
        raise ValueError(f"{root}: no .wav or .flac recordings in the folder")
    rate = data.sample_rate or AudioFramesTask.sample_rate
    out = []
    for wav in wavs:
        found = sorted(p for p in wav.parent.glob(f"{wav.stem}.*") if p.suffix.lower()
                       in ALIGNMENT_SUFFIXES)  # fmt: skip
        if len(found) > 1:
            raise ValueError(f"{wav}: {len(found)} alignments beside it "
                             f"({', '.join(p.name for p in found)}); keep one")  # fmt: skip
        if not found:
            raise ValueError(f"{wav}: no alignment beside it (expected {wav.stem}.TextGrid or "
                             f"{wav.stem}.lab)")  # fmt: skip
        spans = read_alignment(found[0], tier=data.tier, empty=data.empty_label)
        samples = len(read_audio(wav, rate))
        segments = tuple(Segment(label, start, end) for label, start, end in spans)
        out.append((PhoneUtterance(str(wav.resolve()), segments, samples), str(found[0])))
    return out


class AudioFramesTask(KeptSpeechData, PhonesTask):
    """A label per frame of your own aligned recordings (N -> N), frame accuracy."""

    name = "audio-frames"
    sample_rate = 16000
    kept_ext = ".jsonl"

    def __init__(self) -> None:
        super().__init__()
        self.labels = []

    @classmethod
    def default_options(cls) -> AudioFramesOptions:
        return AudioFramesOptions()

    def setup(self, options: AudioFramesOptions) -> None:
        data = as_options(FramesDataOptions, options_as(AudioFramesOptions, options).data)
        if self._saved is None and not data.train:
            raise ValueError(
                f"task {self.name!r} trains on your own aligned recordings: give "
                "--data.train=FOLDER (NAME.wav beside NAME.TextGrid or NAME.lab), e.g. attnlab "
                f"train {self.name} --data.train=my_aligned/"
            )
        self.sample_rate = data.sample_rate or type(self).sample_rate
        if self._saved is not None:
            read = {s: [(u, str(p)) for u in _read_kept(p)] for s, p in self._saved.items()}
        else:
            given = {s: getattr(data, s) for s in SPLITS if getattr(data, s)}
            read = {s: aligned_recordings(f, data, s) for s, f in given.items()}
            read, sources, _ = complete_splits(read, given, data.split, data.seed)
            self._kept = (data, sources)
        if not self.labels:
            self.labels = label_order(s.phone for u, _ in read["train"] for s in u.segments)
        for split in ("dev", "test"):
            check_labels(((s.phone, where) for u, where in read[split] for s in u.segments),
                         self.labels, split)  # fmt: skip
        self._splits = {s: [u for u, _ in rows] for s, rows in read.items()}

    def render_kept(self, split: list[PhoneUtterance]) -> str:
        """Each recording's absolute path, sample count and segments as a JSON line."""
        return "".join(json.dumps({"wav": u.wav, "samples": u.samples,
                                   "segments": [list(s) for s in u.segments]}) + "\n"
                       for u in split)  # fmt: skip


def _read_kept(path: Path) -> list[PhoneUtterance]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        segments = tuple(Segment(str(p), float(a), float(b)) for p, a, b in row["segments"])
        out.append(PhoneUtterance(row["wav"], segments, int(row["samples"])))
    return out
