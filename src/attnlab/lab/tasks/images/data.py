"""The image datasets as tensors, the fixed validation split and the nested class-balanced
train subsets.

Legend: ``n`` images, ``H`` / ``W`` rows / columns.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from attnlab.lab.data.registry import dataset_path
from attnlab.lab.images import read_idx

__all__ = [
    "FASHION_CLASSES",
    "ImageSet",
    "balanced_subset",
    "load_digits_sets",
    "load_fashion",
    "validation_split",
]

FASHION_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                   "Sneaker", "Bag", "Ankle boot"]  # fmt: skip


class ImageSet(NamedTuple):
    """Images and their labels.

    Attributes:
        images: ``(n, H, W)`` uint8 (0 = black).
        labels: ``(n,)`` long class indices.
    """

    images: Tensor
    labels: Tensor

    def take(self, index: Tensor) -> ImageSet:
        return ImageSet(self.images[index], self.labels[index])

    def __len__(self) -> int:  # type: ignore[override]
        return int(self.labels.shape[0])


def load_fashion() -> tuple[ImageSet, ImageSet]:
    """Fashion-MNIST's train (60,000) and test (10,000) sets, from the data registry (the
    Debian package's copy, a mirror, the cache or a download; :mod:`attnlab.lab.data.resolve`)."""

    def read(split: str) -> ImageSet:
        images = read_idx(dataset_path("fashion-mnist", f"{split}-images"), ndim=3)
        labels = read_idx(dataset_path("fashion-mnist", f"{split}-labels"), ndim=1)
        if images.shape[0] != labels.shape[0]:
            raise ValueError(
                f"fashion-mnist {split}: {images.shape[0]} images but {labels.shape[0]} labels"
            )
        return ImageSet(images, labels.long())

    return read("train"), read("test")


def load_digits_sets(test_fraction: float = 0.2, seed: int = 0) -> tuple[ImageSet, ImageSet]:
    """scikit-learn's 1,797 8x8 digits (values 0..16 scaled to 0..255), split into train and
    a fixed seeded test set (the data set has no official split)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.from_numpy(digits.images * (255.0 / 16.0)).round().to(torch.uint8)
    labels = torch.from_numpy(digits.target).long()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    n_test = int(round(test_fraction * len(labels)))
    full = ImageSet(images, labels)
    return full.take(order[n_test:]), full.take(order[:n_test])


def validation_split(n: int, size: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """A fixed seeded split of ``n`` training images: ``(train_index, dev_index)`` with
    ``size`` dev images, the same for every run with this ``seed``."""
    if not 0 <= size < n:
        raise ValueError(f"task_options.val_size: expected 0 <= size < {n} images, got {size}")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    return order[size:].sort().values, order[:size].sort().values


def balanced_subset(labels: Tensor, size: int, seed: int = 0) -> Tensor:
    """Indices of ``size`` images, class-balanced and nested.

    Each class's images are put in one seeded order (independent of ``size``); the subset takes
    the first ``size // C`` of each class (the first ``size % C`` classes one more). A smaller
    subset is therefore always a part of a larger one (1k inside 5k inside 20k).

    Raises:
        ValueError: ``size`` is not positive, or some class has too few images.
    """
    classes = labels.unique()
    if size <= 0:
        raise ValueError(f"task_options.train_size: expected a positive size, got {size}")
    gen = torch.Generator().manual_seed(seed)
    per = [size // len(classes) + (i < size % len(classes)) for i in range(len(classes))]
    out = []
    for c, k in zip(classes.tolist(), per):
        members = (labels == c).nonzero().squeeze(1)
        order = members[torch.randperm(len(members), generator=gen)]
        if k > len(order):
            raise ValueError(
                f"task_options.train_size={size}: class {c} has {len(order)} training images, "
                f"{k} needed for a balanced subset; use a size of at most "
                f"{len(classes) * min(int((labels == x).sum()) for x in classes.tolist())}"
            )
        out.append(order[:k])
    return torch.cat(out).sort().values
