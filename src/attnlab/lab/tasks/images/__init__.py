"""Images as sets of vectors: the ``fashion`` and ``digits`` tasks, with the ``pixels``,
``patches`` (ViT), ``hybrid`` (CNN stem + attention) and ``cnn`` encoders."""

from attnlab.lab.tasks.images.encoders import (
    CNNConfig,
    HybridConfig,
    ImageEncoderConfig,
    PatchesConfig,
    PixelsConfig,
)
from attnlab.lab.tasks.images.model import ImageModel, ImageModelConfig, ImageOutput
from attnlab.lab.tasks.images.task import (
    DigitsTask,
    FashionTask,
    ImageExample,
    ImageOptions,
    ImageTask,
)

__all__ = [
    "CNNConfig",
    "DigitsTask",
    "FashionTask",
    "HybridConfig",
    "ImageEncoderConfig",
    "ImageExample",
    "ImageModel",
    "ImageModelConfig",
    "ImageOptions",
    "ImageOutput",
    "ImageTask",
    "PatchesConfig",
    "PixelsConfig",
]
