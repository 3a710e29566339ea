"""The image model on inputs it cannot take (issue 32): raw pixels, another float dtype than the
model's, another image size than it was built for. Each gets one line that names
batch['images'], the expected and the given, never torch's error or a silently wrong answer."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.tasks.images import DigitsTask, ImageModelConfig
from attnlab.lab.tasks.images.encoders import (
    CNNConfig,
    HybridConfig,
    PatchesConfig,
    PixelsConfig,
    build_image_encoder,
)
from attnlab.lab.tasks.images.model import build_image_model

CONFIGS = {
    "pixels": PixelsConfig(dim=8, depth=1, heads=2),
    "patches": PatchesConfig(patch=2, dim=8, depth=1, heads=2),
    "hybrid": HybridConfig(stem=4, stem_depth=1, downsample=2, stem_tail=0, dim=8, heads=2,
                           ff_hidden=8),
    "cnn": CNNConfig(channels=(4, 8)),
}  # fmt: skip
KINDS = sorted(CONFIGS)


def model(kind: str, *, train: bool = False):
    torch.manual_seed(0)
    m = build_image_model(ImageModelConfig(encoder=CONFIGS[kind]), size=(8, 8), num_classes=10)
    return m.train(train)


def message(m, images) -> str:
    with pytest.raises(ValueError) as err:
        m({"images": images})
    text = str(err.value)
    assert "\n" not in text and text.startswith("batch['images']: ")
    return text


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int64])
@pytest.mark.parametrize("train", [False, True])  # training mode augments first: check before
def test_raw_pixels_point_at_the_tasks_normalise(kind, dtype, train):
    text = message(model(kind, train=train), torch.zeros(2, 1, 8, 8, dtype=dtype))
    assert f"normalised float pixels, got dtype {dtype}" in text
    assert "collate" in text and "normalise" in text


@pytest.mark.parametrize("kind", KINDS)
def test_another_float_dtype_names_both(kind):
    text = message(model(kind), torch.zeros(2, 1, 8, 8, dtype=torch.float64))
    assert "dtype torch.float64 differs from the model's dtype torch.float32" in text
    assert "images.to(torch.float32)" in text and "model.to(torch.float64)" in text


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("size", [(9, 9), (12, 12), (6, 6), (8, 10)])
def test_another_size_names_the_expected_one(kind, size):
    text = message(model(kind), torch.zeros(2, 1, *size))
    assert "(H, W) = (8, 8)" in text and f"got {size}" in text


@pytest.mark.parametrize("kind", ["patches", "hybrid"])
def test_the_encoder_alone_refuses_a_size_its_stride_would_crop(kind):
    """A stride-2 patch embedding maps 9x9 to the 4x4 grid of 8x8: the last row and column
    would be dropped without a word."""
    enc = build_image_encoder(CONFIGS[kind], (8, 8))
    with pytest.raises(ValueError, match=r"^x: expected images of \(H, W\) = \(8, 8\).*got \(9, 9\)$"):  # fmt: skip
        enc(torch.zeros(1, 1, 9, 9))


@pytest.mark.parametrize("kind", KINDS)
def test_what_the_task_makes_is_taken(kind):
    task = DigitsTask()
    images = torch.randint(0, 256, (3, 8, 8), dtype=torch.uint8)
    batch = task.normalise(images)
    assert model(kind)({"images": batch}).shape == (3, 10)
    double = model(kind).double()
    assert double({"images": batch.double()}).dtype == torch.float64
