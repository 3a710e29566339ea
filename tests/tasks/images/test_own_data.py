"""One's own images, no code (issue 37): ``image-classify`` reads a folder of class folders of
PNG / JPEG files (any size and mode: resized to ``--data.size``, greyscale or RGB by
``--data.channels``) or a ``.npz`` of ``x`` and ``y``; dev and test cut by a seed and kept in the
run as ``.npz``; train -> eval -> predict -> show from the run alone; a bad file is one line
naming it, and nothing is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from attnlab.lab.tasks.images.files import ImageDataOptions, read_images
from attnlab.lab.tasks.images.generic import ImageClassifyOptions, ImageClassifyTask

TINY = ["--data.size=8", "--model.encoder.patch=2", "--model.encoder.dim=16",
        "--model.encoder.depth=1", "--model.encoder.heads=2", "--model.encoder.ff_hidden=32",
        "--train.epochs=1", "--train.batch_size=8", "--train.device=cpu",
        "--train.log_every=0"]  # fmt: skip


def picture(path: Path, label: str, i: int) -> Path:
    """A stripe picture: ``rows`` horizontal stripes, ``cols`` vertical ones; sizes and modes
    vary (greyscale, RGB, RGBA; PNG or JPEG by the name)."""
    from PIL import Image

    side = 10 + 3 * (i % 3)
    x = np.zeros((side, side), dtype=np.uint8)
    if label == "rows":
        x[:: 2 + i % 2] = 220
    else:
        x[:, :: 2 + i % 2] = 220
    mode = ("L", "RGB", "RGBA")[i % 3]
    Image.fromarray(x).convert(mode if path.suffix == ".png" else "RGB").save(path)
    return path


def class_folders(root: Path, n: int = 6) -> Path:
    for label in ("cols", "rows"):
        (root / label).mkdir(parents=True)
        for i in range(n):
            picture(root / label / f"{i}.{'jpg' if i == 4 else 'png'}", label, i)
        (root / label / "README").write_text("not an image: ignored\n")
    return root


def test_folders_are_resized_to_greyscale_or_rgb(tmp_path):
    root = class_folders(tmp_path / "img", n=3)
    grey = read_images(str(root), ImageDataOptions(size=8))
    assert grey.images.shape == (6, 8, 8) and grey.images.dtype == torch.uint8
    assert grey.labels == ["cols"] * 3 + ["rows"] * 3 and grey.names[0].endswith("cols/0.png")
    rgb = read_images(str(root), ImageDataOptions(size=12, channels=3))
    assert rgb.images.shape == (6, 3, 12, 12)


def test_npz_of_any_layout_reads_as_the_folder_does(tmp_path):
    x = np.random.default_rng(0).random((5, 6, 6, 3))  # floats in [0, 1], RGB
    np.savez(tmp_path / "a.npz", x=x, y=np.array([0, 1, 1, 0, 1]))
    read = read_images(str(tmp_path / "a.npz"), ImageDataOptions(size=6))
    assert read.images.shape == (5, 6, 6) and read.labels == ["0", "1", "1", "0", "1"]
    assert read.where[2] == f"{tmp_path / 'a.npz'}:2"
    luma = (x * 255 * np.array([0.299, 0.587, 0.114])).sum(-1)
    assert np.abs(read.images.numpy() - luma).max() <= 0.51
    np.savez(tmp_path / "b.npz", x=np.full((2, 4, 4), 255, np.uint8), y=np.array(["a", "b"]))
    read = read_images(str(tmp_path / "b.npz"), ImageDataOptions(size=8, channels=3))
    assert read.images.shape == (2, 3, 8, 8) and int(read.images.min()) == 255


def test_rgb_images_train_a_three_channel_model(tmp_path):
    root = class_folders(tmp_path / "img", n=5)
    task = ImageClassifyTask()
    task.setup(ImageClassifyOptions(ImageDataOptions(train=str(root), size=8, channels=3)))
    assert [len(task.splits()[s]) for s in ("train", "dev", "test")] == [8, 1, 1]
    from attnlab.lab.tasks.images import ImageModelConfig, PatchesConfig

    model = task.build_model(ImageModelConfig(encoder=PatchesConfig(patch=2, dim=16, depth=1)))
    batch = task.collate(task.splits()["train"])
    assert batch["images"].shape == (8, 3, 8, 8)
    loss, n = task.loss(model, batch)
    loss.backward()
    assert n == 8 and model.encoder.embed.weight.grad.shape[1] == 3


def test_the_kept_splits_are_read_back_with_the_folder_gone(tmp_path):
    root = class_folders(tmp_path / "img", n=10)
    task = ImageClassifyTask()
    task.setup({"data": {"train": str(root), "split": [0.2, 0.1], "seed": 5, "size": 8}})
    assert [len(task.splits()[s]) for s in ("train", "dev", "test")] == [14, 4, 2]
    task.save_run_data(tmp_path / "run")
    shutil.rmtree(root)
    again = ImageClassifyTask()
    again.load_state_dict(task.state_dict())
    again.load_run_data(tmp_path / "run")
    again.setup({"data": {"train": str(root), "size": 8}})
    for split in ("train", "dev", "test"):
        a, b = task.splits()[split], again.splits()[split]
        assert [e.name for e in a] == [e.name for e in b] and [e.label for e in a] == [
            e.label for e in b
        ]
        assert torch.equal(torch.stack([e.image for e in a]), torch.stack([e.image for e in b]))
    assert again.mean == task.mean and again.classes == ["cols", "rows"]


def test_image_classify_round_trip_from_the_run_alone(cli, tmp_path):
    root = class_folders(tmp_path / "img")
    run = tmp_path / "run"
    ran = cli("train", "image-classify", f"--data.train={root}", "--data.split=0.17,0.17",
              *TINY, f"--out_dir={run}")  # fmt: skip
    assert ran.rc == 0, ran.err
    manifest = json.loads((run / "data" / "splits.json").read_text())
    assert manifest["examples"] == {"train": 8, "dev": 2, "test": 2}
    probe = picture(tmp_path / "probe.png", "rows", 1)
    shutil.rmtree(root)  # the run needs its own files alone

    ran = cli("eval", run, "--split", "test")
    assert ran.rc == 0 and ran.out.startswith("image-classify test split: {"), ran.err
    more = class_folders(tmp_path / "more", n=2)
    ran = cli("eval", run, "--data", more)  # a folder of the run's classes, at the run's size
    assert ran.rc == 0 and ran.out.startswith(f"{more}: "), ran.err
    ran = cli("predict", run, probe, "--index", "1", "--json")
    assert ran.rc == 0, ran.err
    records = [json.loads(line) for line in ran.out.splitlines()]
    assert records[0]["input"] == "test:1" and records[0]["gold"] in ("cols", "rows")
    assert set(records[1]["probabilities"]) == {"cols", "rows"}
    ran = cli("show", run, probe, "--out", tmp_path / "a.png")
    assert ran.rc == 0 and (tmp_path / "a.png").is_file(), ran.err
    ran = cli("show", run, "--index", "0", "--out", tmp_path / "b.png")
    assert ran.rc == 0 and (tmp_path / "b.png").is_file(), ran.err


@pytest.mark.parametrize(
    ("files", "fragments"),
    [
        ({"train": "img", "test": "unseen"},
         ["unseen/dots/0.png: label 'dots' of the test split is not one of the labels of the "
          "train data (cols, rows)"]),
        ({"train": "empty"}, ["empty/rows: the class folder 'rows' holds no image files"]),
        ({"train": "broken"}, ["image", "broken/rows/bad.png: not an image Pillow can read"]),
        ({"train": "noy.npz"}, ["noy.npz: no array 'y' in the .npz (it holds x)"]),
        ({"train": "short.npz"}, ["short.npz: x holds 4 images but y 3 labels"]),
        ({"train": "objects.npz"}, ["objects.npz: a .npz numpy cannot read without pickles"]),
        ({"train": "shape.npz"}, ["shape.npz: x: expected images (N, H, W) or (N, H, W, C)"]),
        ({"train": "notnpz.npz"}, ["notnpz.npz: not a .npz file numpy can read"]),
        ({}, ["'image-classify' trains on your own images: give --data.train=FOLDER"]),
    ],
)  # fmt: skip
def test_bad_images_are_one_line_naming_them_and_nothing_is_written(
    cli, tmp_path, files, fragments
):
    class_folders(tmp_path / "img", n=4)
    (tmp_path / "unseen" / "dots").mkdir(parents=True)
    picture(tmp_path / "unseen" / "dots" / "0.png", "rows", 0)
    (tmp_path / "empty" / "rows").mkdir(parents=True)
    shutil.copytree(tmp_path / "img", tmp_path / "broken")
    (tmp_path / "broken" / "rows" / "bad.png").write_bytes(b"not an image")
    np.savez(tmp_path / "noy.npz", x=np.zeros((4, 8, 8)))
    np.savez(tmp_path / "short.npz", x=np.zeros((4, 8, 8)), y=np.arange(3))
    np.savez(tmp_path / "objects.npz", x=np.zeros((2, 8, 8)), y=np.array([{}, 1], dtype=object))
    np.savez(tmp_path / "shape.npz", x=np.zeros((4, 8)), y=np.arange(4))
    (tmp_path / "notnpz.npz").write_text("x,y\n")
    options = [f"--data.{split}={tmp_path / name}" for split, name in files.items()]
    run = tmp_path / "run"
    cli("train", "image-classify", *options, *TINY, f"--out_dir={run}").user_error(
        "train", *fragments
    )
    assert not run.exists()
