"""``show --html`` for molecules: the 2-D structure (RDKit's depiction), atoms coloured by the
attention of a chosen atom, or by the pooling (readout) attention the prediction reads
(:class:`attnlab.viz.AttentionView`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from attnlab.viz import Attention, AttentionView, Modality

__all__ = ["molecule_view", "masked_pairs"]


def masked_pairs(task: Any, mol: Any) -> np.ndarray | None:
    """``(n, n)`` True for the atom pairs a ``structure="mask"`` model never scores (not bonded,
    not the atom itself); None for models that attend to every atom."""
    if getattr(task.model_cfg, "structure", "none") != "mask":
        return None
    bonded = np.eye(mol.GetNumAtoms(), dtype=bool)
    for bond in mol.GetBonds():
        a, b = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        bonded[a, b] = bonded[b, a] = True
    return ~bonded


@torch.no_grad()
def molecule_view(task: Any, model: nn.Module, input: Any, *, title: str = "") -> AttentionView:
    """The page's data for one molecule (a :class:`~.base.MoleculeInput`)."""
    from rdkit import Chem
    from rdkit.Chem import rdDepictor

    from attnlab.lab.chem.draw import atom_labels

    model.eval()
    out = model(task.encode_inputs([input]), need_weights=True)
    if not out.weights:
        raise ValueError("this molecule model has no attention weights to show")
    weights = [w[0] for w in out.weights]  # per layer (h, n, n)
    mol = Chem.Mol(input.mol)
    rdDepictor.Compute2DCoords(mol)
    conf = mol.GetConformer()
    n = mol.GetNumAtoms()
    xy = [[round(conf.GetAtomPosition(a).x, 3), round(conf.GetAtomPosition(a).y, 3)]
          for a in range(n)]  # fmt: skip
    bonds = [[b.GetBeginAtomIdx(), b.GetEndAtomIdx(), float(b.GetBondTypeAsDouble())]
             for b in mol.GetBonds()]  # fmt: skip
    symbols = [a.GetSymbol() for a in mol.GetAtoms()]
    masked = masked_pairs(task, mol)
    readout = None if out.head_weights is None else out.head_weights[0].float().tolist()
    return AttentionView(
        Attention("self-attention", weights, atom_labels(symbols), masked=masked),
        title=title or input.smiles,
        prediction=task.describe_prediction(out.prediction[0]),
        modality=Modality(
            "molecule", {"atoms": symbols, "xy": xy, "bonds": bonds, "readout": readout}
        ),  # fmt: skip
        notes=[
            f"{n} atoms; structure in attention: {getattr(task.model_cfg, 'structure', 'none')}"
        ],  # fmt: skip
    )
