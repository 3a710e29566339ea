"""Checkpoints of layout 1 (before the one trunk, issue 33) read in today's layout: the
feed-forward widths that 0 / None stood for, the molecule blocks' new place."""

from __future__ import annotations

import torch

from attnlab.lab.train.legacy import LAYOUT_VERSION, upgrade


def v1(task: str, model: dict, weights: dict | None = None) -> dict:
    return {"version": 1, "config": {"task": task, "model": model}, "model": weights or {}}


def test_image_encoders_ff_hidden_0_was_twice_the_width():
    old = v1("digits", {"encoder": {"kind": "patches", "dim": 32, "ff_hidden": 0,
                                    "positional": "none"}})  # fmt: skip
    new = upgrade(old)
    assert new["version"] == LAYOUT_VERSION
    assert new["config"]["model"]["encoder"] == {"kind": "patches", "dim": 32, "ff_hidden": 64,
                                                 "positional": None}  # fmt: skip
    assert old["config"]["model"]["encoder"]["ff_hidden"] == 0  # the input is left alone
    hybrid = upgrade(v1("fashion", {"encoder": {"kind": "hybrid", "dim": 112, "ff_hidden": 112}}))
    assert hybrid["config"]["model"]["encoder"]["ff_hidden"] == 112
    cnn = upgrade(v1("fashion", {"encoder": {"kind": "cnn", "channels": [32]}}))
    assert cnn["config"]["model"]["encoder"] == {"kind": "cnn", "channels": [32]}


def test_molecule_blocks_move_under_the_encoder():
    w = torch.zeros(2)
    new = upgrade(v1("freesolv", {"dim": 16, "ff_hidden": None},
                     {"embed.weight": w, "blocks.0.ff.fc1.weight": w, "norm.weight": w,
                      "out.0.weight": w}))  # fmt: skip
    assert new["config"]["model"]["ff_hidden"] == 32
    assert sorted(new["model"]) == ["embed.weight", "encoder.blocks.0.ff.fc1.weight",
                                    "encoder.norm.weight", "out.0.weight"]  # fmt: skip
    kept = upgrade(v1("solubility", {"dim": 16, "ff_hidden": 48}))
    assert kept["config"]["model"]["ff_hidden"] == 48


def test_g2p_ff_hidden_0_is_none_today():
    assert upgrade(v1("g2p", {"ff_hidden": 0}))["config"]["model"]["ff_hidden"] is None
    assert upgrade(v1("g2p", {"ff_hidden": 512}))["config"]["model"]["ff_hidden"] == 512


def test_todays_layout_is_returned_as_it_is():
    ckpt = {"version": LAYOUT_VERSION, "config": {"task": "g2p", "model": {"ff_hidden": 0}}}
    assert upgrade(ckpt) is ckpt


def test_train_bf16_becomes_the_precision_it_trained_in():
    for version in (1, 2):
        for bf16, precision in ((True, "bf16"), (False, "fp32")):
            old = {"version": version, "config": {"task": "pos", "train": {"bf16": bf16}}}
            assert upgrade(old)["config"]["train"] == {"precision": precision}
    unstated = upgrade({"version": 2, "config": {"task": "pos", "train": {"lr": 0.1}}})
    assert unstated["config"]["train"] == {"lr": 0.1}
