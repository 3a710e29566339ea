"""keep_freed_memory: when it applies, and that a freed block is then reused without faults."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from attnlab.lab.train import host_memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

#: a fresh process (glibc's dynamic thresholds untouched by earlier tests) fills a 16 MiB block
#: (4,096 pages), frees it, and fills one again: the page faults of the second fill
REFILL = """
import json, resource, torch
from attnlab.lab.train.host_memory import keep_freed_memory
kept = keep_freed_memory()
def fill():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = torch.empty(4 * 1024 * 1024)
    block.fill_(1.0)
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
fill()
print(json.dumps({"kept": kept, "faults": fill()}))
"""


@pytest.fixture
def fresh(monkeypatch):
    """keep_freed_memory as in a new process, with none of the user's malloc settings."""
    monkeypatch.setattr(host_memory, "_done", None)
    for name in [n for n in os.environ if n.startswith("MALLOC_")] + ["GLIBC_TUNABLES",
                                                                       "ATTNLAB_MALLOC"]:  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LD_PRELOAD", "")
    return monkeypatch


@pytest.mark.parametrize(
    "name, value",
    [("MALLOC_ARENA_MAX", "2"), ("MALLOC_TRIM_THRESHOLD_", "0"), ("GLIBC_TUNABLES", "x=1"),
     ("LD_PRELOAD", "/usr/lib/libjemalloc.so.2"), ("ATTNLAB_MALLOC", "default")],
)  # fmt: skip
def test_left_alone_when_the_user_chose(fresh, name, value):
    fresh.setenv(name, value)
    assert host_memory.keep_freed_memory() is False


def test_applied_once_per_process(fresh):
    calls = []
    fresh.setattr(host_memory, "_apply", lambda: calls.append(1) or True)
    assert host_memory.keep_freed_memory() and host_memory.keep_freed_memory()
    assert calls == [1]


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_a_freed_block_is_filled_again_without_page_faults():
    """With glibc's defaults the second fill faults every page in again; kept, almost none."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    runs = {}
    for setting in ("default", ""):
        env["ATTNLAB_MALLOC"] = setting
        out = subprocess.run([sys.executable, "-c", REFILL], env=env, capture_output=True,
                             text=True, check=True)  # fmt: skip
        runs[setting or "kept"] = json.loads(out.stdout.strip().splitlines()[-1])
    assert runs["default"]["kept"] is False and runs["default"]["faults"] > 3500
    assert runs["kept"]["kept"] is True and runs["kept"]["faults"] < 400
