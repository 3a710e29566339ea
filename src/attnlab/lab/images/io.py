"""Image files (PNG, JPEG, ... through Pillow) and arrays of images to the tensors the image
models take: greyscale ``(H, W)`` or RGB ``(3, H, W)`` at the model's size.

Legend: ``n`` images, ``H`` / ``W`` image rows / columns, ``C`` channels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["IMAGE_SUFFIXES", "load_image", "resize_images"]

#: the file name endings read as images (lower case)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
_LUMA = (0.299, 0.587, 0.114)  # ITU-R 601-2, as Pillow's convert("L")


def load_image(
    path: str | Path, size: tuple[int, int], *, invert: bool = False, channels: int = 1
) -> Tensor:
    """An image file as a float tensor in ``[0, 1]`` at the model's ``size``: ``(H, W)``
    greyscale, or ``(3, H, W)`` RGB with ``channels=3``.

    Colour images are converted to greyscale (Pillow's ITU-R 601-2 luma) or greyscale ones to
    RGB, then resized to ``size = (H, W)`` with bilinear filtering (no aspect-ratio preservation:
    the datasets' images fill their frame).

    Args:
        path: the image file.
        size: ``(rows, cols)`` the model was trained on.
        invert: ``1 - x`` (Fashion-MNIST draws light objects on black; a photo of a shirt on a
            white page needs inverting).
        channels: 1 (greyscale) or 3 (RGB).

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
    mode = {1: "L", 3: "RGB"}[channels]
    try:
        with Image.open(path) as img:
            pixels = img.convert(mode).resize((size[1], size[0]), Image.Resampling.BILINEAR)
            x = torch.from_numpy(np.asarray(pixels, dtype=np.float32) / 255.0)
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise ValueError(f"image {path}: not an image Pillow can read ({err})") from None
    x = x.permute(2, 0, 1).contiguous() if channels == 3 else x
    return 1.0 - x if invert else x


def resize_images(
    x: np.ndarray, size: tuple[int, int], channels: int, *, name: str = "x"
) -> Tensor:
    """An array of images ``(n, H, W)`` or ``(n, H, W, C)`` (C = 1, 3 or 4: alpha dropped) as
    uint8 ``(n, size)`` greyscale or ``(n, 3, size)`` RGB: pixels of a float array in ``[0, 1]``
    are scaled by 255, others must lie in ``0..255``; colour becomes greyscale by Pillow's luma
    weights, or greyscale is repeated as RGB; another size is resized bilinearly (antialiased).

    Raises:
        ValueError: naming ``name``: another shape, or values outside those ranges.
    """
    if x.ndim not in (3, 4) or (x.ndim == 4 and x.shape[3] not in (1, 3, 4)):
        raise ValueError(
            f"{name}: expected images (N, H, W) or (N, H, W, C) with C = 1, 3 or 4, got shape "
            f"{tuple(x.shape)}"
        )
    if not (np.issubdtype(x.dtype, np.number) or x.dtype == bool):
        raise ValueError(f"{name}: expected numbers, got dtype {x.dtype}")
    v = x.astype(np.float32)
    if v.size and not np.all(np.isfinite(v)):
        raise ValueError(f"{name}: holds NaN or infinite pixels")
    top = float(v.max()) if v.size else 0.0
    if np.issubdtype(x.dtype, np.floating) and top <= 1.0:
        v = v * 255.0
    if v.size and (float(v.min()) < 0 or float(v.max()) > 255):
        raise ValueError(
            f"{name}: pixels from {float(v.min()):g} to {top:g}; expected 0..255 (or floats in "
            "0..1)"
        )
    t = torch.from_numpy(v if v.ndim == 4 else v[..., None]).permute(0, 3, 1, 2)  # (n, C, H, W)
    t = t[:, :3]
    if channels == 1 and t.shape[1] == 3:
        t = (t * torch.tensor(_LUMA).view(1, 3, 1, 1)).sum(1, keepdim=True)
    elif channels == 3 and t.shape[1] == 1:
        t = t.expand(-1, 3, -1, -1)
    if tuple(t.shape[-2:]) != tuple(size) and t.shape[0]:
        t = F.interpolate(t, size=tuple(size), mode="bilinear", antialias=True,
                          align_corners=False)  # fmt: skip
    out = t.round().clamp(0, 255).to(torch.uint8)
    return out[:, 0] if channels == 1 else out.contiguous()
