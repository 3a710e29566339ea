"""The image model: (augmentation in training) -> encoder -> linear head, and its config.

Legend: ``b`` batch, ``H`` / ``W`` rows / columns, ``L`` classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from torch import Tensor, nn

from attnlab.images import RandomCropFlip

from .encoders import ImageEncoderConfig, PatchesConfig, build_image_encoder

__all__ = ["ImageModel", "ImageModelConfig", "ImageOutput", "build_image_model"]


@dataclass
class ImageModelConfig:
    """An :class:`ImageModel`.

    Args:
        encoder: the image encoder; ``kind`` = ``pixels``, ``patches``, ``hybrid`` or ``cnn``.
        crop: random-crop shift in pixels in training (zero padding; 0: none).
        flip: random horizontal flips in training (clothes: yes; digits: no).
        head_dropout: dropout before the linear head.
    """

    encoder: ImageEncoderConfig = field(default_factory=PatchesConfig)
    crop: int = 2
    flip: bool = True
    head_dropout: float = 0.0


class ImageOutput(NamedTuple):
    logits: Tensor  # (b, L)
    weights: list[Tensor] | None  # per layer (b, h, n, n)
    grid: tuple[int, int]  # token grid (rows, cols)
    prefix: int  # tokens before the grid (CLS)


class ImageModel(nn.Module):
    """Images in, class logits out.

    Batch: ``"images"`` ``(b, 1, H, W)`` float (normalised). ``model(batch)`` returns the
    logits ``(b, L)``; with ``need_weights=True`` an :class:`ImageOutput`.
    """

    def __init__(
        self, *, encoder: nn.Module, num_classes: int, augment: nn.Module | None = None,
        head_dropout: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__()
        self.augment = augment
        self.encoder = encoder
        self.head = nn.Sequential(nn.Dropout(head_dropout), nn.Linear(encoder.dim, num_classes))

    def forward(self, batch: Mapping[str, Tensor], *, need_weights: bool = False):
        if "images" not in batch:
            raise ValueError(f"the batch needs 'images'; got keys {sorted(batch)}")
        x = batch["images"]
        if x.dim() != 4 or x.shape[1] != 1:
            raise ValueError(
                f"batch['images']: expected (batch, 1, rows, cols), got {tuple(x.shape)}"
            )
        if self.augment is not None:
            x = self.augment(x)
        enc = self.encoder(x, need_weights=need_weights)
        logits = self.head(enc.pooled)
        return ImageOutput(logits, enc.weights, enc.grid, enc.prefix) if need_weights else logits


def build_image_model(
    cfg: ImageModelConfig, *, size: tuple[int, int], num_classes: int
) -> ImageModel:
    """The :class:`ImageModel` ``cfg`` describes for ``size = (H, W)`` images."""
    augment = RandomCropFlip(padding=cfg.crop, flip=cfg.flip) if (cfg.crop or cfg.flip) else None
    return ImageModel(
        encoder=build_image_encoder(cfg.encoder, size), num_classes=num_classes,
        augment=augment, head_dropout=cfg.head_dropout,
    )  # fmt: skip
