"""Molecule property regression: a molecule is a set of one-hot atoms, the model predicts one
number for the set (N -> 1). Tasks ``freesolv`` and ``solubility``; the chemistry is
:mod:`attnlab.chem` (RDKit).

* :mod:`.model`: :class:`MoleculeModel` and the three ways structure enters attention
  (``none``, ``mask``, ``spd``).
* :mod:`.data`: examples, batches, splits.
* :mod:`.base`: :class:`MoleculeTask`, what the tasks share (standardised targets, RMSE,
  predict / show).
* :mod:`.tasks`: :class:`FreeSolvTask`, :class:`SolubilityTask`.
"""

from .base import MoleculeInput, MoleculeTask
from .data import MoleculeExample, collate_molecules
from .model import STRUCTURES, DistanceBias, MoleculeModel, MoleculeModelConfig, MoleculeOutput
from .tasks import FreeSolvOptions, FreeSolvTask, SolubilityOptions, SolubilityTask

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
