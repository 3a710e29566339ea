"""Claim 7's measure: one trained ``positions`` model tested at ``2L`` and ``4L`` too.

A run of the ``positions`` task trains and chooses its checkpoint at ``L`` tokens (its test
split is at ``L`` as well); here its best checkpoint is tested again on test splits of ``2L``
and ``4L`` tokens, drawn with the run's own seed. One training per encoding and seed instead
of one per test length: the three lengths are scored on the same model.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["FACTORS", "scores_at_lengths"]

#: the test lengths besides ``L``, as multiples of it
FACTORS = (2, 4)


def scores_at_lengths(run: str | Path) -> dict[str, dict[str, float | str]]:
    """``{"2L": metrics, "4L": metrics}`` of the ``positions`` run ``run`` (its best
    checkpoint), each on the run's test split drawn at that length (``"error"`` with the reason
    where the model cannot read it, e.g. learned positions past their table)."""
    from attnlab.lab.commands import evaluate_examples
    from attnlab.lab.tasks.base import options_as
    from attnlab.lab.tasks.longrange.task import PositionsOptions, PositionsTask
    from attnlab.lab.train.checkpoint import load_for_inference

    task, model, cfg = load_for_inference(str(run))
    options = options_as(PositionsOptions, cfg.task_options)
    out: dict[str, dict[str, float | str]] = {}
    for factor in FACTORS:
        length = factor * options.length
        examples = PositionsTask.test_at(options, length)
        try:
            out[f"{factor}L"] = evaluate_examples(task, model, cfg, examples)
        except ValueError as error:  # e.g. a learned table shorter than the length
            out[f"{factor}L"] = {"error": str(error).splitlines()[0]}
    return out
