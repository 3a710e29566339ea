"""Images as sets of vectors: the ``fashion`` and ``digits`` tasks, with the ``pixels``,
``patches`` (ViT), ``hybrid`` (CNN stem + attention) and ``cnn`` encoders."""

from .encoders import CNNConfig, HybridConfig, ImageEncoderConfig, PatchesConfig, PixelsConfig
from .model import ImageModel, ImageModelConfig, ImageOutput
from .task import DigitsTask, FashionTask, ImageExample, ImageOptions, ImageTask

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
