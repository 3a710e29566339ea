"""Trainer tests run tiny models: one intra-op thread avoids thread-pool overhead (on a busy
2-core machine a 16-wide LayerNorm takes ~10 ms with 2 threads and ~20 us with 1)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
