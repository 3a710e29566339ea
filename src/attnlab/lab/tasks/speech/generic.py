"""``audio-classify``: one label per recording of your own (N -> 1), no code:
``attnlab train audio-classify --data.train=my_recordings/``.

The ``fsdd`` task's model and recipe (log-mel frames, Conv2d x4, a Transformer, pooled) on
recordings at ``--data.sample_rate`` (16 kHz by default); the labels are the class folders' names
(or the CSV's labels) of train, kept in the run's checkpoint with the sample rate, and the splits
as CSV files in ``RUN/data/`` (:mod:`.files`), so ``eval``, ``predict`` and ``show`` need the run
alone (and the recordings its kept splits name, for ``eval`` and ``--index``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attnlab.lab.tasks.base import options_as
from attnlab.lab.tasks.speech.files import AudioDataOptions, as_audio_options
from attnlab.lab.tasks.speech.fsdd import FsddTask

__all__ = ["AudioClassifyOptions", "AudioClassifyTask"]


@dataclass
class AudioClassifyOptions:
    """Options of the ``audio-classify`` task (one label per recording of your own).

    Args:
        data: your recordings: a folder with one sub-folder of .wav / .flac files per class,
            or a CSV of path,label rows.
    """

    data: AudioDataOptions = field(default_factory=AudioDataOptions)


class AudioClassifyTask(FsddTask):
    """One label per recording of your own (N -> 1), accuracy."""

    name = "audio-classify"
    sample_rate = 16000

    @classmethod
    def default_options(cls) -> AudioClassifyOptions:
        return AudioClassifyOptions()

    def setup(self, options: AudioClassifyOptions) -> None:
        data = as_audio_options(options_as(AudioClassifyOptions, options).data)
        if not self.own_splits(data):
            raise ValueError(
                f"task {self.name!r} trains on your own recordings: give --data.train=FOLDER "
                f"(one sub-folder of .wav / .flac files per class) or =FILE.csv (path,label "
                f"rows), e.g. attnlab train {self.name} --data.train=my_recordings/; dev and "
                "test are cut from it unless --data.dev / --data.test name them"
            )
