"""The molecule tasks' data: examples, their batches, and the FreeSolv / solubility splits.

Legend: ``b`` batch, ``n`` atoms (the batch's largest molecule), ``F`` atom features.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from attnlab.lab.chem import (
    UNREACHABLE,
    MoleculeRecord,
    MolGraph,
    featurise,
    random_split,
    scaffold_split,
)

__all__ = ["MoleculeExample", "collate_molecules", "examples_of", "split_records"]


class MoleculeExample(NamedTuple):
    """One molecule ready to batch.

    Attributes:
        graph: its featurised atoms and distances.
        target: the property (NaN for an unlabelled input of ``predict`` / ``show``).
        smiles: the SMILES it was read from.
        reference: a reference prediction to score beside the model on the same molecules
            (FreeSolv's physics ``calc``), else NaN.
    """

    graph: MolGraph
    target: float
    smiles: str
    reference: float = math.nan


def examples_of(records: Sequence[MoleculeRecord], *, explicit_h: bool, reference: str = ""
                ) -> list[MoleculeExample]:  # fmt: skip
    """Featurise file records; ``reference`` names an ``extra`` column to keep (e.g. calc)."""
    return [
        MoleculeExample(
            featurise(r.mol, explicit_h=explicit_h),
            r.target,
            r.smiles,
            r.extra.get(reference, math.nan) if reference else math.nan,
        )  # fmt: skip
        for r in records
    ]


def collate_molecules(
    examples: Sequence[MoleculeExample], *, mean: float = 0.0, std: float = 1.0
) -> dict[str, Tensor]:
    """Pad a list of molecules into a batch.

    Returns:
        ``"atoms"`` ``(b, n, F)`` float (zeros at padding), ``"distances"`` ``(b, n, n)`` int64
        (``UNREACHABLE`` at padding), ``"lengths"`` ``(b,)``, ``"targets"`` ``(b,)`` the
        standardised target ``(y - mean) / std`` and ``"reference"`` ``(b,)`` (raw units;
        NaN where none).
    """
    if not examples:
        raise ValueError("collate_molecules: no examples")
    b = len(examples)
    n = max(e.graph.num_atoms for e in examples)
    f = examples[0].graph.features.shape[1]
    atoms = torch.zeros(b, n, f)
    distances = torch.full((b, n, n), UNREACHABLE, dtype=torch.long)
    for i, e in enumerate(examples):
        k = e.graph.num_atoms
        atoms[i, :k] = e.graph.features
        distances[i, :k, :k] = e.graph.distances
    targets = torch.tensor([e.target for e in examples], dtype=torch.float32)
    return {
        "atoms": atoms,
        "distances": distances,
        "lengths": torch.tensor([e.graph.num_atoms for e in examples], dtype=torch.long),
        "targets": (targets - mean) / std,
        "reference": torch.tensor([e.reference for e in examples], dtype=torch.float32),
    }


def split_records(
    records: Sequence[MoleculeRecord],
    how: str,
    *,
    seed: int,
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
) -> Mapping[str, list[MoleculeRecord]]:
    """``{"train", "dev", "test"}`` records by a ``"random"`` (seeded) or ``"scaffold"`` split."""
    if how == "random":
        parts = random_split(len(records), fractions, seed=seed)
    elif how == "scaffold":
        parts = scaffold_split([r.mol for r in records], fractions)
    else:
        raise ValueError(f"task_options.split: expected 'random' or 'scaffold', got {how!r}")
    return {name: [records[i] for i in idx] for name, idx in zip(("train", "dev", "test"), parts)}
