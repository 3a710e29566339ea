"""``molecule-property``: one value or label per molecule of your own (N -> 1), no code:
``attnlab train molecule-property --data.train=my.csv``.

One task for both kinds, decided by ``--data.kind`` (``auto``: a regression when every train
target is a number with more than 10 distinct values, else a classification; :mod:`.files`).
Regression is the ``freesolv`` / ``solubility`` recipe (targets standardised by train's mean
and deviation, squared error, RMSE in the file's units); classification ranks train's labels
(sorted, numerically when all are numbers), trains with cross-entropy and selects on accuracy.
The model is theirs (:class:`~.model.MoleculeModel`, shortest-path bias by default) with as many
outputs as classes. The kind, the labels, the statistics and the columns are kept in the
checkpoint, the splits in ``RUN/data/`` (:mod:`.own`), so ``eval``, ``predict`` (SMILES, or
``--index N`` of the kept test split) and ``show`` need the run alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from attnlab.lab.tasks.base import options_as
from attnlab.lab.tasks.molecules.data import MoleculeExample
from attnlab.lab.tasks.molecules.files import (
    MoleculeDataOptions,
    as_molecule_options,
    read_molecules,
)
from attnlab.lab.tasks.molecules.own import MoleculeFilesTask

__all__ = ["MoleculePropertyOptions", "MoleculePropertyTask"]


@dataclass
class MoleculePropertyOptions:
    """Options of the ``molecule-property`` task (a value or a label per molecule of yours).

    Args:
        explicit_h: hydrogens as atoms of their own.
        data: your CSVs of a SMILES column and a target column (a number: regression; a
            label: classification; data.kind).
    """

    explicit_h: bool = False
    data: MoleculeDataOptions = field(default_factory=MoleculeDataOptions)


class MoleculePropertyTask(MoleculeFilesTask):
    """A property (RMSE) or a class (accuracy) per molecule of your own CSVs (N -> 1)."""

    name = "molecule-property"
    property_name = "value"

    @classmethod
    def default_options(cls) -> MoleculePropertyOptions:
        return MoleculePropertyOptions()

    def setup(self, options: MoleculePropertyOptions) -> None:
        opts = options_as(MoleculePropertyOptions, options)
        if not self.read_own(as_molecule_options(opts.data), opts.explicit_h):
            raise ValueError(
                f"task {self.name!r} trains on your own molecules: give --data.train=FILE.csv "
                "(columns smiles and target, or name them with --data.smiles_column / "
                f"--data.target_column), e.g. attnlab train {self.name} --data.train=my.csv; "
                "dev and test are cut from it unless --data.dev / --data.test name them"
            )

    def read_examples(self, path: str | Path) -> list[MoleculeExample]:
        """Labelled molecules of a CSV laid out as the run's (its SMILES and target columns,
        else ``smiles`` and ``target``)."""
        data = MoleculeDataOptions()
        with open(path, encoding="utf-8") as fh:
            header = fh.readline().strip().split(",")
        target = self.target_column if self.target_column in header else "target"
        rows = read_molecules(str(path), data, "test", [], target_column=target)
        return self._examples({"test": rows, "dev": []}, self.explicit_h)["test"]
