"""The molecule tasks: ``freesolv`` (hydration free energy) and ``solubility`` (log S)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from attnlab.lab.chem import read_csv, read_sdf
from attnlab.lab.data.registry import dataset_path
from attnlab.lab.tasks.base import options_as
from attnlab.lab.tasks.molecules.data import MoleculeExample, examples_of, split_records
from attnlab.lab.tasks.molecules.files import MoleculeDataOptions, as_molecule_options
from attnlab.lab.tasks.molecules.own import MoleculeFilesTask

__all__ = ["FreeSolvTask", "FreeSolvOptions", "SolubilityTask", "SolubilityOptions"]


@dataclass
class FreeSolvOptions:
    """Options of ``freesolv``.

    Args:
        split: ``"random"`` 80/10/10 (seeded by ``seed``) or ``"scaffold"`` (Bemis-Murcko,
            deterministic: rare ring systems in dev and test).
        seed: the random split's seed (the model's is ``train.seed``).
        explicit_h: hydrogens as atoms of their own.
        skip_invalid: list and skip records RDKit refuses instead of stopping.
        file: a local CSV (columns ``smiles``, ``expt``, optional ``calc``) instead of the
            registered dataset; it is split the same way.
        data: your own CSVs of SMILES and values (regression; the target column expt unless
            named): train, and dev / test or a cut of train, instead of FreeSolv.
    """

    split: Literal["random", "scaffold"] = "random"
    seed: int = 0
    explicit_h: bool = False
    skip_invalid: bool = False
    file: str = ""
    data: MoleculeDataOptions = field(
        default_factory=lambda: MoleculeDataOptions(target_column="expt")
    )


class FreeSolvTask(MoleculeFilesTask):
    """Hydration free energy of 642 molecules, kcal/mol (N -> 1), RMSE; FreeSolv.

    FreeSolv (Mobley & Guthrie 2014): experimental values; the physics ``calc`` column
    (alchemical free-energy MD) is scored beside the model as ``reference_rmse`` on the same
    molecules."""

    name = "freesolv"
    property_name = "hydration_free_energy"
    units = "kcal/mol"

    @classmethod
    def default_options(cls) -> FreeSolvOptions:
        return FreeSolvOptions()

    def _read(self, path: str | Path, skip_invalid: bool) -> list:
        with open(path, encoding="utf-8") as fh:
            header = fh.readline()
        extra = ["calc"] if "calc" in header.strip().split(",") else []
        return read_csv(path, smiles_column="smiles", target_column="expt", extra_columns=extra,
                        skip_invalid=skip_invalid).records  # fmt: skip

    def setup(self, options: FreeSolvOptions) -> None:
        opts = options_as(FreeSolvOptions, options)
        if self.read_own(as_molecule_options(opts.data), opts.explicit_h, kind="regression"):
            return
        path = opts.file or dataset_path("freesolv", "data")
        records = self._read(path, opts.skip_invalid)
        parts = split_records(records, opts.split, seed=opts.seed)
        self._set_splits(
            {k: examples_of(v, explicit_h=opts.explicit_h, reference="calc")
             for k, v in parts.items()},
            opts.explicit_h,
        )  # fmt: skip

    def read_examples(self, path: str | Path) -> list[MoleculeExample]:
        """Labelled molecules of a FreeSolv-style CSV (``smiles``, ``expt``[, ``calc``])."""
        return examples_of(self._read(path, False), explicit_h=self.explicit_h, reference="calc")


@dataclass
class SolubilityOptions:
    """Options of ``solubility``.

    Args:
        dev_fraction: the share of the train file held out (seeded by ``seed``) for early
            stopping; the test file is the dataset's own test split.
        seed: the dev hold-out's seed.
        explicit_h: hydrogens as atoms of their own.
        skip_invalid: list and skip records RDKit refuses instead of stopping.
        train_file: a local SDF (property ``SOL``) instead of the registered train file.
        test_file: a local SDF instead of the registered test file.
        data: your own CSVs of SMILES and values (regression): train, and dev / test or a cut
            of train, instead of the Huuskonen files.
    """

    dev_fraction: float = 0.1
    seed: int = 0
    explicit_h: bool = False
    skip_invalid: bool = False
    train_file: str = ""
    test_file: str = ""
    data: MoleculeDataOptions = field(default_factory=MoleculeDataOptions)


class SolubilityTask(MoleculeFilesTask):
    """Aqueous solubility log S of 1,025 / 257 molecules (N -> 1), RMSE; Huuskonen.

    Huuskonen (2000), S in mol/L, its own train / test split as RDKit ships them."""

    name = "solubility"
    property_name = "log_solubility"
    units = "log(mol/L)"

    @classmethod
    def default_options(cls) -> SolubilityOptions:
        return SolubilityOptions()

    def setup(self, options: SolubilityOptions) -> None:
        opts = options_as(SolubilityOptions, options)
        if self.read_own(as_molecule_options(opts.data), opts.explicit_h, kind="regression"):
            return
        if not 0.0 <= opts.dev_fraction < 1.0:
            raise ValueError(
                f"task_options.dev_fraction: expected a number in [0, 1), got {opts.dev_fraction}"
            )
        train_path = opts.train_file or dataset_path("solubility", "train")
        test_path = opts.test_file or dataset_path("solubility", "test")
        train = read_sdf(train_path, target_field="SOL", skip_invalid=opts.skip_invalid).records
        test = read_sdf(test_path, target_field="SOL", skip_invalid=opts.skip_invalid).records
        parts = split_records(
            train,
            "random",
            seed=opts.seed,
            fractions=(1.0 - opts.dev_fraction, opts.dev_fraction, 0.0),
        )
        parts = {"train": parts["train"], "dev": parts["dev"], "test": test}  # fmt: skip
        self._set_splits(
            {k: examples_of(v, explicit_h=opts.explicit_h) for k, v in parts.items()},
            opts.explicit_h,
        )

    def read_examples(self, path: str | Path) -> list[MoleculeExample]:
        """Labelled molecules of an SDF with a ``SOL`` field (any case)."""
        return examples_of(read_sdf(path, target_field="SOL").records, explicit_h=self.explicit_h)
