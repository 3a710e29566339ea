"""The picture of ``attnlab show`` for images: one colour bar for every head and one for the
rollout, the prediction in the title, pixel axes, and keys outside a 2-D window hatched."""

from __future__ import annotations

import torch

from attnlab.lab.tasks.images import DigitsTask, ImageModelConfig
from attnlab.lab.tasks.images.draw import image_attention_figure, masked_keys
from attnlab.lab.tasks.images.encoders import PatchesConfig, PixelsConfig
from attnlab.lab.tasks.images.task import ImageExample


def _model(encoder):
    torch.manual_seed(0)
    return DigitsTask().build_model(ImageModelConfig(encoder=encoder)).eval()


def _image(label=6):
    pixels = torch.randint(0, 256, (8, 8), generator=torch.Generator().manual_seed(0))
    return ImageExample(pixels.to(torch.uint8), label, "test:0")


def _heat(fig, title):
    (ax,) = [ax for ax in fig.axes if ax.get_title().startswith(title)]
    return ax


def test_colour_bars_prediction_and_pixel_axes():
    task, model = DigitsTask(), _model(PatchesConfig(dim=16, depth=2, heads=2, patch=2))
    fig = image_attention_figure(task, model, _image(), title="digits: --index 0")
    heads = [_heat(fig, f"head {h}") for h in (1, 2)]
    assert len({id(ax.images[-1].norm) for ax in heads}) == 1  # one scale for the heads
    bars = {ax.get_ylabel(): ax._colorbar for ax in fig.axes if getattr(ax, "_colorbar", None)}
    assert sorted(bars) == ["attention weight\n(every head)", "rollout weight"]
    assert bars["attention weight\n(every head)"].norm is heads[0].images[-1].norm
    assert bars["rollout weight"].norm is _heat(fig, "rollout").images[-1].norm
    with torch.no_grad():
        probs = model(task.encode_inputs([_image()])).softmax(-1)[0]
    k = int(probs.argmax())
    title = fig._suptitle.get_text()
    assert title.startswith(f"digits: --index 0: test:0: predicted {task.classes[k]} "
                            f"(p {float(probs[k]):.2f}, gold {task.classes[6]})")  # fmt: skip
    first = _heat(fig, "input")
    assert first.get_xlabel() == "x (pixel; a token is 2 px)"
    assert first.get_ylabel() == "y (pixel; a token is 2 px)"
    assert [t.get_text() for t in first.get_xticklabels()] == ["0", "2", "4", "6", "8"]
    assert heads[0].get_title().startswith("head 1 (to CLS ")
    assert not fig.legends  # full attention: nothing masked


def test_keys_outside_the_window_are_hatched():
    task = DigitsTask()
    model = _model(PixelsConfig(dim=8, depth=1, heads=2, window=1))
    fig = image_attention_figure(task, model, _image(), query="3,3")
    # the query (3, 3) sees the 3x3 cells around it and the CLS token; 64 - 9 cells are hatched
    cells = masked_keys(model, 65, 1 + 3 * 8 + 3, prefix=1)[1:].reshape(8, 8)
    expected = torch.ones(8, 8, dtype=torch.bool)
    expected[2:5, 2:5] = False
    assert torch.equal(cells, expected)
    for h in (1, 2):
        (hatched,) = [c for c in _heat(fig, f"head {h}").collections if c.get_hatch()]
        assert len(hatched.get_paths()) == 64 - 9
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "key outside the query's window (radius 1)"
    ]
