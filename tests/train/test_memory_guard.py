"""The memory guard: over its limit it first hands freed memory back, then stops the run once;
past the hard limit it kills; under it, nothing happens. Its readings are given by the tests,
except in the last test, which reads this process's own."""

from __future__ import annotations

import mmap
import sys
import threading

import pytest

from attnlab.lab.train import memory_guard
from attnlab.lab.train.memory_guard import GIB, HARD_FACTOR, MemoryGuard, held_bytes


class Process:
    """What the guard sees and does to: the memory it holds, which a purge can lower, and the stop
    and kill it asks for, each recorded."""

    def __init__(self, held: int, after_purge: int | None = None) -> None:
        self.held, self.after_purge = held, after_purge
        self.purges = self.stops = self.kills = 0
        self.acted = threading.Event()
        self.readings = 0

    def read(self) -> int:
        self.readings += 1
        return self.held

    def purge(self) -> bool:
        self.purges += 1
        if self.after_purge is not None:
            self.held = self.after_purge
        return True

    def stop(self) -> None:
        self.stops += 1
        self.acted.set()

    def kill(self) -> None:
        self.kills += 1
        self.acted.set()

    def guard(self, limit: int, monkeypatch) -> MemoryGuard:
        monkeypatch.setattr(memory_guard, "release_freed_memory", self.purge)
        return MemoryGuard(limit, interval_s=0.005, held=self.read, stop=self.stop,
                           kill=self.kill)  # fmt: skip


def _watch(process: Process, guard: MemoryGuard, readings: int = 20) -> None:
    """Run ``guard`` until it acts or has looked ``readings`` times."""
    with guard:
        while not process.acted.wait(0.005) and process.readings < readings:
            pass


def test_under_its_limit_the_guard_does_nothing(monkeypatch):
    process = Process(held=GIB)
    guard = process.guard(GIB, monkeypatch)  # at the limit is not over it
    _watch(process, guard)
    assert process.readings >= 20
    assert (process.purges, process.stops, process.kills, guard.tripped) == (0, 0, 0, None)


def test_over_its_limit_it_purges_first_and_stops_nothing_if_that_is_enough(monkeypatch):
    process = Process(held=4 * GIB, after_purge=GIB)  # past the hard limit, even
    guard = process.guard(2 * GIB, monkeypatch)
    _watch(process, guard)
    assert process.purges == 1 and (process.stops, process.kills, guard.tripped) == (0, 0, None)


def test_over_its_limit_after_a_purge_it_stops_the_run_once_and_says_why(monkeypatch):
    held = int(2.2 * GIB)  # over 2 GiB, under the hard limit
    process = Process(held=held)
    guard = process.guard(2 * GIB, monkeypatch)
    with guard:
        assert process.acted.wait(5)
        while process.readings < 10:  # still over: it does not ask again
            threading.Event().wait(0.005)
    assert process.purges >= 1 and (process.stops, process.kills) == (1, 0)
    assert guard.tripped == held
    assert guard.message() == "its process held 2.2 GiB, over the limit of 2.0 GiB"


def test_past_the_hard_limit_after_a_purge_it_kills_at_once_and_says_so(monkeypatch, capsys):
    process = Process(held=int(2 * GIB * HARD_FACTOR) + 1)
    guard = process.guard(2 * GIB, monkeypatch)
    _watch(process, guard)
    assert (process.purges, process.kills, process.stops) == (1, 1, 0)
    assert "past 1.25 x its limit of 2.0 GiB: killed" in capsys.readouterr().err


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_must_be_positive(limit):
    with pytest.raises(
        ValueError, match=f"limit: expected a positive number of bytes, got {limit}"
    ):
        MemoryGuard(limit)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_it_reads_the_memory_this_process_holds():
    size = 64 * 1024**2
    with mmap.mmap(-1, size) as block:  # fresh pages, whatever the allocator keeps
        before = held_bytes()
        block.write(b"x" * size)  # every page touched
        after = held_bytes()
    assert before is not None and after is not None
    assert after - before >= 60 * 1024**2, (before, after)
