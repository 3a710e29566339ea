"""Image files (PNG, JPEG, ... through Pillow) to the greyscale tensors the image models take.

Legend: ``H`` / ``W`` image rows / columns.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor

__all__ = ["load_image"]


def load_image(path: str | Path, size: tuple[int, int], *, invert: bool = False) -> Tensor:
    """An image file as a ``(H, W)`` float tensor in ``[0, 1]`` at the model's ``size``.

    Colour images are converted to greyscale (Pillow's ITU-R 601-2 luma), then resized to
    ``size = (H, W)`` with bilinear filtering (no aspect-ratio preservation: the datasets' images
    fill their frame).

    Args:
        path: the image file.
        size: ``(rows, cols)`` the model was trained on.
        invert: ``1 - x`` (Fashion-MNIST draws light objects on black; a photo of a shirt on a
            white page needs inverting).

    Raises:
        ValueError: a directory, or a file that is not an image Pillow can read (names it).
        FileNotFoundError: no such file.
    """
    from PIL import Image, UnidentifiedImageError

    path = Path(path)
    if path.is_dir():
        raise ValueError(f"image {path}: a directory, not an image file")
    if not path.is_file():
        raise FileNotFoundError(f"image {path}: no such file")
    try:
        with Image.open(path) as img:
            grey = img.convert("L").resize((size[1], size[0]), Image.Resampling.BILINEAR)
    except (UnidentifiedImageError, OSError) as err:
        raise ValueError(f"image {path}: not an image Pillow can read ({err})") from None
    x = torch.from_numpy(np.asarray(grey, dtype=np.float32) / 255.0)
    return 1.0 - x if invert else x
