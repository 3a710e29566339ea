"""The run directory: checked before data loads, locked, never silently replaced or mixed."""

from __future__ import annotations

import gc
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attnlab.lab.train import RunError, Trainer, load_checkpoint
from attnlab.lab.train.atomic import remove_stale_temp_files, temp_file_pattern
from attnlab.lab.train.distributed import DistEnv
from attnlab.lab.train.rundir import LOCK_NAME, RunLock, check_out_dir, open_run_dir

from .helpers import Crash, CrashingToy, run
from .toy_task import ToyTask, toy_config


class RecordingToy(ToyTask):
    """The toy task, counting how often it loaded its data."""

    setups = 0

    def setup(self, options) -> None:
        type(self).setups += 1
        super().setup(options)


def _new_trainer(out_dir, *overrides: str, **kwargs) -> Trainer:
    return Trainer(ToyTask(), toy_config(out_dir, *overrides), progress=False, **kwargs)


# ---- item 9: an unusable out_dir fails first, naming the path and the reason -----------------
def _a_file(tmp_path: Path) -> Path:
    (tmp_path / "file").write_text("not a directory")
    return tmp_path / "file"


BAD_OUT_DIRS = {
    "is_a_file": (lambda tmp: _a_file(tmp), "exists and is not a directory"),
    "under_a_file": (lambda tmp: _a_file(tmp) / "run", "file is not a directory"),
    "read_only_fs": (lambda tmp: Path("/proc/attnlab-test/run"), "cannot create it"),
}


@pytest.mark.parametrize("case", list(BAD_OUT_DIRS))
def test_bad_out_dir_fails_before_any_data_loads(tmp_path, case):
    make, reason = BAD_OUT_DIRS[case]
    out_dir = make(tmp_path)
    if case == "read_only_fs" and not Path("/proc/self").is_dir():
        pytest.skip("needs Linux /proc")
    RecordingToy.setups = 0
    with pytest.raises(RunError, match=reason) as err:
        Trainer(RecordingToy(), toy_config(out_dir), progress=False)
    assert str(out_dir) in str(err.value)
    assert RecordingToy.setups == 0  # refused before loading anything


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_unwritable_out_dir_names_the_reason(tmp_path):
    locked = tmp_path / "ro"
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(RunError, match=f"out_dir {locked}: cannot write there .*ermission"):
            check_out_dir(locked)
        with pytest.raises(RunError, match="cannot create it .*ermission"):
            check_out_dir(locked / "run")
    finally:
        locked.chmod(0o700)


def test_failed_start_leaves_no_empty_directory_behind(tmp_path):
    class Broken(ToyTask):
        def setup(self, options):
            raise FileNotFoundError("no data")

    with pytest.raises(FileNotFoundError):
        Trainer(Broken(), toy_config(tmp_path / "new"), progress=False)
    assert not (tmp_path / "new").exists()  # created for the run, removed with its lock


# ---- item 2: an exclusive lock that names its holder ----------------------------------------
HOLDER = textwrap.dedent("""
    import sys, time
    from attnlab.lab.train.rundir import RunLock
    lock = RunLock(sys.argv[1])
    lock.acquire()
    print("locked", flush=True)
    time.sleep(120)
""")


def test_a_locked_directory_is_refused_naming_the_holder_and_a_dead_one_is_taken_over(
    tmp_path, caplog
):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / LOCK_NAME)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        RecordingToy.setups = 0
        with pytest.raises(
            RunError, match=rf"in use by another run \(pid {holder.pid} on .*started"
        ):
            Trainer(RecordingToy(), toy_config(tmp_path), progress=False)
        assert RecordingToy.setups == 0
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The killed holder's lock file stays; the kernel dropped its lock: the next run takes over.
    assert str(holder.pid) in (tmp_path / LOCK_NAME).read_text()
    with caplog.at_level(logging.WARNING, logger="attnlab"):
        assert run(tmp_path, "--train.epochs=1").steps == 6
    assert f"pid {holder.pid}" in caplog.text and "is gone" in caplog.text
    assert not (tmp_path / LOCK_NAME).exists()  # a finished run removes its lock file


def test_two_trainers_in_one_directory(tmp_path):
    first = _new_trainer(tmp_path, "--train.epochs=1")
    with pytest.raises(RunError, match=f"in use by another run \\(pid {os.getpid()}"):
        _new_trainer(tmp_path, "--train.epochs=1")
    first.fit()  # the refused one changed nothing
    assert not (tmp_path / LOCK_NAME).exists()
    del first
    # An unclosed trainer releases its lock when it is garbage-collected.
    unclosed = _new_trainer(tmp_path / "other")
    del unclosed
    gc.collect()
    _new_trainer(tmp_path / "other").close()


