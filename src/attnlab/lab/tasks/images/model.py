"""The image model: (augmentation in training) -> encoder -> linear head, and its config.

Legend: ``b`` batch, ``H`` / ``W`` rows / columns, ``L`` classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnlab.dropout import Dropout
from attnlab.lab.images import RandomCropFlip
from attnlab.lab.tasks.images.encoders import ImageEncoderConfig, PatchesConfig, build_image_encoder

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

    Args:
        encoder: the image encoder (``dim``: its pooled width).
        num_classes: classes ``L``.
        augment: augmentation applied in training mode, or None.
        head_dropout: dropout before the linear head.
        size: ``(H, W)``, the image size the model was built for; other sizes are refused
            (a patch or pooling stride would silently drop the rows that do not fit, and the
            CNN would run at a scale it never saw). None: any size the encoder takes.
        channels: ``C``, 1 (greyscale) or 3 (RGB).

    Batch: ``"images"`` ``(b, C, H, W)`` float in the model's dtype, normalised as the task's
    ``normalise`` / ``collate`` make them (not uint8 pixels). ``model(batch)`` returns the
    logits ``(b, L)``; with ``need_weights=True`` an :class:`ImageOutput`.
    """

    def __init__(
        self, *, encoder: nn.Module, num_classes: int, augment: nn.Module | None = None,
        head_dropout: float = 0.0, size: tuple[int, int] | None = None, channels: int = 1,
    ) -> None:  # fmt: skip
        super().__init__()
        self.channels = channels
        self.augment = augment
        self.encoder = encoder
        self.head = nn.Sequential(Dropout(head_dropout), nn.Linear(encoder.dim, num_classes))
        self.size = None if size is None else (int(size[0]), int(size[1]))

    def _check_images(self, x: object) -> Tensor:
        """``x`` if it is a ``(b, C, H, W)`` float tensor in the model's dtype (any float dtype
        under autocast) at the model's size; else a ``ValueError`` naming ``batch['images']``,
        the expected and the given."""
        if not isinstance(x, Tensor):
            raise ValueError(f"batch['images']: expected a tensor (batch, {self.channels}, rows, cols), got {type(x).__name__}")  # fmt: skip
        if x.dim() != 4 or x.shape[1] != self.channels:
            raise ValueError(
                f"batch['images']: expected (batch, {self.channels}, rows, cols), got "
                f"{tuple(x.shape)}"
            )
        if not x.is_floating_point():
            raise ValueError(
                f"batch['images']: the model takes normalised float pixels, got dtype {x.dtype}; "
                "make them with the task's collate(examples) or normalise(images) (pixels / 255, "
                "then the dataset's mean and std)"
            )
        dtype = self.head[1].weight.dtype
        if x.dtype != dtype and not torch.is_autocast_enabled(x.device.type):
            raise ValueError(
                f"batch['images']: dtype {x.dtype} differs from the model's dtype {dtype}; "
                f"convert the images (images.to({dtype})) or the model (model.to({x.dtype}))"
            )
        if self.size is not None and tuple(x.shape[-2:]) != self.size:
            raise ValueError(
                f"batch['images']: expected images of (H, W) = {self.size}, the size this model "
                f"was built for; got {tuple(x.shape[-2:])}; resize them (the task's read_image "
                "does)"
            )
        return x

    def forward(self, batch: Mapping[str, Tensor], *, need_weights: bool = False):
        if "images" not in batch:
            raise ValueError(f"the batch needs 'images'; got keys {sorted(batch)}")
        x = self._check_images(batch["images"])
        if self.augment is not None:
            x = self.augment(x)
        enc = self.encoder(x, need_weights=need_weights)
        logits = self.head(enc.pooled)
        return ImageOutput(logits, enc.weights, enc.grid, enc.prefix) if need_weights else logits


def build_image_model(
    cfg: ImageModelConfig, *, size: tuple[int, int], num_classes: int, channels: int = 1
) -> ImageModel:
    """The :class:`ImageModel` ``cfg`` describes for ``size = (H, W)`` images of ``channels``
    channels (1: greyscale, 3: RGB)."""
    augment = RandomCropFlip(padding=cfg.crop, flip=cfg.flip) if (cfg.crop or cfg.flip) else None
    return ImageModel(
        encoder=build_image_encoder(cfg.encoder, size, channels), num_classes=num_classes,
        augment=augment, head_dropout=cfg.head_dropout, size=size, channels=channels,
    )  # fmt: skip
