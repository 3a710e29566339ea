"""A user's own images as an image classification task's data (``--data.train=FOLDER``): the
options, the two layouts, and the splits a run keeps.

Two layouts, for ``--data.train``, ``--data.dev`` and ``--data.test`` alike:

* a folder with one sub-folder per class of image files (PNG, JPEG, BMP, GIF, TIFF, WebP; the
  sub-folder's name is the label; other files are ignored, and so are hidden ones);
* a ``.npz`` file (``numpy.savez``; read without pickles) holding ``x``, images ``(N, H, W)`` or
  ``(N, H, W, C)`` (uint8 0..255 or floats in 0..1), and ``y``, ``N`` labels (numbers or
  strings).

Every image becomes ``--data.size`` x ``--data.size`` pixels (bilinear, the aspect ratio not
kept) in ``--data.channels`` channels (1: greyscale by Pillow's luma weights, 3: RGB). A run
keeps its splits in ``RUN/data/`` as ``.npz`` files of that layout (uint8 images already
resized, string labels, ``names``): the run needs no original file afterwards.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from attnlab.lab.data.own import FileSplits, as_options
from attnlab.lab.images import IMAGE_SUFFIXES, load_image, resize_images

__all__ = ["ImageDataOptions", "LabelledImages", "as_image_options", "read_images",
           "render_images"]  # fmt: skip


@dataclass
class ImageDataOptions(FileSplits):
    """Your own images (``--data.NAME`` for short).

    Args:
        train: a folder with one sub-folder of image files per class (its name is the label),
            or a .npz file holding images x (N, H, W) or (N, H, W, C) and labels y.
        dev: the dev images, laid out as train (none: cut from train, see split).
        test: the test images, laid out as train (none: cut from train, see split).
        split: the fractions of the train images cut as dev and test when those are not given
            (seeded by seed; 0 cuts none); the cut splits are saved in the run.
        seed: seeds the cut of dev and test from train.
        size: every image is resized to size x size pixels (bilinear; the model's input).
        channels: 1 (greyscale: colour converted by Pillow's luma weights) or 3 (RGB).
    """

    size: int = 28
    channels: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.size < 1:
            raise ValueError(f"data.size: expected a side in pixels > 0, got {self.size}")
        if self.channels not in (1, 3):
            raise ValueError(f"data.channels: 1 (greyscale) or 3 (RGB), got {self.channels}")


def as_image_options(value: Any) -> ImageDataOptions:
    """``value`` (an :class:`ImageDataOptions` or a mapping of its fields) as one."""
    return as_options(ImageDataOptions, value)


class LabelledImages(NamedTuple):
    """Images read from one source: ``images`` uint8 ``(n, H, W)`` or ``(n, 3, H, W)``, their
    string ``labels``, their ``names`` (file paths, or ``FILE.npz:i``) and ``where`` each was
    named, for error messages."""

    images: Tensor
    labels: list[str]
    names: list[str]
    where: list[str]

    def examples(self) -> list[tuple[Tensor, str, str, str]]:
        """``(image, label, name, where)`` per image (what the cut of dev and test draws)."""
        return list(zip(self.images.unbind(0), self.labels, self.names, self.where))


def read_images(source: str, options: ImageDataOptions, split: str = "train") -> LabelledImages:
    """The labelled images of a class folder or a ``.npz`` file (module docstring), at the
    options' size and channels.

    Raises:
        FileNotFoundError: no such file or folder (naming the option).
        ValueError: one line naming the file or folder: no class folders, a class folder with
            no image, an image Pillow cannot read, a ``.npz`` without ``x`` or ``y``, of another
            shape, or with as many labels as images.
    """
    path = Path(source)
    size = (options.size, options.size)
    if path.is_dir():
        return _class_folders(path, size, options.channels)
    if not path.is_file():
        raise FileNotFoundError(f"--data.{split}: no such file or folder {source}")
    return _npz(path, size, options.channels)


def _class_folders(root: Path, size: tuple[int, int], channels: int) -> LabelledImages:
    classes = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        raise ValueError(
            f"{root}: expected one sub-folder of images per class (its name is the label), "
            "found none; or give a .npz file of images x and labels y"
        )
    images, labels, names = [], [], []
    for folder in classes:
        files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")
                       and p.suffix.lower() in IMAGE_SUFFIXES)  # fmt: skip
        if not files:
            raise ValueError(
                f"{folder}: the class folder {folder.name!r} holds no image files "
                f"({', '.join(IMAGE_SUFFIXES)})"
            )
        for f in files:
            x = load_image(f, size, channels=channels)
            images.append((x * 255).round().to(torch.uint8))
            labels.append(folder.name)
            names.append(str(f))
    return LabelledImages(torch.stack(images), labels, names, list(names))


def _npz(path: Path, size: tuple[int, int], channels: int) -> LabelledImages:
    if not zipfile.is_zipfile(path):
        raise ValueError(
            f"{path}: not a .npz file numpy can read (expected numpy.savez's zip of arrays x and "
            "y), nor a folder of class folders"
        )
    try:
        with np.load(path, allow_pickle=False) as archive:
            held = sorted(archive.files)
            missing = [k for k in ("x", "y") if k not in held]
            if missing:
                raise ValueError(
                    f"{path}: no array {' or '.join(map(repr, missing))} in the .npz (it holds "
                    f"{', '.join(held) or 'nothing'}); expected images x (N, H, W) or "
                    "(N, H, W, C) and labels y (N,)"
                )
            x, y = archive["x"], archive["y"]
            names = archive["names"] if "names" in held else None
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        raise ValueError(f"{path}: not a .npz file numpy can read ({err})") from None
    except ValueError as err:
        if str(err).startswith(str(path)):
            raise
        raise ValueError(f"{path}: a .npz numpy cannot read without pickles ({err}); save "
                         "numeric or string arrays") from None  # fmt: skip
    if y.ndim != 1:
        raise ValueError(f"{path}: y: expected one label per image (N,), got shape {y.shape}")
    if len(x) != len(y):
        raise ValueError(f"{path}: x holds {len(x)} images but y {len(y)} labels")
    if len(y) == 0:
        raise ValueError(f"{path}: no images")
    images = resize_images(x, size, channels, name=f"{path}: x")
    labels = [_label(v) for v in y.tolist()]
    names = [str(n) for n in names.tolist()] if names is not None else None
    where = [f"{path}:{i}" for i in range(len(labels))]
    return LabelledImages(images, labels, names or list(where), where)


def _label(value: Any) -> str:
    """A label of ``y`` as a string (``3.0`` as ``3``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def render_images(images: Tensor, labels: list[str], names: list[str]) -> bytes:
    """A split as the ``.npz`` a run keeps: ``x`` ``(n, H, W)`` or ``(n, H, W, 3)`` uint8,
    ``y`` and ``names`` as string arrays (readable by :func:`read_images`)."""
    x = images.numpy()
    x = x.transpose(0, 2, 3, 1) if x.ndim == 4 else x
    buf = io.BytesIO()
    np.savez_compressed(buf, x=x, y=np.array(labels, dtype=str), names=np.array(names, dtype=str))
    return buf.getvalue()
