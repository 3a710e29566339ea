"""Morgan (ECFP-like) fingerprints, the classic baseline input for property prediction.

Rogers & Hahn (2010): each atom's circular neighbourhood up to ``radius`` bonds is hashed
into one of ``bits`` positions. Built with RDKit's ``rdFingerprintGenerator``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdFingerprintGenerator

__all__ = ["morgan_fingerprints"]


def morgan_fingerprints(
    mols: Sequence[Chem.Mol], *, radius: int = 2, bits: int = 2048, counts: bool = False
) -> np.ndarray:
    """Fingerprints ``(len(mols), bits)`` float32: bits (0/1), or ``counts`` of each hash.

    Args:
        mols: RDKit molecules.
        radius: neighbourhood radius in bonds (2: ECFP4).
        bits: fingerprint length.
        counts: count vectors instead of bit vectors.
    """
    if radius < 0 or bits < 1:
        raise ValueError(f"radius must be >= 0 and bits >= 1, got radius={radius}, bits={bits}")
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=bits)
    as_array = gen.GetCountFingerprintAsNumPy if counts else gen.GetFingerprintAsNumPy
    out = np.zeros((len(mols), bits), dtype=np.float32)
    for i, mol in enumerate(mols):
        out[i] = as_array(mol)
    return out
