"""Speech made by the project: festival speaks text-corpus sentences with phone end times.

* :mod:`.phoneset`: festival's radio phone set, frame labels from phone segments and back.
* :mod:`.festival`: run festival in batch (WAV + ``utt.save.segs`` per sentence).
* :mod:`.dataset`: the versioned ``phones`` dataset in the cache
  (``attnlab data make phones --sentences N --seed S``).

Needs Debian's ``festival`` and ``festvox-kallpc16k`` only to *make* a dataset; reading one
does not.
"""

from attnlab.lab.speechgen.dataset import (
    GENERATOR_VERSION,
    corpus_sentences,
    dataset_version,
    find_phones,
    load_manifest,
    make_phones,
)
from attnlab.lab.speechgen.festival import (
    VOICE,
    FestivalUnavailable,
    Utterance,
    festival_version,
    read_segs,
    synthesize,
)
from attnlab.lab.speechgen.phoneset import (
    PHONES,
    Segment,
    frame_labels,
    frames_to_segments,
    num_frames,
)

__all__ = [
    "GENERATOR_VERSION",
    "PHONES",
    "VOICE",
    "FestivalUnavailable",
    "Segment",
    "Utterance",
    "corpus_sentences",
    "dataset_version",
    "festival_version",
    "find_phones",
    "frame_labels",
    "frames_to_segments",
    "load_manifest",
    "make_phones",
    "num_frames",
    "read_segs",
    "synthesize",
]
