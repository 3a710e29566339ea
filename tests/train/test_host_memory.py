"""keep_freed_memory: when it applies, and that a freed block is then reused without faults."""

from __future__ import annotations

import platform
import resource

import pytest
import torch

from attnlab.lab.train import host_memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@pytest.fixture
def fresh(monkeypatch):
    """keep_freed_memory as in a new process, with none of the user's malloc settings."""
    monkeypatch.setattr(host_memory, "_done", None)
    for name in (*host_memory.USER_SETTINGS, "ATTNLAB_MALLOC"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("name", [*host_memory.USER_SETTINGS, "ATTNLAB_MALLOC"])
def test_left_alone_when_the_user_chose(fresh, name):
    fresh.setenv(name, "default")
    assert host_memory.keep_freed_memory() is False


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_a_freed_block_is_reused_without_page_faults(fresh):
    assert host_memory.keep_freed_memory() is True
    assert host_memory.keep_freed_memory() is True  # once per process: the answer is kept

    def faults_to_fill() -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        block = torch.empty(4 * 1024 * 1024)  # 16 MiB: 4,096 pages
        block.fill_(1.0)
        del block
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    faults_to_fill()  # the heap grows to hold it once
    assert faults_to_fill() < 400  # then the same pages again, not a tenth of them new
