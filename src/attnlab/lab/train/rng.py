"""Seeding and capturing every random number generator a run uses (for exact resume)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

__all__ = ["seed_everything", "get_rng_state", "set_rng_state"]


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def get_rng_state() -> dict[str, Any]:
    """The states of torch (CPU, CUDA), Python ``random`` and NumPy, in a form
    ``torch.load(weights_only=True)`` accepts (tensors, lists, tuples, numbers)."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": (name, keys.tolist(), int(pos), int(has_gauss), float(cached)),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore :func:`get_rng_state`."""
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
