"""keep_freed_memory: when it applies, and that a freed block is then reused without faults."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab.lab.train import host_memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
#: where the kernel backs all anonymous memory with 2 MiB pages, faults are not counted per 4 KiB
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
THP_ALWAYS = THP.exists() and "[always]" in THP.read_text()

#: a fresh process (glibc's dynamic thresholds untouched by earlier tests) runs five "steps",
#: each filling blocks of the sizes in MiB that replace SIZES and freeing them: each step's page
#: faults
TEMPLATE = """
import json, resource, torch
from attnlab.lab.train.host_memory import keep_freed_memory
kept = keep_freed_memory()
def step():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [torch.empty(mib * 256 * 1024) for mib in SIZES]
    for block in blocks:
        block.fill_(1.0)
    del blocks, block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"kept": kept, "faults": [step() for _ in range(5)]}))
"""
#: eight blocks of 16 MiB, 32,768 pages
STEPS = TEMPLATE.replace("SIZES", "[16] * 8")
#: two blocks of 48 MiB among two of 16: glibc maps blocks over 32 MiB afresh whatever its
#: settings, jemalloc keeps them
LARGE_STEPS = TEMPLATE.replace("SIZES", "[16, 48, 16, 48]")


def _python(*args: str, extra: dict[str, str] | None = None, check: bool = True, **kwargs):
    """``python ARGS`` in a fresh process without the user's malloc settings (plus ``extra``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop("ATTNLAB_MALLOC", None)
    return subprocess.run([sys.executable, *args], env={**env, **(extra or {})},
                          capture_output=True, text=True, check=check, **kwargs)  # fmt: skip


def _last_json(out: subprocess.CompletedProcess) -> dict:
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def fresh(monkeypatch):
    """keep_freed_memory as in a new process, with none of the user's malloc settings."""
    monkeypatch.setattr(host_memory, "_done", None)
    for name in [n for n in os.environ if n.startswith("MALLOC_")] + ["GLIBC_TUNABLES",
                                                                       "ATTNLAB_MALLOC"]:  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LD_PRELOAD", "")
    monkeypatch.setattr(host_memory, "allocator", lambda: "glibc")
    monkeypatch.setattr(host_memory.platform, "system", lambda: "Linux")
    return monkeypatch


@pytest.mark.parametrize(
    "name, value",
    [("MALLOC_ARENA_MAX", "2"), ("MALLOC_TRIM_THRESHOLD_", "0"), ("GLIBC_TUNABLES", "x=1"),
     ("ATTNLAB_MALLOC", "default")],
)  # fmt: skip
def test_left_alone_when_the_user_chose(fresh, name, value):
    fresh.setenv(name, value)
    assert host_memory.keep_freed_memory() is False


def test_left_alone_on_another_allocator(fresh):
    fresh.setattr(host_memory, "allocator", lambda: "jemalloc")
    assert host_memory.keep_freed_memory() is False


def test_applied_once_per_process(fresh):
    calls = []
    fresh.setattr(host_memory, "_apply", lambda: calls.append(1) or True)
    assert host_memory.keep_freed_memory() and host_memory.keep_freed_memory()
    assert calls == [1]


def test_mallopt_gets_the_ceiling_and_no_trimming(fresh):
    calls = []

    class Libc:
        @staticmethod
        def mallopt(param, value):
            calls.append((param, value))
            return 1

    fresh.setattr(host_memory.platform, "system", lambda: "Linux")
    fresh.setattr(host_memory.platform, "libc_ver", lambda: ("glibc", "2.36"))
    fresh.setattr(host_memory.ctypes, "CDLL", lambda _: Libc())
    assert host_memory.keep_freed_memory() is True
    assert calls == [(host_memory.M_MMAP_THRESHOLD, 32 * 2**20), (host_memory.M_TRIM_THRESHOLD, -1)]


@pytest.mark.skipif(not GLIBC or THP_ALWAYS, reason="mallopt is glibc's; 4 KiB pages counted")
def test_once_the_heap_has_grown_a_step_faults_nothing_in_again():
    """Steps that free 128 MiB: kept, the heap holds it for the next step. (glibc's defaults
    trim such a heap's top now and then, or not: their faults are not asserted.)"""
    run = _last_json(_python("-c", STEPS))
    assert run["kept"] is True
    assert run["faults"][0] > 30000  # the first step touches its 32,768 pages
    assert max(run["faults"][3:]) < 1600  # the last two under 5% of them


def test_jemalloc_env_only_where_the_user_chose_nothing(fresh):
    fresh.setattr(host_memory.ctypes.util, "find_library", lambda name: f"lib{name}.so.2")
    assert host_memory.jemalloc_env() == {"LD_PRELOAD": "libjemalloc.so.2",
                                          "MALLOC_CONF": host_memory.JEMALLOC_CONF}  # fmt: skip
    for name, value in [("ATTNLAB_MALLOC", "default"), ("MALLOC_CONF", "narenas:1"),
                        ("MALLOC_ARENA_MAX", "2"), ("LD_PRELOAD", "libtcmalloc.so.4"),
                        ("LD_PRELOAD", "libmine.so")]:  # fmt: skip
        with pytest.MonkeyPatch.context() as env:
            env.setenv(name, value)
            assert host_memory.jemalloc_env() == {}, name
    with pytest.MonkeyPatch.context() as already:
        already.setattr(host_memory, "allocator", lambda: "jemalloc")
        assert host_memory.jemalloc_env() == {}
    fresh.setattr(host_memory.ctypes.util, "find_library", lambda name: None)
    assert host_memory.jemalloc_env() == {}


