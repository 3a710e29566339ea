"""``train.precision``: which dtype the forward pass runs in, and why.

``auto`` autocasts to bfloat16 where the hardware multiplies bfloat16 matrices natively (a CPU
with AVX512_BF16 or AMX-BF16, or a CUDA device that supports bfloat16), and stays in float32
elsewhere: on a CPU without them (AVX2 only) PyTorch emulates bfloat16 matmuls by converting
to float32, which is slower than float32 itself. The trainer logs the choice and its reason.
Weights, gradients and the optimizer's state stay float32 in every case (autocast).
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Iterable
from typing import NamedTuple

import torch

__all__ = ["PRECISIONS", "Precision", "choose_precision", "cpu_flags", "cpu_model"]

PRECISIONS = ("auto", "fp32", "bf16")
#: CPU flags (as /proc/cpuinfo spells them) that mean native bfloat16 matrix products
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


class Precision(NamedTuple):
    """The dtype chosen (``"fp32"`` or ``"bf16"``) and a sentence saying why."""

    name: str
    reason: str

    @property
    def bf16(self) -> bool:
        return self.name == "bf16"


@functools.cache
def _cpuinfo() -> tuple[str, frozenset[str]]:
    model, flags = platform.processor() or "unknown CPU", frozenset()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name":
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = frozenset(value.split())
    except OSError:  # not Linux: no flags known, so ``auto`` stays float32 on the CPU
        pass
    return model, flags


def cpu_flags() -> frozenset[str]:
    """This machine's CPU flags (empty where ``/proc/cpuinfo`` cannot be read)."""
    return _cpuinfo()[1]


def cpu_model() -> str:
    """This machine's CPU model name."""
    return _cpuinfo()[0]


def choose_precision(
    requested: str,
    device: torch.device | str,
    *,
    flags: Iterable[str] | None = None,
    cpu_precision: str | None = None,
) -> Precision:
    """The precision ``requested`` (``auto``, ``fp32``, ``bf16``) resolves to on ``device``.

    Args:
        requested: ``train.precision``.
        device: where the model runs.
        flags: the CPU's flags (default: this machine's, :func:`cpu_flags`); given by tests.
        cpu_precision: the task's choice for ``auto`` on a CPU
            (:attr:`~attnlab.lab.tasks.Task.cpu_precision`), None to go by the CPU's flags.

    Raises:
        ValueError: ``requested`` is not one of :data:`PRECISIONS`.
    """
    if requested not in PRECISIONS:
        raise ValueError(
            f"train.precision must be one of {', '.join(PRECISIONS)}, got {requested!r}"
        )
    device = torch.device(device)
    if requested != "auto":
        return Precision(requested, f"train.precision={requested}")
    if device.type == "cuda":
        if torch.cuda.is_bf16_supported():
            return Precision("bf16", "auto: this CUDA device supports bfloat16")
        return Precision("fp32", "auto: this CUDA device does not support bfloat16")
    if device.type != "cpu":
        return Precision("fp32", f"auto: float32 on {device.type}")
    if cpu_precision is not None:
        if cpu_precision not in PRECISIONS[1:]:
            raise ValueError(f"cpu_precision must be fp32 or bf16, got {cpu_precision!r}")
        return Precision(cpu_precision, f"auto: this task trains faster in {cpu_precision} "
                                        "on a CPU (its cpu_precision)")  # fmt: skip
    have = set(cpu_flags() if flags is None else flags)
    native = [f for f in BF16_FLAGS if f in have]
    if native:
        return Precision(
            "bf16", f"auto: the CPU multiplies bfloat16 natively ({', '.join(native)})"
        )
    return Precision(
        "fp32",
        "auto: the CPU has no bfloat16 matrix instructions (neither AVX512_BF16 nor AMX), "
        "where bfloat16 would be emulated and slower",
    )
