"""The image tasks end to end on scikit-learn's 8x8 digits (tiny, fast): train, predict on a
PNG and on --index, show; splits and subsets; every encoder kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from attnlab.lab.cli import main
from attnlab.lab.tasks import TASKS
from attnlab.lab.tasks.images import DigitsTask, ImageModelConfig
from attnlab.lab.tasks.images.data import balanced_subset, validation_split
from attnlab.lab.tasks.images.draw import attention_rollout
from attnlab.lab.tasks.images.encoders import (
    CNNConfig,
    HybridConfig,
    PatchesConfig,
    PixelsConfig,
)
from attnlab.lab.tasks.images.model import build_image_model
from attnlab.lab.train.merge import merge

PNG = b"\x89PNG\r\n\x1a\n"
TINY = ["--train.epochs=2", "--train.batch_size=64", "--train.lr=3e-3", "--train.log_every=1000",
        "--task_options.train_size=200", "--model.encoder.dim=16", "--model.encoder.depth=1"]  # fmt: skip


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("digits") / "run"
    assert main(["train", "digits", *TINY, f"--out_dir={out}"]) == 0
    return out


def test_registered() -> None:
    assert TASKS.get("digits") is DigitsTask
    assert TASKS.get("fashion").name == "fashion"


def test_train_predict_index_and_png(digits: Path, tmp_path: Path, capsys) -> None:
    metrics = json.loads((digits / "metrics.json").read_text())
    assert 0.0 <= metrics["test"]["accuracy"] <= 1.0 and metrics["steps"] == 8  # 200 / 64 -> 4
    from PIL import Image

    png = tmp_path / "digit.png"
    task = DigitsTask()
    image = task.test_example(3).image
    Image.fromarray(image.numpy()).resize((32, 32)).save(png)
    capsys.readouterr()
    assert main(["predict", str(digits), "--index", "3", str(png), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["input"] for r in records] == ["test:3", str(png)]
    assert records[0]["gold"] in task.classes and "gold" not in records[1]
    for r in records:
        assert sum(r["probabilities"].values()) == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("bad", [["--index", "100000"], [], ["nope.png"]])
def test_predict_bad_input_is_one_clean_error(digits: Path, capsys, bad) -> None:
    assert main(["predict", str(digits), *bad]) == 2
    err = capsys.readouterr().err
    assert ("index" in err or "no input" in err or "no such file" in err) and "Traceback" not in err


@pytest.mark.parametrize("query", ["cls", "1,2"])
def test_show_draws_a_png(digits: Path, tmp_path: Path, query: str) -> None:
    out = tmp_path / "show.png"
    assert main(["show", str(digits), "--index", "0", "--query", query, "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG


def test_validation_split_is_fixed_and_subsets_nested_and_balanced() -> None:
    train, dev = validation_split(100, 10, seed=0)
    again, dev2 = validation_split(100, 10, seed=0)
    assert torch.equal(dev, dev2) and torch.equal(train, again)
    assert len(set(train.tolist()) | set(dev.tolist())) == 100
    labels = torch.arange(300) % 3
    small, large = balanced_subset(labels, 30, seed=1), balanced_subset(labels, 90, seed=1)
    assert set(small.tolist()) <= set(large.tolist())
    assert torch.bincount(labels[small]).tolist() == [10, 10, 10]
    with pytest.raises(ValueError, match="class 0 has 100 training images"):
        balanced_subset(labels, 400)


CONFIGS = {
    "pixels": PixelsConfig(dim=8, depth=1, heads=2, window=1),
    "patches": PatchesConfig(dim=8, depth=1, heads=2, patch=2, pooling="mean",
                             positional="relative2d"),
    "hybrid": HybridConfig(dim=8, depth=1, heads=2, stem=4, downsample=2,
                           positional="sinusoidal2d"),
    "cnn": CNNConfig(channels=(4, 8)),
}  # fmt: skip


@pytest.mark.parametrize("kind", sorted(CONFIGS))
def test_every_encoder_shapes_and_gradients(kind: str) -> None:
    torch.manual_seed(0)
    model = build_image_model(ImageModelConfig(encoder=CONFIGS[kind]), size=(8, 8), num_classes=10)
    out = model({"images": torch.randn(3, 1, 8, 8)}, need_weights=True)
    assert out.logits.shape == (3, 10) and torch.isfinite(out.logits).all()
    out.logits.sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    assert not missing
    if kind != "cnn":
        n = out.prefix + out.grid[0] * out.grid[1]
        assert all(w.shape[-2:] == (n, n) for w in out.weights)


def test_hybrid_defaults_are_the_cnn_then_attention() -> None:
    """The default hybrid is the CNN's convolutions (third stage at width 112), then attention
    on their 7x7 grid, within 15% of the CNN's parameter count."""
    models = {kind: build_image_model(ImageModelConfig(encoder=cfg()), size=(28, 28),
                                      num_classes=10)
              for kind, cfg in (("cnn", CNNConfig), ("hybrid", HybridConfig))}  # fmt: skip
    size = {kind: sum(p.numel() for p in m.parameters()) for kind, m in models.items()}
    assert 1 < size["hybrid"] / size["cnn"] < 1.15, size
    enc = models["hybrid"].encoder
    cnn = build_image_model(ImageModelConfig(encoder=CNNConfig(channels=(32, 64, 112))),
                            size=(28, 28), num_classes=10).encoder  # fmt: skip
    assert str(enc.embed) == str(cnn.features)
    assert enc.body.grid == (7, 7) and len(enc.body.encoder.blocks) == 1


