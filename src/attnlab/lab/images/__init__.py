"""Images as sets of vectors: the IDX reader, torch augmentation and image files.

An image of ``H x W`` pixels becomes ``H W`` vectors (one per pixel), ``(H / p)(W / p)``
vectors (one per ``p x p`` patch) or the vectors of a CNN's feature map; the models and tasks
built on that are in :mod:`attnlab.lab.tasks.images`::

    from attnlab.lab.images import read_idx
    x = read_idx("train-images-idx3-ubyte.gz", ndim=3)   # (60000, 28, 28) uint8
"""

from attnlab.lab.images.augment import RandomCropFlip, random_crop, random_hflip
from attnlab.lab.images.idx import IdxError, read_idx, write_idx
from attnlab.lab.images.io import IMAGE_SUFFIXES, load_image, resize_images

__all__ = [
    "IMAGE_SUFFIXES",
    "IdxError",
    "RandomCropFlip",
    "load_image",
    "random_crop",
    "random_hflip",
    "read_idx",
    "resize_images",
    "write_idx",
]
