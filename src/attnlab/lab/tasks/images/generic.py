"""``image-classify``: one label per image of your own (N -> 1), no code:
``attnlab train image-classify --data.train=my_images/``.

The image tasks' models (``fashion``'s by default: 4x4 patches, a Transformer, the CLS token) on
images resized to ``--data.size`` (28) in ``--data.channels`` (1: greyscale, 3: RGB), pixels
scaled to [0, 1] and normalised by the train split's mean and standard deviation. The classes
(train's labels), the size, the channels and the normalisation are kept in the run's checkpoint,
the splits as ``.npz`` files in ``RUN/data/`` (:mod:`.files`), so ``eval``, ``predict`` (image
files, or ``--index N`` of the kept test split) and ``show`` need the run alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from attnlab.lab.data.own import (
    SPLITS,
    check_labels,
    complete_splits,
    label_order,
    save_splits,
    saved_splits,
)
from attnlab.lab.tasks.base import options_as
from attnlab.lab.tasks.images.files import (
    ImageDataOptions,
    as_image_options,
    read_images,
    render_images,
)
from attnlab.lab.tasks.images.task import ImageExample, ImageTask

__all__ = ["ImageClassifyOptions", "ImageClassifyTask"]


@dataclass
class ImageClassifyOptions:
    """Options of the ``image-classify`` task (one label per image of your own).

    Args:
        data: your images: a folder with one sub-folder of image files per class, or a .npz
            of images x and labels y; resized to data.size in data.channels.
    """

    data: ImageDataOptions = field(default_factory=ImageDataOptions)


class ImageClassifyTask(ImageTask):
    """One label per image of your own (N -> 1), accuracy."""

    name = "image-classify"

    def __init__(self) -> None:
        super().__init__()
        self.classes: list[str] = []
        self.size = (28, 28)
        self.channels = 1
        self.norm: tuple[float, float] | None = None  # the train split's pixel mean and std
        self._saved: dict[str, Path] | None = None  # the splits the run kept (load_run_data)
        self._kept: tuple[ImageDataOptions, dict[str, str]] | None = None

    @classmethod
    def default_options(cls) -> ImageClassifyOptions:
        return ImageClassifyOptions()

    @property
    def mean(self) -> float:  # type: ignore[override]
        return self.norm[0] if self.norm else 0.5

    @property
    def std(self) -> float:  # type: ignore[override]
        return self.norm[1] if self.norm else 0.5

    def setup(self, options: ImageClassifyOptions) -> None:
        data = as_image_options(options_as(ImageClassifyOptions, options).data)
        if self._saved is None and not data.train:
            raise ValueError(
                f"task {self.name!r} trains on your own images: give --data.train=FOLDER (one "
                "sub-folder of image files per class) or =FILE.npz (images x, labels y), e.g. "
                f"attnlab train {self.name} --data.train=my_images/; dev and test are cut from "
                "it unless --data.dev / --data.test name them"
            )
        self.size, self.channels = (data.size, data.size), data.channels
        if self._saved is not None:
            read = {s: read_images(str(p), data, s).examples() for s, p in self._saved.items()}
        else:
            given = {s: getattr(data, s) for s in SPLITS if getattr(data, s)}
            read = {s: read_images(f, data, s).examples() for s, f in given.items()}
            read, sources, _ = complete_splits(read, given, data.split, data.seed)
            self._kept = (data, sources)
        if not self.classes:
            self.classes = label_order(label for _, label, _, _ in read["train"])
        for split in ("dev", "test"):
            check_labels(((label, where) for _, label, _, where in read[split]), self.classes,
                         split)  # fmt: skip
        index = {c: i for i, c in enumerate(self.classes)}
        if self.norm is None:
            x = torch.stack([img for img, _, _, _ in read["train"]]).float() / 255.0
            self.norm = (float(x.mean()), max(float(x.std()), 1e-3))
        self._splits = {s: [ImageExample(img, index[label], name) for img, label, name, _ in rows]
                        for s, rows in read.items()}  # fmt: skip

    # ------------------------------------------------------------------ the run's data
    def load_run_data(self, run_dir: str | Path) -> None:
        """Read the splits from what the run ``run_dir`` kept, if it did."""
        self._saved = saved_splits(run_dir)

    def save_run_data(self, run_dir: str | Path) -> None:
        """Keep the splits (resized images, labels, names) in ``run_dir/data/``."""
        if self._kept is None:
            return
        data, sources = self._kept
        shape = self.size if self.channels == 1 else (self.channels, *self.size)

        def render(split: list[ImageExample]) -> bytes:
            images = (torch.stack([e.image for e in split]) if split
                      else torch.zeros((0, *shape), dtype=torch.uint8))  # fmt: skip
            return render_images(images, [self.classes[e.label] for e in split],
                                 [e.name for e in split])  # fmt: skip

        save_splits(run_dir, self._splits, render, ".npz", sources, data)

    def test_example(self, index: int) -> ImageExample:
        """Image ``index`` of the run's kept test split, with its label."""
        test = self._splits.get("test")
        if test is None:
            if self._saved is None:
                raise ValueError(f"{self._label()}: --index needs a run (its kept test split)")
            kept = ImageDataOptions(size=self.size[0], channels=self.channels)
            rows = read_images(str(self._saved["test"]), kept, "test").examples()
            index_of = {c: i for i, c in enumerate(self.classes)}
            test = [ImageExample(img, index_of[label], name) for img, label, name, _ in rows]
            self._splits = {**self._splits, "test": test}
        if not 0 <= index < len(test):
            raise ValueError(
                f"{self._label()}: --index {index}: the test split has images 0 to {len(test) - 1}"
            )
        return ImageExample(test[index].image, test[index].label, f"test:{index}")

    def read_examples(self, path: str | Path) -> list[ImageExample]:
        """``eval --data``: a class folder or ``.npz``, at the run's size, with its classes."""
        options = ImageDataOptions(size=self.size[0], channels=self.channels)
        rows = read_images(str(path), options, "eval").examples()
        check_labels(((label, where) for _, label, _, where in rows), self.classes, "eval")
        index = {c: i for i, c in enumerate(self.classes)}
        return [ImageExample(img, index[label], name) for img, label, name, _ in rows]

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "size": list(self.size),
                "channels": self.channels, "norm": list(self.norm or (0.5, 0.5))}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.classes = list(state["classes"])
        self.size = (int(state["size"][0]), int(state["size"][1]))
        self.channels = int(state.get("channels", 1))
        self.norm = (float(state["norm"][0]), float(state["norm"][1]))
