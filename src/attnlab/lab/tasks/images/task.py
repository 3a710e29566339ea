"""Image classification tasks: ``fashion`` (Fashion-MNIST, 28x28) and ``digits``
(scikit-learn's 8x8 digits, for tiny fast runs).

An example is one image (uint8) and its label. The training split is the official train set
less a fixed seeded validation split (``task_options.val_size`` images, the ``dev`` split);
``task_options.train_size`` keeps a nested class-balanced subset of the rest (1000 inside 5000
inside 20000: :func:`.data.balanced_subset`), for data-efficiency curves. ``collate`` scales
pixels to ``[0, 1]`` and normalises with the dataset's mean and standard deviation; the model
augments in training (random crop, flips: :class:`~attnlab.lab.images.RandomCropFlip`), so
``collate`` stays a pure function of its examples.

``predict`` / ``show`` take image files (PNG, JPEG, ...: greyscale, resized to the model's
size; ``--invert`` for dark-on-light pictures) or ``--index N`` into the test set.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.images import load_image
from attnlab.lab.tasks.base import Task, classification_metrics, options_as
from attnlab.lab.tasks.commands import TaskCommands
from attnlab.lab.tasks.images.data import (
    FASHION_CLASSES,
    ImageSet,
    balanced_subset,
    load_digits_sets,
    load_fashion,
    validation_split,
)
from attnlab.lab.tasks.images.model import ImageModelConfig, build_image_model

__all__ = ["DigitsTask", "FashionTask", "ImageExample", "ImageOptions", "ImageTask"]


class ImageExample(NamedTuple):
    """One image: ``image`` ``(H, W)`` uint8 (``(3, H, W)`` for RGB), ``label`` (None for a
    user's file), ``name``."""

    image: Tensor
    label: int | None
    name: str


@dataclass
class ImageOptions:
    """Options of the image tasks.

    Args:
        train_size: keep a class-balanced subset of this many training images (0: all);
            subsets of one ``subset_seed`` are nested.
        val_size: images held out of the train set as the dev split (-1: the task's default,
            5000 for fashion, 180 for digits).
        split_seed: seed of the validation split (fixed: every run validates on the same set).
        subset_seed: seed of the subsets' order.
    """

    train_size: int = 0
    val_size: int = -1
    split_seed: int = 0
    subset_seed: int = 0

    def __post_init__(self) -> None:
        if self.train_size < 0:
            raise ValueError(f"task_options.train_size must be >= 0, got {self.train_size}")


class ImageTask(Task, TaskCommands):
    """Base class of the image tasks (module docstring). A subclass sets the class attributes
    and :meth:`load`."""

    unit = "img"
    classes: ClassVar[list[str]] = []
    size: ClassVar[tuple[int, int]] = (28, 28)
    channels: ClassVar[int] = 1  # 1: greyscale (H, W) images; 3: RGB (3, H, W)
    mean: ClassVar[float] = 0.5
    std: ClassVar[float] = 0.5
    default_val_size: ClassVar[int] = 5000

    def __init__(self) -> None:
        self._splits: dict[str, list[ImageExample]] = {}
        self._test: ImageSet | None = None

    # ------------------------------------------------------------------ configuration
    @classmethod
    def default_model_config(cls) -> ImageModelConfig:
        return ImageModelConfig()

    @classmethod
    def default_options(cls) -> ImageOptions:
        return ImageOptions()

    @classmethod
    def default_train_options(cls) -> dict[str, Any]:
        """AdamW with a cosine schedule after a 5% warm-up, batches of 128."""
        return {"epochs": 10, "batch_size": 128, "lr": 1e-3, "weight_decay": 0.05,
                "warmup_fraction": 0.05, "schedule": "cosine", "log_every": 50}  # fmt: skip

    # ------------------------------------------------------------------ data
    @classmethod
    def load(cls) -> tuple[ImageSet, ImageSet]:
        """The full train and test sets."""
        raise NotImplementedError

    def setup(self, options: ImageOptions) -> None:
        opts = options_as(ImageOptions, options)
        train, test = self.load()
        val = self.default_val_size if opts.val_size < 0 else opts.val_size
        keep, dev = validation_split(len(train), val, seed=opts.split_seed)
        rest = train.take(keep)
        if opts.train_size:
            rest = rest.take(balanced_subset(rest.labels, opts.train_size, seed=opts.subset_seed))
        self._test = test
        self._splits = {"train": self._examples(rest, "train"),
                        "dev": self._examples(train.take(dev), "dev"),
                        "test": self._examples(test, "test")}  # fmt: skip

    @staticmethod
    def _examples(data: ImageSet, split: str) -> list[ImageExample]:
        labels = data.labels.tolist()
        return [ImageExample(img, y, f"{split}:{i}")
                for i, (img, y) in enumerate(zip(data.images.unbind(0), labels))]  # fmt: skip

    def splits(self) -> dict[str, list]:
        return self._splits

    def normalise(self, images: Tensor) -> Tensor:
        """uint8 (or ``[0, 1]`` float) ``(b, H, W)`` -> normalised ``(b, 1, H, W)`` float (RGB:
        ``(b, 3, H, W)`` -> the same shape)."""
        x = images.float() / 255.0 if images.dtype == torch.uint8 else images.float()
        x = (x - self.mean) / self.std
        return x.unsqueeze(1) if x.dim() == 3 else x

    def collate(self, examples: list) -> dict[str, Tensor]:
        images = torch.stack([e.image for e in examples])  # (b, H, W) or (b, 3, H, W)
        batch = {"images": self.normalise(images),
                 "lengths": torch.full((len(examples),), images.shape[-2] * images.shape[-1])}  # fmt: skip
        if all(e.label is not None for e in examples):
            batch["labels"] = torch.tensor([e.label for e in examples], dtype=torch.long)
        return batch

    # ------------------------------------------------------------------ model, loss, metric
    def build_model(self, model_config: ImageModelConfig) -> nn.Module:
        cfg = options_as(ImageModelConfig, model_config)
        return build_image_model(cfg, size=self.size, num_classes=len(self.classes),
                                 channels=self.channels)  # fmt: skip

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        logits = model(batch).float()
        return F.cross_entropy(logits, batch["labels"], reduction="sum"), len(batch["labels"])

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        return classification_metrics((model(b), b["labels"]) for b in batches)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "size": list(self.size)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if list(state.get("classes", self.classes)) != list(self.classes):
            raise ValueError(
                f"{self._label()}: the checkpoint's classes {state['classes']} differ from the "
                f"task's {self.classes}"
            )

    # ------------------------------------------------------------------ commands
    def add_arguments(self, parser: argparse.ArgumentParser, command: str) -> None:
        parser.add_argument("--index", dest="indices", type=int, action="append", default=[],
                            help="an image of the test set by index (repeatable)")  # fmt: skip
        parser.add_argument("--invert", action="store_true",
                            help="invert image files (dark object on a light background)")  # fmt: skip
        if command == "show":
            parser.add_argument("--query", default="cls",
                                help="whose attention to draw: 'cls' (default; mean over tokens "
                                "without one) or a token of the grid as ROW,COL")  # fmt: skip

    def command_inputs(self, texts: Sequence[str], options: Mapping[str, Any]) -> list:
        """Test-set images (``--index``), then image files, one per argument (a file name may
        hold spaces: it is never split)."""
        inputs = [self.test_example(i) for i in options.get("indices") or []]
        invert = bool(options.get("invert"))
        inputs += [self.read_image(t, invert=invert) for t in texts]
        if not inputs:
            raise ValueError(f"{self._label()}: no input: pass image files or --index N")
        return inputs

    def test_example(self, index: int) -> ImageExample:
        """Image ``index`` of the test set, with its label."""
        if self._test is None:
            self._test = self.load()[1]
        n = len(self._test)
        if not 0 <= index < n:
            raise ValueError(
                f"{self._label()}: --index {index}: the test set has images 0 to {n - 1}"
            )
        return ImageExample(
            self._test.images[index], int(self._test.labels[index]), f"test:{index}"
        )

    def read_image(self, path: str, *, invert: bool = False) -> ImageExample:
        """An image file at the model's size, as uint8 (:func:`attnlab.lab.images.load_image`)."""
        try:
            x = load_image(path, self.size, invert=invert, channels=self.channels)
        except FileNotFoundError:
            raise ValueError(
                f"{self._label()}: expected an image file, got {path!r} (no such file)"
            ) from None
        return ImageExample((x * 255).round().to(torch.uint8), None, path)

    def parse_input(self, text: str) -> ImageExample:
        return self.read_image(text)

    def encode_inputs(self, inputs: Sequence[ImageExample]) -> dict[str, Tensor]:
        return self.collate(list(inputs))

    @torch.no_grad()
    def predict(
        self, model: nn.Module, inputs: Sequence[ImageExample], **options: Any
    ) -> list[dict]:
        """``{"input", "label", "probabilities"}`` per image (and ``"gold"`` for test images)."""
        model.eval()
        probs = model(self.encode_inputs(inputs)).float().softmax(-1)
        records = []
        for x, p in zip(inputs, probs):
            rec: dict[str, Any] = {"input": x.name, "label": self.classes[int(p.argmax())],
                                   "probabilities": {c: round(float(q), 4) for c, q in zip(self.classes, p)}}  # fmt: skip
            if x.label is not None:
                rec["gold"] = self.classes[x.label]
            records.append(rec)
        return records

    def format_text(self, record: Mapping[str, Any]) -> str:
        top = sorted(record["probabilities"].items(), key=lambda kv: -kv[1])[:3]
        gold = f"; gold {record['gold']}" if "gold" in record else ""
        return f"{record['input']}: {record['label']} ({', '.join(f'{c} {p:.2f}' for c, p in top)}{gold})"

    def attention_view(self, model: nn.Module, input: ImageExample, *, title: str = "",
                       **options: Any):  # fmt: skip
        """The image and its token grid; a cell's attention overlaid on hover, rollout
        included (:func:`.view.image_view`)."""
        from attnlab.lab.tasks.images.view import image_view

        return image_view(self, model, input, title=title)

    def draw(self, model: nn.Module, input: ImageExample, out: str | Path, *, title: str = "",
             query: str = "cls", **options: Any) -> Path:  # fmt: skip
        """The image, the last layer's attention of ``query`` per head overlaid on it, and the
        attention rollout across layers (:mod:`.draw`)."""
        from attnlab.lab.tasks.images.draw import draw_image_attention

        return draw_image_attention(self, model, input, out, title=title, query=query)


class FashionTask(ImageTask):
    """Fashion-MNIST: 28x28 greyscale clothes, 10 classes; 55k train / 5k dev / 10k test."""

    name = "fashion"
    classes = FASHION_CLASSES
    size = (28, 28)
    mean, std = 0.2860, 0.3530  # of the 60,000 training images
    default_val_size = 5000

    @classmethod
    def load(cls) -> tuple[ImageSet, ImageSet]:
        return load_fashion()


class DigitsTask(ImageTask):
    """scikit-learn's 8x8 digits: 1,797 images, 10 classes; a seeded 20% test split, 180 dev.
    Tiny and fast: for tests and demos."""

    name = "digits"
    classes = [str(d) for d in range(10)]
    size = (8, 8)
    mean, std = 0.30, 0.38
    default_val_size = 180

    @classmethod
    def default_model_config(cls) -> ImageModelConfig:
        from attnlab.lab.tasks.images.encoders import PatchesConfig

        return ImageModelConfig(encoder=PatchesConfig(patch=2, dim=32, depth=2, ff_hidden=64),
                                crop=1, flip=False)  # fmt: skip

    @classmethod
    def load(cls) -> tuple[ImageSet, ImageSet]:
        return load_digits_sets()
