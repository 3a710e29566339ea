"""Model selection and early stopping on dev for the node-classification tasks.

Three rules, ``GraphOptions.select`` (``--task_options.select``):

``acc``
    The best dev accuracy, ties to the lower dev loss; patience counts evaluations without a
    new best (the trainer's usual rule on :meth:`NodeTask.score`).
``loss``
    The lowest dev loss; patience counts evaluations without a new lowest loss.
``acc+loss``
    GAT's rule (Velickovic et al. 2018, ``execute_cora.py`` of PetarV-/GAT). Let ``A`` be the
    highest dev accuracy and ``L`` the lowest dev loss of the *earlier* evaluations. An
    evaluation with accuracy ``a`` and loss ``l``

    * is the new best model (saved, later tested) when ``a >= A and l <= L``;
    * resets the patience counter when ``a >= A or l <= L`` (either one still improves);
    * otherwise counts towards patience (100 evaluations: stop).

    So training goes on while either curve improves, and the tested model is the latest one
    at which both were at their best so far. Ties count as improvements (``>=``, ``<=``).

:func:`judge` is the rule for one evaluation given the earlier ones; :func:`select_epoch`
replays a whole history (what a run with patience would have picked and where it stopped).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal, NamedTuple

__all__ = ["SELECT_RULES", "Judgement", "judge", "select_epoch"]

SelectRule = Literal["acc", "loss", "acc+loss"]
SELECT_RULES: tuple[str, ...] = ("acc", "loss", "acc+loss")


class Judgement(NamedTuple):
    """The verdict on one dev evaluation.

    Attributes:
        best: the model is the new best one (save it; it is the one tested).
        progress: the evaluation resets the early-stopping counter (``best`` implies it).
    """

    best: bool
    progress: bool


def _check_rule(rule: str) -> None:
    if rule not in SELECT_RULES:
        raise ValueError(
            f"task_options.select: unknown rule {rule!r}; valid choices: {', '.join(SELECT_RULES)}"
        )


def judge(
    rule: str, accuracy: float, loss: float, earlier: Iterable[tuple[float, float]]
) -> Judgement:
    """Judge a dev evaluation ``(accuracy, loss)`` under ``rule`` (module docstring).

    Args:
        rule: one of :data:`SELECT_RULES`.
        accuracy: this evaluation's dev accuracy.
        loss: this evaluation's dev loss.
        earlier: ``(accuracy, loss)`` of the earlier evaluations, oldest first; for ``acc``
            and ``loss`` only the best one matters, for ``acc+loss`` every one.

    A non-finite loss or accuracy is never best and never progress.
    """
    _check_rule(rule)
    if not (math.isfinite(accuracy) and math.isfinite(loss)):
        return Judgement(False, False)
    earlier = [(a, l) for a, l in earlier if math.isfinite(a) and math.isfinite(l)]
    if not earlier:
        return Judgement(True, True)
    if rule == "acc+loss":
        top_acc = max(a for a, _ in earlier)
        low_loss = min(l for _, l in earlier)
        acc_ok, loss_ok = accuracy >= top_acc, loss <= low_loss
        return Judgement(acc_ok and loss_ok, acc_ok or loss_ok)
    if rule == "loss":
        better = loss < min(l for _, l in earlier)
    else:  # acc: lexicographic (higher accuracy, then lower loss)
        best_acc, best_loss = max(earlier, key=lambda al: (al[0], -al[1]))
        better = accuracy > best_acc or (accuracy == best_acc and loss < best_loss)
    return Judgement(better, better)


class Selection(NamedTuple):
    """What :func:`select_epoch` found: indices into the history (0-based evaluations)."""

    best: int
    stopped: int


def select_epoch(
    rule: str, history: Sequence[tuple[float, float]], *, patience: int = 0
) -> Selection:
    """Replay ``history`` (``(dev accuracy, dev loss)`` per evaluation) under ``rule``.

    Returns the index of the selected (tested) evaluation and of the last evaluation run
    before patience ran out (``patience`` 0: never stop, the last index). ``best`` is -1 when
    no evaluation qualifies (all non-finite).
    """
    if patience < 0:
        raise ValueError(f"patience must be >= 0, got {patience}")
    if not history:
        raise ValueError("select_epoch: the history is empty")
    best, bad = -1, 0
    for i, (acc, loss) in enumerate(history):
        verdict = judge(rule, acc, loss, history[:i])
        if verdict.best:
            best = i
        bad = 0 if verdict.progress else bad + 1
        if patience and bad >= patience:
            return Selection(best, i)
    return Selection(best, len(history) - 1)
