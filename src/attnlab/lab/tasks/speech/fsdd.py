"""``fsdd``: spoken digits (N -> 1) on the Free Spoken Digit Dataset.

3,000 recordings at 8 kHz, ``{digit}_{speaker}_{take}.wav``: 6 speakers x 10 digits x 50
takes. Splits:

* ``default`` (speaker-dependent, the dataset's own): takes 0-4 of every speaker and digit are
  the test set (300); a seeded ``dev_fraction`` of the other takes is held out as dev.
* ``speaker:NAME`` (leave one speaker out, speaker-independent): every recording of ``NAME``
  is the test set (500); dev is held out from the other speakers. Much harder: six voices do
  not cover a seventh.

``--data.train=FOLDER`` (one sub-folder of recordings per class) or ``=FILE.csv`` (path,label
rows) trains the same model on one's own recordings instead (:mod:`.files`); ``audio-classify``
(:mod:`.generic`) is that task without a corpus of its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from attnlab.lab.audio import read_wav
from attnlab.lab.data.registry import dataset_path, get_dataset
from attnlab.lab.models import TransformerEncoderConfig
from attnlab.lab.tasks.base import options_as
from attnlab.lab.tasks.speech.base import SpeechTask, Utterance
from attnlab.lab.tasks.speech.files import AudioDataOptions, OwnRecordings, as_audio_options
from attnlab.lab.tasks.speech.model import FrontendConfig, SpeechModelConfig

__all__ = ["FsddTask", "FsddOptions", "SPEAKERS"]

SPEAKERS = ("george", "jackson", "lucas", "nicolas", "theo", "yweweler")
DIGITS = tuple(str(d) for d in range(10))


@dataclass
class FsddOptions:
    """Options of the ``fsdd`` task.

    Args:
        split: ``default`` (takes 0-4 are test) or ``speaker:NAME`` (``NAME``'s recordings are
            test; one of george, jackson, lucas, nicolas, theo, yweweler).
        dev_fraction: share of the training recordings held out as dev (seeded).
        seed: seed of the dev hold-out and of ``limit``'s sample.
        limit: > 0 keeps at most this many recordings per split (a seeded sample; for quick
            runs and tests).
        data: your own recordings instead of FSDD: a folder of class folders of .wav / .flac
            files, or a CSV of path,label rows (split, dev_fraction and limit then do not
            apply).
    """

    split: str = "default"
    dev_fraction: float = 0.1
    seed: int = 0
    limit: int = 0
    data: AudioDataOptions = field(default_factory=AudioDataOptions)


def _parse(stem: str) -> tuple[int, str, int]:
    digit, speaker, take = stem.split("_")
    return int(digit), speaker, int(take)


class FsddTask(OwnRecordings, SpeechTask):
    """Which digit (0-9) is spoken: attention over log-mel frames (Conv2d x4), pooled."""

    sample_rate = 8000
    output = "sequence"

    @classmethod
    def default_options(cls) -> FsddOptions:
        return FsddOptions()

    @classmethod
    def default_train_options(cls) -> dict[str, Any]:
        """40 epochs at lr 3e-3, as BENCHMARKS.md's fsdd table (97.4% over 3 seeds, with random
        batches of 32; 20 epochs stopped at 96.1%), in batches of 64 recordings of similar
        lengths (sorted within pools of 8 batches: recordings last 0.14 to 2.3 s, so a random
        batch was mostly padding): 1.6x the training throughput of random batches of 32 at the
        same best dev accuracy over two seeds (97.41%; BENCHMARKS.md, "Training speed").
        ``--train.*`` overrides."""
        return {"epochs": 40, "lr": 3e-3, "batch_size": 64, "bucket": 8}

    @classmethod
    def default_model_config(cls) -> SpeechModelConfig:
        # 8 kHz audio: a 200-point FFT has 101 bins, so 40 mel bins (80 would leave some empty).
        return SpeechModelConfig(
            # Conv2d x4: 40 ms frames, 4x shorter sequences (``subsample=none`` keeps 10 ms).
            frontend=FrontendConfig(n_mels=40, freq_width=6, time_width=8, subsample="conv2d"),
            dim=96,
            encoder=TransformerEncoderConfig(
                heads=4, ff_hidden=192, positional="rotary", dropout=0.1
            ),  # fmt: skip
        )

    def split_names(self, opts: FsddOptions) -> dict[str, list[str]]:
        """The file stems of each split (no file is read)."""
        stems = sorted(get_dataset("fsdd").files)
        if opts.split == "default":
            test = [s for s in stems if _parse(s)[2] < 5]
        elif opts.split.startswith("speaker:"):
            name = opts.split.partition(":")[2]
            if name not in SPEAKERS:
                raise ValueError(
                    f"task_options.split: unknown speaker {name!r}; expected speaker:NAME with "
                    f"NAME one of {', '.join(SPEAKERS)}"
                )
            test = [s for s in stems if _parse(s)[1] == name]
        else:
            raise ValueError(
                f"task_options.split: expected 'default' or 'speaker:NAME', got {opts.split!r}"
            )
        if not 0.0 <= opts.dev_fraction < 1.0:
            raise ValueError(
                f"task_options.dev_fraction: expected in [0, 1), got {opts.dev_fraction}"
            )
        held = set(test)
        train = [s for s in stems if s not in held]
        rng = random.Random(opts.seed)
        rng.shuffle(train)
        n_dev = round(len(train) * opts.dev_fraction)
        names = {"train": sorted(train[n_dev:]), "dev": sorted(train[:n_dev]), "test": test}
        if opts.limit:
            if opts.limit < 0:
                raise ValueError(f"task_options.limit: expected >= 0, got {opts.limit}")
            names = {k: sorted(random.Random(opts.seed).sample(v, min(opts.limit, len(v))))
                     for k, v in names.items()}  # fmt: skip
        return names

    def setup(self, options: FsddOptions) -> None:
        opts = options_as(FsddOptions, options)
        if self.own_splits(as_audio_options(opts.data)):
            return
        if not self.labels:
            self.labels = list(DIGITS)
        self._splits = {
            split: [
                Utterance(read_wav(dataset_path("fsdd", s), self.sample_rate), _parse(s)[0], s)
                for s in stems
            ]
            for split, stems in self.split_names(opts).items()
        }
