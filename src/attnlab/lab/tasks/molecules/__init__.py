"""Molecule property regression: a molecule is a set of one-hot atoms, the model predicts one
number for the set (N -> 1). Tasks ``freesolv`` and ``solubility``; the chemistry is
:mod:`attnlab.lab.chem` (RDKit).

* :mod:`.model`: :class:`MoleculeModel` and the three ways structure enters attention
  (``none``, ``mask``, ``spd``).
* :mod:`.data`: examples, batches, splits.
* :mod:`.base`: :class:`MoleculeTask`, what the tasks share (standardised targets, RMSE,
  predict / show).
* :mod:`.tasks`: :class:`FreeSolvTask`, :class:`SolubilityTask`.
"""

from attnlab.lab.tasks.molecules.base import MoleculeInput, MoleculeTask
from attnlab.lab.tasks.molecules.data import MoleculeExample, collate_molecules
from attnlab.lab.tasks.molecules.model import (
    STRUCTURES,
    DistanceBias,
    MoleculeModel,
    MoleculeModelConfig,
    MoleculeOutput,
)
from attnlab.lab.tasks.molecules.tasks import (
    FreeSolvOptions,
    FreeSolvTask,
    SolubilityOptions,
    SolubilityTask,
)

__all__ = [
    "STRUCTURES",
    "DistanceBias",
    "FreeSolvOptions",
    "FreeSolvTask",
    "MoleculeExample",
    "MoleculeInput",
    "MoleculeModel",
    "MoleculeModelConfig",
    "MoleculeOutput",
    "MoleculeTask",
    "SolubilityOptions",
    "SolubilityTask",
    "collate_molecules",
]
