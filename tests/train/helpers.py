"""Shared helpers of the trainer tests: run the toy task, compare checkpoints."""

from __future__ import annotations

import torch

from attnlab.lab.train import Trainer, TrainResult, load_checkpoint

from .toy_task import ToyTask, toy_config

#: history columns that measure time, not training
TIMING = {"elapsed_s", "units_per_s"}


class Crash(RuntimeError):
    """A simulated failure (preemption, OOM, ...)."""


class CrashingToy(ToyTask):
    """The toy task, failing on its ``crash_at``-th training loss call (1-based)."""

    def __init__(self, crash_at: int) -> None:
        super().__init__()
        self.crash_at, self.calls = crash_at, 0

    def loss(self, model, batch):
        if model.training:
            self.calls += 1
            if self.calls == self.crash_at:
                raise Crash(f"simulated crash at training loss call {self.calls}")
        return super().loss(model, batch)


def run(out_dir, *overrides: str, task=None, resume: bool = False, mode="classify") -> TrainResult:
    cfg = toy_config(out_dir, *overrides, mode=mode)
    return Trainer(task or ToyTask(), cfg, resume=resume, progress=False).fit()


def strip_timing(history: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMING} for row in history]


def assert_same_tensors(a, b, path="") -> None:
    """Bitwise equality of nested dicts/lists of tensors and plain values."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, path
        assert torch.equal(a, b), f"{path} differs"
    elif isinstance(a, dict):
        assert set(a) == set(b), path
        for k in a:
            assert_same_tensors(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_tensors(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def final_weights(out_dir) -> dict[str, torch.Tensor]:
    return load_checkpoint(out_dir / "last.pt")["model"]
