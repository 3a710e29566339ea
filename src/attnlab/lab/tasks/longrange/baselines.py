"""What shallow rules score on ListOps without any training: a table of the most frequent answer
per key, fitted on the train trees and read on another split.

* ``majority``: one answer for every tree;
* ``operator``: the answer most frequent for the tree's top-level operator;
* ``top level``: keyed by the operator, what its direct digit arguments give under it (their
  max, min, sum mod 10, or the sorted digits for ``[MED``) and how many nested lists it has; an
  unseen key falls back to ``operator``.

A model above ``operator`` has learnt to read digits; one above ``top level`` evaluates nested
lists. At 100-300 tokens the ``top level`` rule scores 49.2% (BENCHMARKS.md), above a Transformer
trained on the same trees: a model's accuracy means little without it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

__all__ = ["RULES", "top_level_key", "rule_accuracies"]


def top_level_key(tokens: Sequence[str]) -> tuple:
    """The ``top level`` rule's key: the operator, what its direct digits give, nested lists."""
    op, depth, digits, nested = tokens[0], 0, [], 0
    for tok in tokens[1:-1]:  # inside the outermost list
        if tok.startswith("["):
            nested += depth == 0
            depth += 1
        elif tok == "]":
            depth -= 1
        elif depth == 0:
            digits.append(int(tok))
    summary = {"[MAX": lambda d: max(d, default=-1), "[MIN": lambda d: min(d, default=10),
               "[SM": lambda d: sum(d) % 10}.get(op, lambda d: tuple(sorted(d)))  # fmt: skip
    return op, summary(digits), nested


#: each rule's key of a tree
RULES: dict[str, Callable[[Sequence[str]], object]] = {
    "majority": lambda tokens: (),
    "operator": lambda tokens: tokens[0],
    "top level": top_level_key,
}


def rule_accuracies(train: Sequence[tuple], heldout: Sequence[tuple]) -> dict[str, float]:
    """Each rule's accuracy on ``heldout``, its table fitted on ``train`` (both lists of
    ``(tokens, label)``)."""
    if not train or not heldout:
        raise ValueError(f"rule_accuracies: needs train and held-out trees, got {len(train)} and "
                         f"{len(heldout)}")  # fmt: skip
    tables: dict[str, dict[object, Counter]] = {name: {} for name in RULES}
    for tokens, label in train:
        for name, key in RULES.items():
            tables[name].setdefault(key(tokens), Counter())[label] += 1
    out = {}
    for name, key in RULES.items():
        right = 0
        for tokens, label in heldout:
            counts = tables[name].get(key(tokens)) or tables["operator"].get(tokens[0])
            counts = counts or tables["majority"][()]
            right += counts.most_common(1)[0][0] == label
        out[name] = right / len(heldout)
    return out
