"""Ctrl-C that saves: ``attnlab train`` in a subprocess, stopped by SIGINT / SIGTERM."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from attnlab.lab.train import load_checkpoint
from attnlab.lab.train.interrupt import resume_command

from .cli_toy import main  # registers the slowtoy task
from .helpers import assert_same_tensors, run

SCRIPT = Path(__file__).with_name("cli_toy.py")
# toy_config's settings, spelled as CLI options (18 steps: 3 epochs of 6)
OPTIONS = [
    "--train.epochs=3", "--train.batch_size=16", "--train.lr=1e-2", "--train.device=cpu",
    "--train.log_every=0", "--train.warmup_steps=2", "--model.encoder.dropout=0.3",
    "--train.precision=fp32",
]  # fmt: skip


def _start(out_dir: Path, mark: Path, *, sleep: float, mark_at: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1", SLOWTOY_SLEEP=str(sleep), SLOWTOY_MARK=str(mark),
               SLOWTOY_MARK_AT=str(mark_at))  # fmt: skip
    cmd = [sys.executable, str(SCRIPT), "train", "slowtoy", *OPTIONS, f"--out_dir={out_dir}"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_for(mark: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not mark.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "training never started"
        time.sleep(0.01)


def test_first_signal_saves_last_pt_and_prints_the_resume_command(tmp_path, monkeypatch):
    out_dir, mark = tmp_path / "run", tmp_path / "started"
    proc = _start(out_dir, mark, sleep=0.2, mark_at=3)
    _wait_for(mark, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)

    assert proc.returncode == 130, err
    assert "Traceback" not in err
    step = load_checkpoint(out_dir / "last.pt")["state"]["step"]
    assert 3 <= step < 18  # the step in progress was finished and saved
    assert f"interrupted by SIGINT after step {step} of 18; saved {out_dir / 'last.pt'}" in err
    command = err.split("resume with: ", 1)[1].splitlines()[0]
    words = shlex.split(command)
    assert words[:3] == ["attnlab", "train", "slowtoy"] and words[-1] == "--resume"
    assert not (out_dir / ".lock").exists()

    # The printed command continues the run to the result of an uninterrupted one, bitwise.
    for var in ("SLOWTOY_SLEEP", "SLOWTOY_MARK"):
        monkeypatch.delenv(var, raising=False)
    assert main(words[1:]) == 0
    run(tmp_path / "full", "--model.encoder.dropout=0.3")
    a, b = load_checkpoint(tmp_path / "full" / "last.pt"), load_checkpoint(out_dir / "last.pt")
    for key in ("model", "optimizer", "scheduler", "rng"):
        assert_same_tensors(a[key], b[key], key)


def test_sigterm_is_caught_too_and_a_second_signal_exits_at_once(tmp_path):
    out_dir, mark = tmp_path / "run", tmp_path / "started"
    proc = _start(out_dir, mark, sleep=60, mark_at=2)  # step 2 would take a minute
    _wait_for(mark, proc)
    proc.send_signal(signal.SIGTERM)  # caught: without a handler it would end the process
    time.sleep(1.5)  # past the 1 s in which a repeat counts as the same request
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGINT and time.monotonic() - t0 < 10
    assert "SIGTERM: stopping after the current step" in err
    assert not (out_dir / "last.pt").exists()  # nothing saved: it did not wait for the step


def test_resume_command():
    words = ["train", "pos", "--config", "my run.json", "--train.overwrite=true", "--a.b=1"]
    assert resume_command([*words, "--overwrite"]) == (
        "attnlab train pos --config 'my run.json' --a.b=1 --resume"
    )
    assert resume_command(["train", "pos", "--resume"], world_size=2) == (
        "torchrun --standalone --nproc_per_node=2 -m attnlab train pos --resume"
    )


def test_a_signal_between_runs_is_kept_for_the_next_run():
    """In a report's worker a SIGINT that arrives while no run is training (it sets up, or
    none has started) neither kills the process nor is lost: the next ``StopOnSignal`` takes
    it as its request, once."""
    from attnlab.lab.train.interrupt import (
        StopOnSignal,
        catch_signals_between_runs,
        pending_signal,
    )

    before = signal.getsignal(signal.SIGINT)
    try:
        catch_signals_between_runs()
        assert pending_signal() is None
        os.kill(os.getpid(), signal.SIGINT)  # handled (the main thread) before kill returns
        assert pending_signal() == "SIGINT"
        with StopOnSignal() as stop:
            assert stop.requested and stop.signal_name == "SIGINT"
        assert pending_signal() is None
        with StopOnSignal() as stop:
            assert not stop.requested  # taken up once
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_stop_requested_without_a_signal_is_a_first_ctrl_c_and_never_escalates():
    """The memory guard's request (another thread's, no signal): the run entered takes it, or
    the next one; a real SIGINT after it, however late, is still a first Ctrl-C (recorded, the
    process alive); a request no run took is withdrawn."""
    from attnlab.lab.train.interrupt import (
        StopOnSignal,
        pending_signal,
        request_stop,
        withdraw_request,
    )

    with StopOnSignal(grace_s=0.0) as stop:
        request_stop("the memory limit")
        assert stop.requested and stop.signal_name == "the memory limit"
        os.kill(os.getpid(), signal.SIGINT)  # handled before kill returns: no second signal
        assert stop.signal_name == "SIGINT"  # alive, the stop still asked for
    request_stop("the memory limit")  # no run: kept for the next one
    assert pending_signal() == "the memory limit"
    with StopOnSignal(grace_s=0.0) as stop:
        assert stop.signal_name == "the memory limit"
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.signal_name == "SIGINT"
    request_stop("the memory limit")
    withdraw_request("the memory limit")
    assert pending_signal() is None
    with StopOnSignal() as stop:
        assert not stop.requested
