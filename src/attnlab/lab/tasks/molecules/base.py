"""What the molecule tasks share: property regression (N atoms -> 1 number) on the
:class:`~attnlab.lab.tasks.Task` interface.

The target is standardised with the train split's mean and standard deviation (kept in the
task's state, so a checkpoint predicts in the original units); the loss is the squared error on
the standardised scale, the metric the RMSE in the original units (model selection: lower is
better). Batches carry a ``reference`` prediction per molecule where the data has one
(FreeSolv's physics ``calc``), and :meth:`MoleculeTask.evaluate` scores it on the same
molecules as ``reference_rmse``.
"""

from __future__ import annotations

import argparse
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import torch
from rdkit import Chem
from torch import Tensor, nn

from attnlab.lab.chem import (
    NUM_ATOM_FEATURES,
    atom_feature_names,
    featurise,
    largest_fragment,
    mol_from_smiles,
    outside_vocabulary,
)
from attnlab.lab.chem import fragments as chem_fragments
from attnlab.lab.chem.draw import atom_labels, molecule_attention_figure
from attnlab.lab.tasks.base import Task
from attnlab.lab.tasks.commands import TaskCommands
from attnlab.lab.tasks.molecules.data import MoleculeExample, collate_molecules
from attnlab.lab.tasks.molecules.model import MoleculeModel, MoleculeModelConfig, MoleculeOutput

__all__ = ["MoleculeTask", "MoleculeInput"]


class MoleculeInput(NamedTuple):
    """A molecule typed on the command line: its SMILES, RDKit molecule and features."""

    smiles: str
    mol: Any  # rdkit Chem.Mol (hydrogens as the task featurises them)
    example: MoleculeExample