def test_lock_release_is_idempotent_and_relockable(tmp_path):
    lock = RunLock(tmp_path / LOCK_NAME)
    assert lock.acquire() is None and lock.held
    lock.release()
    lock.release()
    assert not lock.held and not (tmp_path / LOCK_NAME).exists()
    assert RunLock(tmp_path / LOCK_NAME).acquire() is None


# ---- item 3: a finished run is never replaced silently, nor mixed with another --------------
def test_existing_run_is_refused_without_overwrite_or_resume(tmp_path):
    run(tmp_path, "--train.epochs=1")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    RecordingToy.setups = 0
    with pytest.raises(RunError, match="already holds a run .*--overwrite.*--resume") as err:
        Trainer(RecordingToy(), toy_config(tmp_path, "--train.epochs=2"), progress=False)
    assert str(tmp_path) in str(err.value) and RecordingToy.setups == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # untouched

    with pytest.raises(RunError, match="exclude each other"):
        _new_trainer(tmp_path, resume=True, overwrite=True)
    assert run(tmp_path, "--train.epochs=1", resume=True).steps == 6  # continue: nothing to do
    replaced = Trainer(ToyTask(), toy_config(tmp_path, "--train.epochs=2"), progress=False,
                       overwrite=True).fit()  # fmt: skip
    assert replaced.steps == 12 and load_checkpoint(tmp_path / "best.pt")["state"]["step"] == 12


def test_overwrite_via_config_and_an_interrupted_overwrite_never_mixes_runs(tmp_path):
    run(tmp_path, "--train.epochs=2")
    # The new run dies in its first step: the old run's files are gone, none of them serves.
    with pytest.raises(Crash):
        run(tmp_path, "--train.epochs=1", "--train.overwrite=true", task=CrashingToy(1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]
    assert '"epochs": 1' in (tmp_path / "config.json").read_text()


def test_overwrite_removes_the_old_runs_epoch_snapshots(tmp_path):
    # Left behind, the old run's epochs 2 and 3 would be averaged with the new run's epoch 1.
    run(tmp_path, "--train.epochs=3", "--train.keep_epochs=3")
    run(tmp_path, "--train.epochs=1", "--train.keep_epochs=1", "--train.overwrite=true")
    assert sorted(p.name for p in tmp_path.glob("epoch-*.pt")) == ["epoch-001.pt"]
    only = tmp_path / "snapshots-only"
    only.mkdir()
    (only / "epoch-003.pt").write_bytes((tmp_path / "epoch-001.pt").read_bytes())
    with pytest.raises(RunError, match=r"already holds a run \(epoch-003.pt\)"):
        run(only, "--train.epochs=1")


# ---- item 10: temporary files of killed writes are cleaned on start and on resume ------------
STALE = [".last.pt.k3j2h1g0.tmp", ".best.pt.abcdefgh.tmp", ".metrics.csv.x1.tmp",
         ".epoch-007.pt.q9w8e7r6.tmp"]  # fmt: skip
KEEP = [".other.pt.abcdefgh.tmp", "notes.txt", ".last.pt.backup"]


@pytest.mark.parametrize("resume", [False, True], ids=["start", "resume"])
def test_stale_temp_files_of_the_run_are_removed(tmp_path, resume, caplog):
    if resume:
        run(tmp_path, "--train.epochs=1")
    for name in STALE + KEEP:
        (tmp_path / name).write_bytes(b"x" * 1000)
    with caplog.at_level(logging.WARNING, logger="attnlab"):
        run(tmp_path, "--train.epochs=1", resume=resume)
    names = {p.name for p in tmp_path.iterdir()}
    assert not names & set(STALE) and names >= set(KEEP)
    assert "removed 4 temporary file(s)" in caplog.text


def test_temp_file_pattern_matches_what_atomic_write_creates(tmp_path):
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=tmp_path, prefix=".last.pt.", suffix=".tmp")
    os.close(fd)
    assert [p.name for p in tmp_path.glob(temp_file_pattern("last.pt"))] == [Path(tmp).name]
    assert remove_stale_temp_files(tmp_path, ["last.pt"]) == {Path(tmp): 0}
    assert list(tmp_path.iterdir()) == []


def test_open_run_dir_single_process(tmp_path):
    run_dir = open_run_dir(tmp_path / "a" / "b", DistEnv())
    assert run_dir.created and (tmp_path / "a" / "b" / LOCK_NAME).is_file()
    run_dir.release()
    assert not (tmp_path / "a" / "b").exists()  # created, never written: removed
