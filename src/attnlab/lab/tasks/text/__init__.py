"""Text tasks on real corpora: part-of-speech tagging (N -> N, :mod:`.tagging`) and sentence
classification (N -> 1, :mod:`.sentences`). Both share vocabularies (words, characters) and the
model family of :mod:`attnlab.lab.models` (:mod:`.base`); they differ in the head, the labels and
the unit of the loss.

Both read their corpus from the dataset registry (:mod:`attnlab.lab.data`) or, with
``train_file`` (and optionally ``dev_file``, ``test_file``) in their options, from local files
in any format :func:`attnlab.lab.data.readers.sniff_text_format` recognises.
"""

from attnlab.lab.tasks.text.sentences import (
    SentenceOptions,
    SentenceTask,
    SST2Task,
    SST5Task,
    TRECTask,
)
from attnlab.lab.tasks.text.tagging import PosTask, TaggingOptions

__all__ = [
    "PosTask",
    "SentenceTask",
    "SST2Task",
    "SST5Task",
    "TRECTask",
    "TaggingOptions",
    "SentenceOptions",
]