@pytest.mark.skipif(not GLIBC or THP_ALWAYS or not host_memory.jemalloc_env(),
                    reason="no jemalloc here (Debian: apt-get install libjemalloc2), or huge pages")  # fmt: skip
def test_a_process_started_with_jemalloc_env_reuses_even_the_largest_blocks():
    """The 48 MiB blocks, which glibc maps afresh every step under any mallopt setting, fault
    nothing in again under jemalloc with its purging off."""

    def faults(extra: dict[str, str]) -> list[int]:
        return _last_json(_python("-c", LARGE_STEPS, extra=extra))["faults"]

    glibc, jemalloc = faults({}), faults(host_memory.jemalloc_env())
    assert min(glibc[1:]) > 24000  # 2 x 48 MiB = 24,576 pages, mapped and faulted every step
    assert jemalloc[0] > 24000 and max(jemalloc[3:]) < 1600


@pytest.mark.parametrize(
    "command, restarts", [("train", True), ("report", True), ("predict", False)]
)
def test_only_long_commands_start_again_on_jemalloc(command, restarts, fresh):
    fresh.setattr(host_memory.ctypes.util, "find_library", lambda name: f"lib{name}.so.2")
    started = []
    fresh.setattr(host_memory.os, "execv", lambda exe, args: started.append((exe, args)))
    fresh.setattr(host_memory.os, "environ", dict(os.environ))  # the update stays here
    # as torchrun starts a rank: the interpreter's flags come back too
    fresh.setattr(host_memory.sys, "orig_argv", ["python3", "-u", "-m", "attnlab", command, "pos"])
    host_memory.restart_with_jemalloc(command)
    assert bool(started) is restarts
    if restarts:
        assert started == [
            (sys.executable, [sys.executable, "-u", "-m", "attnlab", command, "pos"])
        ]
        assert host_memory.os.environ["LD_PRELOAD"] == "libjemalloc.so.2"


def test_a_failed_restart_carries_on_as_it_was(fresh):
    fresh.setattr(host_memory.ctypes.util, "find_library", lambda name: f"lib{name}.so.2")
    fresh.setattr(host_memory.os, "environ", dict(os.environ))

    def fails(exe, args):
        raise PermissionError(exe)

    fresh.setattr(host_memory.os, "execv", fails)
    host_memory.restart_with_jemalloc("train")
    assert "MALLOC_CONF" not in host_memory.os.environ
    assert not host_memory.os.environ.get("LD_PRELOAD")


@pytest.mark.skipif(not host_memory.jemalloc_env(), reason="no jemalloc here (libjemalloc2)")
def test_the_attnlab_command_starts_again_once_on_jemalloc(tmp_path):
    out = _python("-m", "attnlab", "train", "no-such-task", "-v", check=False, cwd=tmp_path)
    assert out.returncode == 2 and "no-such-task" in out.stderr
    assert out.stderr.count("starting again on jemalloc") == 1  # then not again
    assert "cannot be preloaded" not in out.stderr


ALLOCATOR = """
from attnlab.lab.train import host_memory
print(host_memory.allocator(), host_memory.keep_freed_memory())
"""


@pytest.mark.skipif(not GLIBC or not host_memory.jemalloc_env(),
                    reason="no jemalloc here (Debian: apt-get install libjemalloc2)")  # fmt: skip
def test_glibc_is_tuned_unless_jemalloc_really_loaded():
    """On jemalloc the mallopt settings are moot; where the preload failed (a name ld.so cannot
    find), the process is on glibc and gets them."""

    def run(extra: dict[str, str]) -> list[str]:
        return _python("-c", ALLOCATOR, extra=extra).stdout.split()

    jemalloc = host_memory.jemalloc_env()
    assert run(jemalloc) == ["jemalloc", "False"]
    assert run({**jemalloc, "LD_PRELOAD": "libjemalloc-nowhere.so.2"}) == ["glibc", "True"]
    assert run({}) == ["glibc", "True"]


RELEASE = """
import json, torch
from attnlab.lab.train import host_memory
host_memory.keep_freed_memory()
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20
blocks = [torch.ones(mib * 256 * 1024) for mib in [16] * 12 + [48, 48]]  # 288 MiB
del blocks
kept = resident()
released = host_memory.release_freed_memory()
print(json.dumps({"allocator": host_memory.allocator(), "released": released,
                  "kept": kept, "after": resident()}))
"""


@pytest.mark.skipif(not GLIBC, reason="malloc_trim and the preload are glibc's and Linux's")
@pytest.mark.parametrize("on", ["glibc", "jemalloc"])
def test_release_hands_a_jobs_freed_memory_back(on):
    """What the settings keep for the next step (the 16 MiB blocks under glibc, all of them
    under jemalloc) goes back to the system when a job ends."""
    extra = host_memory.jemalloc_env() if on == "jemalloc" else {}
    if on == "jemalloc" and not extra:
        pytest.skip("no jemalloc here (Debian: apt-get install libjemalloc2)")
    run = _last_json(_python("-c", RELEASE, extra=extra))
    assert run["allocator"] == on and run["released"] is True
    kept = 288 if on == "jemalloc" else 192  # glibc unmapped its 48 MiB blocks at once
    assert run["kept"] - run["after"] > 0.8 * kept, run
