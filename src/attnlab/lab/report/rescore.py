"""A trained model scored again under other test conditions: claim 7's longer sequences and
claim 15's beam search.

The report trains one model per variant and seed; where a claim compares test conditions rather
than trainings (the same model at ``L``, ``2L`` and ``4L``; the same model decoded greedily and
with a beam), the run's best checkpoint is evaluated again after training, as ``attnlab eval``
evaluates (the run's batch size and precision). The scores are stored with the job's result under
``dev_at`` / ``test_at`` (a name per condition), and claims read them with
``scores_of(rs, "test@NAME")`` (:func:`~attnlab.lab.report.claim.scores_of`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

__all__ = ["BEAM", "FACTORS", "beam_scores", "scores_at_lengths"]

#: claim 7's test lengths besides ``L``, as multiples of it
FACTORS = (2, 4)
#: claim 15's beam width
BEAM = 5


def scores_at_lengths(run: str | Path) -> dict[str, dict[str, float | str]]:
    """``{"2L": metrics, "4L": metrics}`` of the ``positions`` run ``run`` (its best
    checkpoint), each on the run's test split drawn at that length with the run's seed
    (``"error"`` with the reason where the model cannot read it, e.g. learned positions past
    their table)."""
    from attnlab.lab.commands import evaluate_examples
    from attnlab.lab.tasks.base import options_as
    from attnlab.lab.tasks.longrange.task import PositionsOptions, PositionsTask
    from attnlab.lab.train.checkpoint import load_for_inference

    task, model, cfg = load_for_inference(str(run))
    options = options_as(PositionsOptions, cfg.task_options)
    out: dict[str, dict[str, float | str]] = {}
    for factor in FACTORS:
        examples = PositionsTask.test_at(options, factor * options.length)
        try:
            out[f"{factor}L"] = evaluate_examples(task, model, cfg, examples)
        except ValueError as error:  # e.g. a learned table shorter than the length
            out[f"{factor}L"] = {"error": str(error).splitlines()[0]}
    return out


def beam_scores(
    path: str | Path, beam: int = BEAM, splits: tuple[str, ...] = ("dev", "test")
) -> dict[str, dict[str, float]]:
    """``{split: metrics}`` of the seq2seq model at ``path`` (a run directory, its best
    checkpoint, or a ``.pt`` file such as an average of snapshots) on each of ``splits``,
    decoded with beam search of width ``beam`` (1: greedy) instead of the run's own decoding,
    as ``attnlab eval`` evaluates (the run's batch size and precision)."""
    from attnlab.lab.commands import evaluate_examples
    from attnlab.lab.train.checkpoint import load_for_inference

    task, model, cfg = load_for_inference(str(path), setup=True)
    task.options = replace(task.options, eval_beam=beam)
    examples = task.splits()
    return {split: evaluate_examples(task, model, cfg, examples[split]) for split in splits}
