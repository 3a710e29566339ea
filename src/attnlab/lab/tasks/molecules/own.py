"""The molecule tasks on a user's own CSVs (``--data.train=FILE``, :mod:`.files`): regression as
the built-in tasks do it (targets standardised by train's mean and deviation, RMSE), or
classification (train's labels in order, cross-entropy, accuracy); the splits kept in
``RUN/data/`` so that ``eval``, ``predict --index`` and ``show`` need the run alone.

:class:`MoleculeFilesTask` is what ``freesolv``, ``solubility`` (regression only) and
``molecule-property`` (either, :mod:`.generic`) share.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.chem import NUM_ATOM_FEATURES, featurise, mol_from_smiles
from attnlab.lab.data.own import (
    SAVED_DIR,
    SPLITS,
    atomic_write,
    check_labels,
    label_order,
    save_splits,
    saved_splits,
)
from attnlab.lab.tasks.base import classification_metrics
from attnlab.lab.tasks.molecules.base import MoleculeInput, MoleculeTask
from attnlab.lab.tasks.molecules.data import MoleculeExample
from attnlab.lab.tasks.molecules.files import (
    MoleculeDataOptions,
    MoleculeRow,
    cut_molecules,
    read_molecules,
    render_rows,
    render_skipped,
    resolve_kind,
    target_value,
    warn_skipped,
)
from attnlab.lab.tasks.molecules.model import MoleculeModel, MoleculeModelConfig

__all__ = ["MoleculeFilesTask"]


class MoleculeFilesTask(MoleculeTask):
    """A molecule task that reads the user's CSVs when ``data.train`` is given (regression or
    classification, ``kind``), else its own dataset (the subclass's ``setup``)."""

    def __init__(self) -> None:
        super().__init__()
        self.kind = "regression"
        self.classes: list[str] = []
        self.target_column = "target"
        self._restored = False  # a checkpoint's state was loaded (kind, labels, statistics)
        self._saved: dict[str, Path] | None = None  # the splits the run kept
        self._kept: tuple[MoleculeDataOptions, dict[str, str], list] | None = None
        self._rows: dict[str, list[MoleculeRow]] = {}

    # ------------------------------------------------------------------ the user's files
    def read_own(self, data: MoleculeDataOptions, explicit_h: bool, kind: str = "") -> bool:
        """Read the user's files (or the run's kept splits) into the splits; False (nothing
        read) when neither is there. ``kind`` forces regression or classification."""
        if self._saved is None and not data.train:
            return False
        if self._saved is not None:
            rows = {s: read_molecules(str(p), data, s, [], smiles_column="smiles",
                                      target_column="target") for s, p in self._saved.items()}  # fmt: skip
        else:
            files = {s: getattr(data, s) for s in SPLITS if getattr(data, s)}
            skipped: list[tuple[str, ...]] = []
            read = {s: read_molecules(f, data, s, skipped) for s, f in files.items()}
            rows, sources = cut_molecules(read, files, data)
            self._kept = (data, sources, skipped)
            warn_skipped(skipped)
        if not self._restored:
            self.set_kind(kind or resolve_kind(data.kind, [r.target for r in rows["train"]]))
            self.target_column = data.target_column
            if self.kind == "classification":
                self.classes = label_order(r.target for r in rows["train"])
                if len(self.classes) < 2:
                    raise ValueError(f"{data.train}: a classification needs two labels or more "
                                     f"in train, got {self.classes}")  # fmt: skip
                self.mean, self.std, self.explicit_h = 0.0, 1.0, explicit_h
        self._rows = rows
        self._set_splits(self._examples(rows, explicit_h), explicit_h)
        return True

    def _examples(self, rows: Mapping[str, list[MoleculeRow]], explicit_h: bool
                  ) -> dict[str, list[MoleculeExample]]:  # fmt: skip
        if self.kind == "classification":
            for split in ("dev", "test"):
                check_labels(((r.target, r.where) for r in rows[split]), self.classes, split)
            index = {c: i for i, c in enumerate(self.classes)}
            value = lambda r: float(index[r.target])  # noqa: E731
        else:
            value = lambda r: target_value(r, self.target_column)  # noqa: E731
        return {s: [MoleculeExample(featurise(r.mol, explicit_h=explicit_h), value(r), r.smiles)
                    for r in split] for s, split in rows.items()}  # fmt: skip

    def load_run_data(self, run_dir: str | Path) -> None:
        """Read the splits from what the run ``run_dir`` kept of the user's files, if it did."""
        self._saved = saved_splits(run_dir)

    def save_run_data(self, run_dir: str | Path) -> None:
        """Keep the splits read from the user's files (and the rows skipped) in
        ``run_dir/data/``."""
        if self._kept is None:
            return
        data, sources, skipped = self._kept
        if skipped:
            (Path(run_dir) / SAVED_DIR).mkdir(parents=True, exist_ok=True)
            atomic_write(Path(run_dir) / SAVED_DIR / "skipped.csv", render_skipped(skipped))
        save_splits(run_dir, self._rows, render_rows, ".csv", sources, data)

    # ------------------------------------------------------------------ the kind
    def set_kind(self, kind: str) -> None:
        """Regression (RMSE, lower is better) or classification (accuracy, higher)."""
        self.kind = kind
        self.metric_name = "accuracy" if kind == "classification" else "rmse"
        self.higher_is_better = kind == "classification"

    def build_model(self, model_config: MoleculeModelConfig) -> nn.Module:
        if self.kind != "classification":
            return super().build_model(model_config)
        self.model_cfg = model_config
        return MoleculeModel(NUM_ATOM_FEATURES, model_config, outputs=len(self.classes))

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        if self.kind != "classification":
            return super().loss(model, batch)
        labels = batch["targets"].long()
        return F.cross_entropy(model(batch).float(), labels, reduction="sum"), labels.numel()

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        if self.kind != "classification":
            return super().evaluate(model, batches)
        return classification_metrics((model(b), b["targets"].long()) for b in batches)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "kind": self.kind, "classes": list(self.classes),
                "target_column": self.target_column}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.set_kind(str(state.get("kind", "regression")))
        self.classes = list(state.get("classes", []))
        self.target_column = str(state.get("target_column", "target"))
        self._restored = True

    # ------------------------------------------------------------------ commands
    def example_input(self, example: MoleculeExample) -> tuple[MoleculeInput, str]:
        """Test molecule ``example`` as ``predict``'s input, with its gold value or label."""
        mol = mol_from_smiles(example.smiles, explicit_h=self.explicit_h)
        if self.kind == "classification":
            gold = self.classes[int(example.target)]
        else:
            gold = f"{example.target:.3f} {self.units}".strip()
        return MoleculeInput(example.smiles, mol, example._replace(target=math.nan)), gold

    @torch.no_grad()
    def predict(self, model: nn.Module, inputs: Sequence[MoleculeInput], **flags: Any
                ) -> list[dict[str, Any]]:  # fmt: skip
        """Regression: ``{"smiles", property_name}``; classification: ``{"smiles", "label",
        "probabilities": {label: p}}``."""
        if self.kind != "classification":
            return super().predict(model, inputs, **flags)
        model.eval()
        probs = model(self.encode_inputs(inputs)).float().softmax(-1)
        return [{"smiles": x.smiles, "label": self.classes[int(p.argmax())],
                 "probabilities": {c: round(float(q), 4) for c, q in zip(self.classes, p)}}
                for x, p in zip(inputs, probs)]  # fmt: skip

    def format_text(self, record: Mapping[str, Any]) -> str:
        if "label" not in record:
            return super().format_text(record)
        top = sorted(record["probabilities"].items(), key=lambda kv: -kv[1])[:3]
        return (
            f"{record['smiles']}\t{record['label']} ({', '.join(f'{c} {p:.2f}' for c, p in top)})"
        )

    def describe_prediction(self, prediction: Tensor) -> str:
        if self.kind != "classification":
            return super().describe_prediction(prediction)
        probs = prediction.float().softmax(-1)
        return f"predicted {self.classes[int(probs.argmax())]} ({float(probs.max()):.2f})"
