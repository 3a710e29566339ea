"""``train.precision``: what ``auto`` picks from the CPU's flags, and that the trainer saves
what ran, so that evaluation and ``--resume`` see it."""

from __future__ import annotations

import json
import logging

import pytest
import torch

import attnlab.lab.train.precision as precision_module
from attnlab.lab.train.precision import choose_precision

from .helpers import run


@pytest.mark.parametrize(
    "flags, expected",
    [
        ({"avx2", "fma"}, "fp32"),  # AVX2 only: bf16 would be emulated
        ({"avx2", "avx512f", "avx512bw"}, "fp32"),  # AVX-512 without its bf16 extension
        ({"avx2", "avx512f", "avx512_bf16"}, "bf16"),
        ({"avx2", "amx_bf16", "amx_tile"}, "bf16"),
        (set(), "fp32"),  # flags unknown (not Linux)
    ],
)
def test_auto_picks_bf16_only_with_native_bf16_instructions(flags, expected):
    chosen = choose_precision("auto", "cpu", flags=flags)
    assert chosen.name == expected and chosen.bf16 == (expected == "bf16")
    assert chosen.reason.startswith("auto: ")
    if expected == "fp32":
        assert "AVX512_BF16" in chosen.reason


@pytest.mark.parametrize("requested", ["fp32", "bf16"])
def test_an_explicit_precision_is_kept_whatever_the_cpu(requested):
    for flags in ({"avx2"}, {"avx512_bf16"}):
        assert choose_precision(requested, "cpu", flags=flags).name == requested


def test_a_task_may_choose_auto_on_a_cpu_only():
    """ListOps trains faster in float32 on a CPU whatever its flags; an explicit precision, and
    auto elsewhere than on a CPU, do not ask the task."""
    from attnlab.lab.tasks import TASKS

    listops = TASKS.get("listops").cpu_precision
    assert listops == "fp32" and TASKS.get("pos").cpu_precision is None
    chosen = choose_precision("auto", "cpu", flags={"amx_bf16"}, cpu_precision=listops)
    assert chosen.name == "fp32" and "this task trains faster in fp32" in chosen.reason
    assert choose_precision("bf16", "cpu", cpu_precision=listops).name == "bf16"
    assert choose_precision("auto", "meta", cpu_precision="bf16").name == "fp32"
    with pytest.raises(ValueError, match="cpu_precision must be fp32 or bf16, got 'auto'"):
        choose_precision("auto", "cpu", cpu_precision="auto")


def test_an_unknown_precision_names_the_option():
    with pytest.raises(
        ValueError, match=r"train.precision must be one of auto, fp32, bf16, got 'fp16'"
    ):
        choose_precision("fp16", "cpu")


AUTO = "--train.precision=auto"  # the toy config pins fp32


@pytest.mark.parametrize("flags, expected", [({"avx2"}, "fp32"), ({"avx512_bf16"}, "bf16")])
def test_the_trainer_runs_and_saves_what_auto_picked(
    tmp_path, monkeypatch, caplog, flags, expected
):
    monkeypatch.setattr(precision_module, "cpu_flags", lambda: frozenset(flags))
    seen = []
    real = torch.autocast

    def spy(device_type, dtype=None, enabled=True, **kw):
        seen.append(enabled)
        return real(device_type, dtype=dtype, enabled=enabled, **kw)

    monkeypatch.setattr(torch, "autocast", spy)
    with caplog.at_level(logging.INFO, logger="attnlab"):
        run(tmp_path, AUTO, "--train.epochs=1")
    saved = json.loads((tmp_path / "config.json").read_text())["train"]["precision"]
    assert saved == expected
    assert seen and all(e == (expected == "bf16") for e in seen)
    assert any(f"{expected} (auto: " in r.getMessage() for r in caplog.records)


def test_resuming_an_auto_run_sees_no_change_of_precision(tmp_path, caplog):
    run(tmp_path, AUTO, "--train.max_steps=4")
    with caplog.at_level(logging.WARNING, logger="attnlab"):
        run(tmp_path, AUTO, "--train.max_steps=8", resume=True)
    changed = [r.getMessage() for r in caplog.records if "changed config" in r.getMessage()]
    assert changed and all("precision" not in m for m in changed)  # max_steps only
