r"""The molecule model: a set of one-hot atoms -> Transformer blocks -> pooling -> one number.

Structure enters attention in one of three ways (``structure``), compared in BENCHMARKS.md:

* ``"none"``: full attention over the bag of atoms (the lecture's plain set; the model is
  permutation-invariant and blind to bonds except through the atom features' degree, ring
  and hydrogen slots).
* ``"mask"``: attention only along bonds, plus to itself (the graph machinery: a boolean mask
  from the adjacency, ``masks.padding(lengths) & bonds``); ``depth`` layers see ``depth``
  bonds away, like a message-passing network.
* ``"spd"``: full attention plus a learned bias per shortest-path distance and head, added to
  the scores (Graphormer's spatial encoding, Ying et al. 2021):

  .. math:: s_{ij} = \frac{q_i \cdot k_j}{\sqrt{d}} + b_{h,\phi(i,j)},

  with :math:`\phi(i, j)` the bond count between atoms, clipped to ``max_distance``, and one
  bucket of its own for atoms in different fragments. One table serves all layers (a
  ``bias`` of :meth:`attnlab.blocks.TransformerEncoder.forward`).

Legend: ``b`` batch, ``n`` / ``i`` / ``j`` atoms, ``h`` heads, ``F`` atom features.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch
from torch import Tensor, nn

from attnlab import masks
from attnlab.blocks import TransformerEncoder, TrunkConfig
from attnlab.dropout import Dropout
from attnlab.efficient import KERNELS
from attnlab.lab.chem import UNREACHABLE
from attnlab.lab.models.pooling import POOLINGS

__all__ = ["STRUCTURES", "MoleculeModelConfig", "MoleculeModel", "MoleculeOutput", "DistanceBias"]

#: the ways structure enters attention
STRUCTURES = ("none", "mask", "spd")
#: an extensive readout divides the atom count by this, keeping the pooled vector near unit scale
TYPICAL_ATOMS = 10.0


@dataclass
class MoleculeModelConfig(TrunkConfig):
    """The molecule model's settings (``--model.dim=64``, ``--model.structure=mask``, ...): the
    trunk's (:class:`~attnlab.blocks.TrunkConfig`: ``depth``, ``heads``, ``ff_hidden`` (None:
    4 x ``dim``), ``dropout``, ``norm_first``, ``attention``) and the molecule's own.

    Args:
        dim: width of the atom vectors.
        dropout: dropout in the blocks and before the output layer.
        structure: ``"none"`` (full attention over the atoms), ``"mask"`` (only along bonds
            and to itself) or ``"spd"`` (full attention plus a learned score bias per
            shortest-path distance).
        max_distance: with ``"spd"``: distances beyond this share one bucket.
        pooling: ``"attention"`` (its weights are what ``show`` shades atoms by), ``"mean"``,
            ``"max"``; :data:`attnlab.lab.models.pooling.POOLINGS`.
        extensive: scale the pooled vector by the atom count ``n / 10`` (a weighted *sum*
            instead of a weighted mean). Hydration free energy and log solubility are roughly
            additive over a molecule's groups; an average alone cannot tell ethanol from
            octanol's chain length (on FreeSolv this halves the error of attention pooling).
    """

    dim: int = 64
    depth: int = 3
    ff_hidden: int | None = 128
    structure: Literal["none", "mask", "spd"] = "spd"
    max_distance: int = 8
    pooling: Literal["attention", "mean", "max"] = "attention"
    extensive: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.structure not in STRUCTURES:
            raise ValueError(
                f"model.structure: expected one of {', '.join(STRUCTURES)}, got {self.structure!r}"
            )
        if self.dim < 1:
            raise ValueError(f"model.dim must be >= 1, got {self.dim}")
        self.check_width(self.dim)
        if self.max_distance < 1:
            raise ValueError(f"model.max_distance must be >= 1, got {self.max_distance}")
        POOLINGS.get(self.pooling)  # an unknown name lists the valid ones
        kernel = self.attention.kernel
        if isinstance(kernel, str) and self.structure != "none":
            why = {"spd": "adds a score bias per distance, which the efficient kernel "
                          f"{kernel!r} never forms",
                   "mask": "masks attention to the bonds, which the efficient kernel "
                           f"{kernel!r} cannot apply"}[self.structure]  # fmt: skip
            if self.structure == "spd" or not KERNELS.get(kernel).supports_structured:
                raise ValueError(
                    f"model.structure={self.structure!r} {why}; use model.structure=none with "
                    "an efficient kernel (or a kernel that takes any mask: local, longformer, "
                    "bigbird, synthesizer)"
                )


class DistanceBias(nn.Module):
    """A learned score bias per (distance bucket, head), Graphormer's spatial encoding.

    Args:
        heads: attention heads.
        max_distance: buckets ``0 .. max_distance`` (longer paths share the last), plus one for
            :data:`~attnlab.lab.chem.UNREACHABLE` pairs.

    Shapes:
        - distances: ``(b, n, n)`` int64 bond counts, ``UNREACHABLE`` where there is no path
        - output: ``(b, h, n, n)`` float
    """

    def __init__(self, heads: int, max_distance: int) -> None:
        super().__init__()
        self.max_distance = max_distance
        self.table = nn.Embedding(max_distance + 2, heads)
        nn.init.zeros_(self.table.weight)  # start as plain attention

    def forward(self, distances: Tensor) -> Tensor:
        bucket = distances.clamp(max=self.max_distance)
        bucket = torch.where(distances == UNREACHABLE, self.max_distance + 1, bucket)
        return self.table(bucket).permute(0, 3, 1, 2)  # (b, n, n, h) -> (b, h, n, n)


class MoleculeOutput(NamedTuple):
    prediction: Tensor  # (b,) the (standardised) property; (b, C) class logits
    weights: list[Tensor] | None  # per layer (b, h, i, j)
    head_weights: Tensor | None  # (b, n) attention pooling weights; None for mean / max


class MoleculeModel(nn.Module):
    """Atoms -> ``depth`` pre-norm Transformer blocks -> pooling -> MLP -> one number.

    Args:
        in_features: width ``F`` of the atom vectors
            (:data:`~attnlab.lab.chem.NUM_ATOM_FEATURES`).
        config: a :class:`MoleculeModelConfig`.
        outputs: 1 (a property: the prediction is ``(b,)``) or the number of classes ``C``
            (the prediction is ``(b, C)`` logits).

    Batch: ``"atoms"`` ``(b, n, F)`` float, ``"distances"`` ``(b, n, n)`` int64 (padded with
    ``UNREACHABLE``), ``"lengths"`` ``(b,)``; other keys are ignored.

    ``model(batch)`` is the prediction ``(b,)``; ``model(batch, need_weights=True)`` a
    :class:`MoleculeOutput` with the attention weights. Padded atoms never change the result.
    """

    def __init__(self, in_features: int, config: MoleculeModelConfig, outputs: int = 1) -> None:
        super().__init__()
        self.config = c = config
        self.embed = nn.Linear(in_features, c.dim)
        self.encoder = TransformerEncoder.from_config(c.dim, c)  # pre-norm: ends in a LayerNorm
        self.distance_bias = DistanceBias(c.heads, c.max_distance) if c.structure == "spd" else None
        self.pool = POOLINGS.get(c.pooling)(c.dim)
        self.out = nn.Sequential(
            nn.Linear(c.dim, c.dim), nn.GELU(), Dropout(c.dropout), nn.Linear(c.dim, outputs)
        )

    def attention_mask(self, distances: Tensor, lengths: Tensor) -> masks.Mask:
        """Key padding, and with ``structure="mask"`` only bonded atoms and the atom itself."""
        mask = masks.padding(lengths)
        if self.config.structure == "mask":
            bonded = (distances == 0) | (distances == 1)  # (b, n, n): self and bonds
            mask = mask & bonded.unsqueeze(1)  # (b, 1, n, n)
        return mask

    def forward(
        self, batch: Mapping[str, Tensor], *, need_weights: bool = False
    ) -> Tensor | MoleculeOutput:
        for key in ("atoms", "distances", "lengths"):
            if key not in batch:
                raise ValueError(f"the batch needs {key!r}; got keys {sorted(batch)}")
        atoms, distances = batch["atoms"], batch["distances"]
        lengths = batch["lengths"].to(device=atoms.device, dtype=torch.long)
        valid = torch.arange(atoms.shape[1], device=atoms.device) < lengths[:, None]  # (b, n)
        x = self.embed(atoms) * valid.unsqueeze(-1)  # (b, n, dim)
        mask = self.attention_mask(distances, lengths)
        bias = self.distance_bias(distances) if self.distance_bias else None  # (b, h, n, n)
        encoded = self.encoder(x, mask=mask, bias=bias, need_weights=need_weights)
        weights = list(encoded.weights) if need_weights else None
        x = encoded.out * valid.unsqueeze(-1)
        pooled, pool_weights = self.pool(x, lengths)  # (b, dim), (b, n) | None
        if self.config.extensive:
            pooled = pooled * (lengths.unsqueeze(-1).to(pooled.dtype) / TYPICAL_ATOMS)
        prediction = self.out(pooled)  # (b, outputs)
        if prediction.shape[-1] == 1:
            prediction = prediction.squeeze(-1)  # (b,)
        if need_weights:
            return MoleculeOutput(prediction, weights, pool_weights)
        return prediction