class MoleculeTask(Task, TaskCommands):
    """Regression of one property per molecule, RMSE.

    Subclasses set the class attributes below and implement :meth:`setup` (which calls
    :meth:`_set_splits`) and :meth:`read_examples`.

    Class attributes:
        property_name: the key of the prediction in :meth:`predict`'s records.
        units: the property's units, for people.
    """

    metric_name = "rmse"
    higher_is_better = False
    unit = "mol"
    #: atom features, zeros past each molecule's atoms and masked by ``lengths`` (the padded
    #: pairs of ``distances`` are masked alike, whatever they hold)
    padded_floats = ("atoms",)
    property_name: ClassVar[str] = "value"
    units: ClassVar[str] = ""

    def __init__(self) -> None:
        self.mean: float | None = None
        self.std: float = 1.0
        self.explicit_h = False
        self.model_cfg = MoleculeModelConfig()
        self._splits: dict[str, list[MoleculeExample]] = {}

    @classmethod
    def default_model_config(cls) -> MoleculeModelConfig:
        return MoleculeModelConfig()

    @classmethod
    def default_train_options(cls) -> dict[str, Any]:
        """The recipe of BENCHMARKS.md: small sets, so many short epochs, and the best dev
        RMSE (evaluated every epoch) is the model kept."""
        return {"epochs": 60, "batch_size": 32, "lr": 1e-3, "warmup_fraction": 0.05}

    # ------------------------------------------------------------------ data
    def _set_splits(self, splits: Mapping[str, list[MoleculeExample]], explicit_h: bool) -> None:
        """Keep the splits; standardise with train's statistics unless a state set them."""
        if self.mean is not None and explicit_h != self.explicit_h:
            raise ValueError(
                f"task_options.explicit_h={explicit_h}, but the model was trained with "
                f"explicit_h={self.explicit_h}"
            )
        self.explicit_h = explicit_h
        self._splits = {k: list(v) for k, v in splits.items()}
        if self.mean is None:
            y = torch.tensor([e.target for e in self._splits["train"]], dtype=torch.float64)
            if y.numel() < 2:
                raise ValueError(f"{self._label()}: the train split needs >= 2 molecules")
            self.mean, self.std = float(y.mean()), float(y.std().clamp(min=1e-6))

    def splits(self) -> dict[str, list]:
        return self._splits

    def collate(self, examples: list) -> dict[str, Tensor]:
        return collate_molecules(examples, mean=self.mean or 0.0, std=self.std)

    def batch_size_of(self, example: MoleculeExample) -> int:
        return example.graph.num_atoms

    # ------------------------------------------------------------------ model, loss, metric
    def build_model(self, model_config: MoleculeModelConfig) -> nn.Module:
        self.model_cfg = model_config
        return MoleculeModel(NUM_ATOM_FEATURES, model_config)

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        pred = model(batch).float()  # (b,)
        return ((pred - batch["targets"]) ** 2).sum(), batch["targets"].numel()

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        """``rmse`` and ``mae`` in the property's units, ``loss`` (mean squared error on the
        standardised scale) and, where batches carry references, ``reference_rmse`` on the
        molecules that have one (with ``reference_count``)."""
        sq = ab = ref_sq = 0.0
        total = ref_count = 0
        for batch in batches:
            err = (model(batch).float() - batch["targets"]) * self.std  # (b,) property units
            sq += float((err**2).sum())
            ab += float(err.abs().sum())
            total += err.numel()
            ref = batch.get("reference")
            if ref is not None:
                y = batch["targets"] * self.std + (self.mean or 0.0)
                has = ~torch.isnan(ref)
                ref_sq += float(((ref[has] - y[has]) ** 2).sum())
                ref_count += int(has.sum())
        total = max(total, 1)
        out = {"rmse": math.sqrt(sq / total), "mae": ab / total, "loss": sq / total / self.std**2}
        if ref_count:
            out["reference_rmse"] = math.sqrt(ref_sq / ref_count)
            out["reference_count"] = float(ref_count)
        return out

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "std": self.std, "explicit_h": self.explicit_h,
                "atom_features": atom_feature_names()}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if list(state.get("atom_features", [])) != atom_feature_names():
            raise ValueError(
                f"{self._label()}: the checkpoint's atom vocabulary differs from this version's "
                "attnlab.lab.chem.ATOM_FEATURES; retrain, or use the attnlab version that made it"
            )
        self.mean, self.std = float(state["mean"]), float(state["std"])
        self.explicit_h = bool(state["explicit_h"])

    # ------------------------------------------------------------------ commands
    def parse_input(self, text: str, fragments: str = "refuse") -> MoleculeInput:
        """A SMILES string; a bad one raises :class:`~attnlab.lab.chem.MoleculeError` (a
        ``ValueError``) naming it and RDKit's reason.

        Args:
            text: one SMILES (no spaces: RDKit would read what follows one as a name).
            fragments: what to do with a SMILES of several disconnected parts (a salt
                ``[Na+].[Cl-]``, a solvate ``CCO.O``): ``"refuse"`` (the default: the
                training molecules are single fragments), ``"largest"`` (predict for the
                fragment with the most heavy atoms, with a warning naming what was dropped)
                or ``"whole"`` (all parts as one graph, unreachable from each other).

        Atoms with a property outside the one-hot vocabulary (an element such as He or U, an
        unusual charge) are featurised as that block's ``other`` slot, with a warning: the
        prediction then rests on a slot the training molecules rarely or never filled.
        """
        smiles = text.strip()
        mol = mol_from_smiles(smiles, explicit_h=self.explicit_h)
        parts = chem_fragments(mol)
        if len(parts) > 1:
            mol = self._one_fragment(smiles, mol, parts, fragments)
        odd = outside_vocabulary(mol)
        if odd:
            warnings.warn(
                f"SMILES {smiles!r}: {'; '.join(odd)}: outside the atom vocabulary "
                "(attnlab.lab.chem.ATOM_FEATURES), read as 'other'",
                stacklevel=2,
            )
        graph = featurise(mol)  # hydrogens already added as the task wants
        return MoleculeInput(smiles, mol, MoleculeExample(graph, math.nan, smiles))

    def _one_fragment(self, smiles: str, mol: Any, parts: Sequence[Any], policy: str) -> Any:
        """``mol`` (of several ``parts``) under the ``--fragments`` ``policy``."""
        if policy == "whole":
            return mol
        if policy == "largest":
            kept = largest_fragment(mol)
            dropped = [Chem.MolToSmiles(m) for m in parts]
            dropped.remove(Chem.MolToSmiles(kept))
            warnings.warn(
                f"SMILES {smiles!r} has {len(parts)} fragments: predicting for the largest, "
                f"{Chem.MolToSmiles(kept)!r}; dropped {', '.join(map(repr, dropped))}",
                stacklevel=3,
            )
            return kept
        if policy != "refuse":
            raise ValueError(f"--fragments: expected refuse, largest or whole, got {policy!r}")
        raise ValueError(
            f"SMILES {smiles!r} has {len(parts)} disconnected fragments "
            f"({', '.join(repr(Chem.MolToSmiles(m)) for m in parts)}), and the model was "
            "trained on single molecules; pass --fragments largest to predict for the largest "
            "(a salt's parent compound) or --fragments whole for all of them as one graph"
        )

    def command_inputs(self, texts: Sequence[str], options: Mapping[str, Any]) -> list:
        """One :meth:`parse_input` per SMILES, with the command's ``--fragments``."""
        if not texts:
            return super().command_inputs(texts, options)  # its error names what is read
        return [self.parse_input(t, options.get("fragments") or "refuse") for t in texts]

    def encode_inputs(self, inputs: Sequence[MoleculeInput]) -> dict[str, Tensor]:
        return self.collate([x.example for x in inputs])

    def input_labels(self, input: MoleculeInput) -> list[str]:
        return atom_labels(input.example.graph.symbols)

    @torch.no_grad()
    def predict(
        self, model: nn.Module, inputs: Sequence[MoleculeInput], **flags: Any
    ) -> list[dict[str, Any]]:
        """``[{"smiles": ..., property_name: value}, ...]`` in the property's units. ``flags``:
        the command's (``--fragments``, already applied by :meth:`command_inputs`)."""
        model.eval()
        pred = model(self.encode_inputs(inputs)).float() * self.std + (self.mean or 0.0)
        return [{"smiles": x.smiles, self.property_name: round(float(p), 4)}
                for x, p in zip(inputs, pred)]  # fmt: skip

    def describe_prediction(self, prediction: Tensor) -> str:
        """The model's output for one molecule (standardised) as words, for pictures."""
        value = float(prediction) * self.std + (self.mean or 0.0)
        return f"predicted {self.property_name}: {value:.2f} {self.units}".strip()

    def format_text(self, record: Mapping[str, Any]) -> str:
        value = record[self.property_name]
        return f"{record['smiles']}\t{value:.3f} {self.units}".rstrip()

    def add_arguments(self, parser: argparse.ArgumentParser, command: str) -> None:
        parser.add_argument(
            "--fragments", choices=("refuse", "largest", "whole"), default="refuse",
            help="a SMILES of several fragments (a salt, a solvate): refuse it (default), "
            "predict for the largest, or take the whole as one graph",
        )  # fmt: skip
        if command == "show":
            parser.add_argument(
                "--shade-layer", type=int, default=None, metavar="L",
                help="shade atoms by the attention they receive in layer L (1-based) instead "
                "of the pooling attention; also the heatmap's layer (default: the last)",
            )  # fmt: skip
            parser.add_argument(
                "--shade-head", type=int, default=None, metavar="H",
                help="only head H (1-based) of that layer (default: the mean over heads)",
            )  # fmt: skip

    def attention_view(self, model: nn.Module, input: MoleculeInput, *, title: str = "",
                       **options: Any):  # fmt: skip
        """The 2-D structure, atoms coloured by a chosen atom's attention or by the readout
        (:func:`.view.molecule_view`)."""
        from attnlab.lab.tasks.molecules.view import molecule_view

        return molecule_view(self, model, input, title=title)

    def draw(
        self,
        model: nn.Module,
        input: MoleculeInput,
        out: str | Path,
        *,
        title: str = "",
        shade_layer: int | None = None,
        shade_head: int | None = None,
        fragments: str = "refuse",
    ) -> Path:
        """The molecule (RDKit drawing) with atoms shaded by the attention they receive,
        beside one layer's atom-by-atom heatmap labelled ``C0, O1, ...``.

        The shading is the pooling attention (what the prediction reads from each atom) when
        the model pools by attention and no ``shade_layer`` is given; otherwise the attention
        atom ``j`` receives in layer ``shade_layer`` (default: the last), averaged over queries:
        :math:`\\frac{1}{n}\\sum_i a_{ij}`, of head ``shade_head`` or the heads' mean.
        """
        model.eval()
        with torch.no_grad():
            out_ = model(self.encode_inputs([input]), need_weights=True)
        assert isinstance(out_, MoleculeOutput)
        layers = [w[0].float() for w in out_.weights]  # per layer (h, i, j)
        layer = _pick(shade_layer, len(layers), "--shade-layer", "layer")
        heads = layers[layer]
        head = None if shade_head is None else _pick(shade_head, heads.shape[0], "--shade-head",
                                                     "head")  # fmt: skip
        matrix = heads.mean(0) if head is None else heads[head]  # (i, j)
        which = f"layer {layer + 1}, " + ("mean of heads" if head is None else f"head {head + 1}")
        if out_.head_weights is not None and shade_layer is None and shade_head is None:
            shade, shade_label = out_.head_weights[0].float(), "pooling attention"
        else:
            shade, shade_label = matrix.mean(0), f"attention received ({which})"
        title = f"{title}\n{self.describe_prediction(out_.prediction[0])}".strip()
        from attnlab.lab.tasks.molecules.view import masked_pairs

        masked = masked_pairs(self, input.mol)
        return molecule_attention_figure(
            input.mol, shade.float().numpy(), matrix.float().numpy(), out, title=title,
            weights_label=shade_label, matrix_label=f"attention, {which}",
            masked=masked, masked_label="masked pair (not bonded)",
        )  # fmt: skip


def _pick(value: int | None, count: int, flag: str, what: str) -> int:
    """A 1-based ``value`` (None: the last) as a 0-based index, checked against ``count``."""
    if value is None:
        return count - 1
    if not 1 <= value <= count:
        raise ValueError(f"{flag}: expected a {what} from 1 to {count}, got {value}")
    return value - 1
