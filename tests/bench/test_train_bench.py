"""``attnlab bench train``: what it counts (FLOPs, units, examples), the profile categories and
its errors. No timing is asserted: the figures' values are the benchmark's, not the test's."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the toy task
from attnlab.lab.bench.train import (
    CATEGORIES,
    DATA,
    OTHER,
    PYTHON,
    _count_flops,
    bench_train,
    categorize,
)
from attnlab.lab.cli import main
from attnlab.lab.train import Trainer
from attnlab.lab.train.config import resolve_config
from train.toy_task import ToyTask  # noqa: E402, F401  (registers "toy", as tests/train does)

TOY = [
    "--task_options.mode=tag",
    "--train.batch_size=16",
    "--train.device=cpu",
    "--train.log_every=0",
]


@pytest.mark.parametrize(
    "name, category",
    [
        ("aten::mm", "matmul"),
        ("aten::addmm", "matmul"),
        ("aten::bmm", "matmul"),
        ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
        ("aten::_softmax_backward_data", "attention"),
        ("aten::bernoulli_", "dropout/RNG"),
        ("aten::native_dropout", "dropout/RNG"),
        ("aten::_fused_adamw_", "optimizer"),
        ("aten::_foreach_mul_", "optimizer"),
        ("aten::mkldnn_convolution", "convolution"),
        ("aten::native_layer_norm_backward", "normalisation"),
        ("attnlab::batch_norm_relu_backward", "normalisation"),
        ("aten::max_pool2d_with_indices_backward", "pooling"),
        ("attnlab::max_pool2x2", "pooling"),
        ("aten::copy_", "copy/index"),
        ("aten::fill_", "copy/index"),
        ("aten::index_select", "copy/index"),
        ("aten::add_", "elementwise"),
        ("aten::gelu_backward", "elementwise"),
        ("aten::nll_loss_forward", "elementwise"),
        ("aten::linalg_vector_norm", "optimizer"),
        ("Torch-Compiled Region: 0/0", "compiled code"),
        ("autograd::engine::evaluate_function: MmBackward0", OTHER),
    ],
)
def test_operators_fall_in_their_category(name, category):
    assert categorize(name) == category


def test_flops_of_a_step_are_the_matrix_products_forward_and_backward(tmp_path):
    """The toy tagger: embedding -> LayerNorm -> Linear(dim, hidden) -> GELU -> Linear(hidden,
    labels). Each linear costs 2 m k n forward and twice that backward (input and weight
    gradients; the first linear's input needs one, for LayerNorm's gain)."""
    cfg = resolve_config(task="toy", overrides=[*TOY, f"--out_dir={tmp_path}"])
    trainer = Trainer("toy", cfg, progress=False)
    try:
        batches = trainer.feed.epoch_batches(0)
        micros = next(trainer.feed.steps(batches, 0))
        flops, units = _count_flops(trainer, micros)
        ids, labels = micros[0][0]["ids"], micros[0][0]["labels"]
        m = cfg.model
        per_position = m.dim * m.encoder.hidden + m.encoder.hidden * len(trainer.task.labels)
        assert flops == 6 * ids.numel() * per_position
        assert units == (labels != -100).sum().item()
        assert all(p.grad is None for p in trainer.model.parameters())  # left as it found them
    finally:
        trainer.close()


def test_bench_reports_every_variant_with_a_full_profile():
    result = bench_train(
        "toy", TOY, variants=["eager", "bf16"], steps=3, warmup=1, rounds=2,
        profile_steps=2, flop_steps=1, peak_seconds=0.1, log=lambda _: None,
    )  # fmt: skip
    assert set(result["variants"]) == {"eager", "bf16"}
    assert result["unit"] == "tok" and result["task"] == "toy"
    assert set(result["matmul_peak_flops"]) == {"fp32", "bf16"}
    eager = result["variants"]["eager"]
    assert eager["speedup"] == 1.0
    for figures in result["variants"].values():
        assert figures["examples_per_s"] > 0 and figures["units_per_s"] > figures["examples_per_s"]
        assert figures["compile_s"] is None  # neither compiles
        assert figures["page_faults_per_step"] is None or figures["page_faults_per_step"] >= 0
        profile = figures["profile"]
        assert set(profile) == {*(c for c, _ in CATEGORIES), OTHER, DATA, PYTHON}
        assert math.isclose(sum(profile.values()), 1.0, rel_tol=1e-9)
        assert profile["matmul"] > 0 and profile["optimizer"] > 0 and profile[DATA] > 0
    json.dumps(result)  # JSON-ready


def test_a_variant_of_options_is_the_eager_step_with_them():
    result = bench_train(
        "toy", TOY, variants=["eager", "wide=--model.encoder.hidden=64"], steps=2, warmup=0,
        rounds=1, profile_steps=0, flop_steps=1, peak_seconds=0.1, log=lambda _: None,
    )  # fmt: skip
    assert list(result["variants"]) == ["eager", "wide"]
    assert result["matmul_peak_flops"].keys() == {"fp32"}


def test_each_variant_runs_batches_no_other_variant_ran(monkeypatch):
    """oneDNN caches a kernel per shape for the whole process: a variant that followed another
    through the same batches would find its kernels compiled and look faster."""
    seen: dict[int, list[torch.Tensor]] = {}
    step = Trainer.train_step

    def spy(self, micros):
        seen.setdefault(id(self), []).append(micros[0][0]["ids"])
        return step(self, micros)

    monkeypatch.setattr(Trainer, "train_step", spy)
    bench_train(
        "toy", TOY, variants=["eager", "same=--train.precision=fp32"], steps=3, warmup=1,
        rounds=1, profile_steps=0, flop_steps=1, peak_seconds=0.1, log=lambda _: None,
    )  # fmt: skip
    first, second = seen.values()
    assert len(first) == len(second) == 4
    assert not any(a.shape == b.shape and torch.equal(a, b) for a in first for b in second)


def test_unknown_variant_and_bad_counts_are_refused():
    with pytest.raises(ValueError, match=r"--variants: unknown 'fast'; choose from eager, bf16"):
        bench_train("toy", TOY, variants=["eager", "fast"])
    with pytest.raises(ValueError, match=r"--variants: each name once"):
        bench_train("toy", TOY, variants=["eager", "eager"])
    with pytest.raises(ValueError, match="steps and rounds must be >= 1"):
        bench_train("toy", TOY, variants=["eager"], steps=0)


def test_cli_writes_the_json(tmp_path, capsys):
    out = tmp_path / "toy.json"
    argv = ["bench", "train", "toy", "--variants", "eager", "--steps", "2", "--warmup", "0",
            "--rounds", "1", "--profile-steps", "0", "--out", str(out), *TOY]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(out.read_text())
    assert list(result["variants"]) == ["eager"] and "profile" not in result["variants"]["eager"]
    printed = capsys.readouterr().out
    assert "ex/s" in printed and "faults" in printed
