"""Train / dev / test splits of a molecule list: random, or by Bemis-Murcko scaffold.

A random split puts close analogues on both sides and so flatters a model; a scaffold split
(Bemis & Murcko 1996; MoleculeNet, Wu et al. 2018) keeps every molecule sharing a ring system
on one side, so the test set asks about ring systems never seen in training. As DeepChem's
``ScaffoldSplitter``: scaffold groups, largest first (ties by first appearance), fill train,
then dev, then test; the small, rare scaffolds thus end up in dev and test.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rdkit import Chem
from rdkit.Chem.Scaffolds import MurckoScaffold

__all__ = ["scaffold", "scaffold_split", "random_split", "check_fractions"]


def check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """``(train, dev, test)`` fractions, each in [0, 1], summing to 1."""
    if len(fractions) != 3 or any(not 0.0 <= f <= 1.0 for f in fractions):
        raise ValueError(f"fractions: expected (train, dev, test) in [0, 1], got {fractions!r}")
    if abs(sum(fractions) - 1.0) > 1e-6:
        raise ValueError(
            f"fractions: expected a sum of 1, got {fractions!r} (sum {sum(fractions)})"
        )
    return tuple(float(f) for f in fractions)  # type: ignore[return-value]


def scaffold(mol: Chem.Mol) -> str:
    """The Bemis-Murcko scaffold of ``mol`` as canonical SMILES (without chirality); ``""``
    for a molecule without rings."""
    return MurckoScaffold.MurckoScaffoldSmiles(mol=mol, includeChirality=False)


def scaffold_split(
    mols: Sequence[Chem.Mol], fractions: Sequence[float] = (0.8, 0.1, 0.1)
) -> tuple[list[int], list[int], list[int]]:
    """Indices ``(train, dev, test)`` with no scaffold on two sides (deterministic).

    Groups go to train while it stays within ``fractions[0] * n`` molecules, then to dev
    within ``(fractions[0] + fractions[1]) * n``, then to test.
    """
    f_train, f_dev, _ = check_fractions(fractions)
    groups: dict[str, list[int]] = {}
    for i, mol in enumerate(mols):
        groups.setdefault(scaffold(mol), []).append(i)
    ordered = sorted(groups.values(), key=lambda g: (-len(g), g[0]))
    n = len(mols)
    train: list[int] = []
    dev: list[int] = []
    test: list[int] = []
    for group in ordered:
        if len(train) + len(group) <= f_train * n:
            train += group
        elif len(train) + len(dev) + len(group) <= (f_train + f_dev) * n:
            dev += group
        else:
            test += group
    return sorted(train), sorted(dev), sorted(test)


def random_split(
    n: int, fractions: Sequence[float] = (0.8, 0.1, 0.1), *, seed: int = 0
) -> tuple[list[int], list[int], list[int]]:
    """Indices ``(train, dev, test)`` of a seeded random permutation of ``range(n)``:
    ``round(f_dev * n)`` for dev, ``round(f_test * n)`` for test, the rest for train."""
    _, f_dev, f_test = check_fractions(fractions)
    order = np.random.default_rng(seed).permutation(n).tolist()
    n_dev, n_test = round(f_dev * n), round(f_test * n)
    dev, test = order[:n_dev], order[n_dev : n_dev + n_test]
    return sorted(order[n_dev + n_test :]), sorted(dev), sorted(test)