def test_hybrid_stem_tail_is_the_cnns_third_stage_begun() -> None:
    """``stem_tail=1`` at width 128: the tokens come from exactly the CNN's layers up to the
    first convolution of its third stage (no 1x1 map), still on the 7x7 grid."""
    cfg = HybridConfig(stem_tail=1, dim=128, depth=1)
    enc = build_image_model(ImageModelConfig(encoder=cfg), size=(28, 28), num_classes=10).encoder
    cnn = build_image_model(ImageModelConfig(encoder=CNNConfig()), size=(28, 28), num_classes=10)
    assert str(enc.embed) == str(cnn.encoder.features[: len(enc.embed)])
    assert enc.body.grid == (7, 7)
    with pytest.raises(ValueError, match="stem_tail=-1"):
        merge(ImageModelConfig(), {"encoder": {"kind": "hybrid", "stem_tail": -1}})


@pytest.mark.parametrize("field", ["stem", "stem_depth"])
def test_hybrid_rejects_an_empty_stem(field: str) -> None:
    with pytest.raises(ValueError, match=f"{field}=0"):
        merge(ImageModelConfig(), {"encoder": {"kind": "hybrid", field: 0}})


def test_pixels_window_is_local() -> None:
    """With window 1 and no CLS, a pixel's output (1 layer) depends on its 3x3 neighbours only."""
    torch.manual_seed(0)
    cfg = PixelsConfig(dim=8, depth=1, heads=2, window=1, pooling="mean", positional=None)
    enc = build_image_model(ImageModelConfig(encoder=cfg, crop=0, flip=False), size=(6, 6),
                            num_classes=2).encoder.eval()  # fmt: skip
    x = torch.randn(1, 1, 6, 6)
    y = x.clone()
    y[0, 0, 5, 5] += 1.0  # far from pixel (0, 0)

    def tokens(img: torch.Tensor) -> torch.Tensor:  # the grid's outputs, under the window
        return enc.body.encoder(enc.embed(img).flatten(2).transpose(1, 2), mask=enc.body.mask).out

    torch.testing.assert_close(tokens(x)[0, 0], tokens(y)[0, 0])


def test_kind_switch_from_the_command_line_config() -> None:
    cfg = merge(ImageModelConfig(), {"encoder": {"stem": 8, "kind": "hybrid"}})
    assert isinstance(cfg.encoder, HybridConfig) and cfg.encoder.stem == 8
    with pytest.raises(ValueError, match="patch"):
        merge(ImageModelConfig(), {"encoder": {"kind": "cnn", "patch": 7}})
    with pytest.raises(ValueError, match="does not divide"):
        build_image_model(ImageModelConfig(encoder=PatchesConfig(patch=3)), size=(8, 8),
                          num_classes=10)  # fmt: skip


def test_rollout_of_identity_attention_is_identity() -> None:
    eye = torch.eye(5).expand(2, 5, 5)
    torch.testing.assert_close(attention_rollout([eye, eye]), torch.eye(5, dtype=torch.float64))
    uniform = torch.full((1, 4, 4), 0.25)
    r = attention_rollout([uniform])
    torch.testing.assert_close(r.sum(-1), torch.ones(4, dtype=torch.float64))


@pytest.mark.skipif(
    not Path("/usr/share/datasets/fashion-mnist").is_dir(),
    reason="Debian's dataset-fashion-mnist is not installed (apt-get install dataset-fashion-mnist)",
)
def test_fashion_splits_and_a_nested_subset() -> None:
    from attnlab.lab.tasks.images import FashionTask

    task = FashionTask()
    task.setup({"train_size": 1000})
    splits = task.splits()
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [1000, 5000, 10000]
    labels = torch.tensor([e.label for e in splits["train"]])
    assert torch.bincount(labels).tolist() == [100] * 10
    dev = {e.name for e in splits["dev"]}
    task.setup({"train_size": 0})
    assert {e.name for e in task.splits()["dev"]} == dev  # the same fixed dev split
    batch = task.collate(splits["train"][:4])
    assert batch["images"].shape == (4, 1, 28, 28) and batch["labels"].shape == (4,)


@pytest.mark.skipif(
    not Path("/usr/share/datasets/fashion-mnist").is_dir(),
    reason="Debian's dataset-fashion-mnist is not installed (apt-get install dataset-fashion-mnist)",
)
def test_claim_10s_full_subsets_are_class_balanced_subsets_of_fashion() -> None:
    """The report's full budget trains on these sizes; one a balanced subset cannot reach fails
    the job before training (55,000 did)."""
    from attnlab.lab.report.claims_data import DataEfficiency
    from attnlab.lab.tasks.images import FashionTask

    task = FashionTask()
    for size in DataEfficiency.SIZES["full"]:
        task.setup({"train_size": size})
        labels = torch.tensor([e.label for e in task.splits()["train"]])
        assert torch.bincount(labels).tolist() == [size // 10] * 10
    with pytest.raises(ValueError, match="use a size of at most 54710"):
        task.setup({"train_size": 55000})
