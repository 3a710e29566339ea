"""Chemistry for the molecule tasks, all of it done by RDKit.

* :mod:`.parse`: SMILES to sanitised molecules; :class:`MoleculeError` names a bad input and
  quotes RDKit's reason.
* :mod:`.readers`: CSV (SMILES column) and SDF files, bad records refused or, with
  ``skip_invalid=True``, listed and skipped.
* :mod:`.featurise`: atoms as one-hot vectors (a documented vocabulary with "other" slots),
  bonds, shortest-path distances.
* :mod:`.splits`: random and Bemis-Murcko scaffold splits.
* :mod:`.fingerprints`: Morgan fingerprints for the baselines.
* :mod:`.draw`: a molecule shaded by attention beside its atom-by-atom heatmap.

This package knows nothing of models or tasks (:mod:`attnlab.lab.tasks.molecules` builds on it).
"""

from attnlab.lab.chem.featurise import (
    ATOM_FEATURES,
    FLAGS,
    NUM_ATOM_FEATURES,
    UNREACHABLE,
    MolGraph,
    atom_feature_names,
    atom_features,
    featurise,
    outside_vocabulary,
    shortest_paths,
)
from attnlab.lab.chem.fingerprints import morgan_fingerprints
from attnlab.lab.chem.parse import (
    MoleculeError,
    fragments,
    largest_fragment,
    mol_from_smiles,
    rdkit_log,
    sanitize,
)
from attnlab.lab.chem.readers import MoleculeFile, MoleculeRecord, find_field, read_csv, read_sdf
from attnlab.lab.chem.splits import random_split, scaffold, scaffold_split

__all__ = [
    "ATOM_FEATURES",
    "FLAGS",
    "NUM_ATOM_FEATURES",
    "UNREACHABLE",
    "MolGraph",
    "MoleculeError",
    "MoleculeFile",
    "MoleculeRecord",
    "atom_feature_names",
    "atom_features",
    "featurise",
    "find_field",
    "fragments",
    "largest_fragment",
    "mol_from_smiles",
    "morgan_fingerprints",
    "outside_vocabulary",
    "random_split",
    "rdkit_log",
    "read_csv",
    "read_sdf",
    "sanitize",
    "scaffold",
    "scaffold_split",
    "shortest_paths",
]
