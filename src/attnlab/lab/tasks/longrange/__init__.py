"""Long-sequence tasks: ``listops`` (Long Range Arena), ``recall`` (associative recall over a
distance) and ``positions`` (the token ``k`` places before a marker, for length extrapolation).

One concept per file: :mod:`.listops` (the seeded LRA generator and its cache),
:mod:`.listops_parse` (an independent evaluator), :mod:`.synthetic` (recall and positions
generators), :mod:`.task` (the tasks on :class:`~attnlab.lab.tasks.text.sentences.SentenceTask`).
"""

from attnlab.lab.tasks.longrange.listops import ListOpsSpec, load_listops, make_listops
from attnlab.lab.tasks.longrange.listops_parse import evaluate_listops
from attnlab.lab.tasks.longrange.synthetic import make_positions, make_recall
from attnlab.lab.tasks.longrange.task import ListOpsTask, LongRangeTask, PositionsTask, RecallTask

__all__ = [
    "ListOpsSpec",
    "ListOpsTask",
    "LongRangeTask",
    "PositionsTask",
    "RecallTask",
    "evaluate_listops",
    "load_listops",
    "make_listops",
    "make_positions",
    "make_recall",
]
