"""Sequence-to-sequence tasks (N -> M): the model writes an output of its own length.

``g2p``: grapheme-to-phoneme conversion on the CMU Pronouncing Dictionary (:mod:`.task`), with
its data (:mod:`.data`) and metrics (:mod:`.metrics`).
"""

from attnlab.lab.tasks.seq2seq.data import G2PExample, split_lexicon
from attnlab.lab.tasks.seq2seq.metrics import G2PScore, best_reference, edit_distance
from attnlab.lab.tasks.seq2seq.task import MAX_OUTPUT, G2POptions, G2PTask

__all__ = [
    "MAX_OUTPUT",
    "G2PExample",
    "G2POptions",
    "G2PScore",
    "G2PTask",
    "best_reference",
    "edit_distance",
    "split_lexicon",
]
