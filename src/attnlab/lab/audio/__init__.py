"""Speech as a set of vectors: WAV reading, log-mel / MFCC features in torch, SpecAugment,
Conv2d x4 subsampling and the streaming front end.

A second of speech becomes 100 vectors (25 ms windows every 10 ms)::

    from attnlab.lab.audio import LogMel, normalize_utterance, read_wav

    x = read_wav("7_jackson_32.wav", sample_rate=8000)   # (samples,) float32 in [-1, 1]
    feats = LogMel(sample_rate=8000, n_mels=40)(x)        # (1, frames, 40)
    feats = normalize_utterance(feats)

The tasks built on this front end are in :mod:`attnlab.lab.tasks.speech`.
"""

from attnlab.lab.audio.augment import SpecAugment
from attnlab.lab.audio.features import LogMel, mel_filterbank, normalize_utterance, num_frames
from attnlab.lab.audio.read import AUDIO_SUFFIXES, read_audio
from attnlab.lab.audio.streaming import StreamingLogMel, StreamingSubsampler
from attnlab.lab.audio.subsample import Conv2dSubsampling, subsampled_lengths
from attnlab.lab.audio.wav import read_wav, resample, write_wav

__all__ = [
    "AUDIO_SUFFIXES",
    "Conv2dSubsampling",
    "LogMel",
    "SpecAugment",
    "StreamingLogMel",
    "StreamingSubsampler",
    "mel_filterbank",
    "normalize_utterance",
    "num_frames",
    "read_audio",
    "read_wav",
    "resample",
    "subsampled_lengths",
    "write_wav",
]
