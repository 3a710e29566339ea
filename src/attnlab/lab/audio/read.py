"""Any recording the lab reads: WAV by hand (:func:`~.wav.read_wav`), FLAC through the optional
``soundfile`` package (libsndfile; not a dependency of attnlab: where it is missing, a FLAC file
is refused naming the package and the conversion to WAV).

Both become mono float32 at the asked sample rate, with the same checks of length and rate.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from torch import Tensor

from attnlab.lab.audio.wav import at_rate, read_wav

__all__ = ["AUDIO_SUFFIXES", "read_audio"]

#: the file name endings read as recordings (lower case)
AUDIO_SUFFIXES = (".wav", ".flac")


def read_audio(
    path: str | os.PathLike[str], sample_rate: int = 16000, *, min_seconds: float = 0.025,
    min_rate: int | None = None,
) -> Tensor:  # fmt: skip
    """A WAV or FLAC file as mono float32 samples at ``sample_rate`` (stereo averaged, another
    rate resampled; the arguments are :func:`~.wav.read_wav`'s).

    Raises:
        ValueError: naming the file: not a readable recording, too short, recorded too far
            below ``sample_rate``, or a FLAC file without the ``soundfile`` package.
        FileNotFoundError: no such file.
    """
    if Path(path).suffix.lower() != ".flac":
        return read_wav(path, sample_rate, min_seconds=min_seconds, min_rate=min_rate)
    name = str(path)
    if not Path(path).is_file():
        raise FileNotFoundError(f"{name}: no such file")
    try:
        import soundfile
    except ImportError:
        raise ValueError(
            f"{name}: reading FLAC needs the soundfile package (pip install soundfile), which "
            "attnlab does not install; or convert the file to WAV (ffmpeg -i in.flac out.wav)"
        ) from None
    try:
        data, rate = soundfile.read(name, dtype="float64", always_2d=True)
    except (RuntimeError, ValueError) as err:  # LibsndfileError is a RuntimeError
        raise ValueError(f"{name}: not a readable FLAC file ({err})") from None
    if data.shape[0] == 0:
        raise ValueError(f"{name}: the FLAC file holds no samples")
    min_rate = sample_rate // 2 if min_rate is None else min_rate
    mono = np.ascontiguousarray(data.mean(axis=1))
    return at_rate(mono, int(rate), name, sample_rate, min_seconds, min_rate)
