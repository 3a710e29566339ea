"""What stops a run or a checkpoint load is one line naming the cause (issue 32): a disk that
fills up while a checkpoint is written (the previous checkpoint stays intact), and a checkpoint
whose weights no longer fit the model its config builds (the weight, both shapes, and which
side's code is older). Through ``attnlab`` in this process, on the toy task."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from attnlab.lab.cli import main
from attnlab.lab.train import load_checkpoint

from . import toy_task  # noqa: F401  (registers the "toy" task)

TOY = ["--train.epochs=3", "--train.batch_size=16", "--train.lr=1e-2", "--train.device=cpu",
       "--train.log_every=0", "--train.checkpoint_every=2"]  # fmt: skip


def one_error_line(err: str, command: str) -> str:
    """The error line that ends ``err`` (after a training run's progress bar and log lines),
    with no traceback before it."""
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"attnlab {command}: error: ") and "Traceback" not in err, err
    return last


def temp_files(run: Path) -> list[Path]:
    return sorted(run.glob(".*.tmp"))


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toy") / "run"
    assert main(["train", "toy", *TOY, f"--out_dir={out}"]) == 0
    return out


# -- a full disk ------------------------------------------------------------------------------


class _FullDisk:
    """``os.fdopen`` whose binary files take ``budget`` bytes in all, then raise ENOSPC as a
    full file system does (torch.save then raises its own RuntimeError over it)."""

    def __init__(self, budget: int) -> None:
        self.left = budget
        self._fdopen = os.fdopen

    def __call__(self, fd, mode="r", *args, **kwargs):
        f = self._fdopen(fd, mode, *args, **kwargs)
        return _Limited(f, self) if "b" in mode and "w" in mode else f


class _Limited:
    def __init__(self, f, disk: _FullDisk) -> None:
        self._f, self._disk = f, disk

    def write(self, data) -> int:
        n = memoryview(data).nbytes
        if n > self._disk.left:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self._disk.left -= n
        return self._f.write(data)

    def __getattr__(self, name):
        return getattr(self._f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._f.close()


def test_a_full_disk_stops_the_run_with_one_line_and_keeps_the_last_checkpoint(
    toy_run, tmp_path, capsys, monkeypatch
):
    size = (toy_run / "last.pt").stat().st_size
    out = tmp_path / "run"
    monkeypatch.setattr(os, "fdopen", _FullDisk(budget=int(1.5 * size)))  # one checkpoint fits
    capsys.readouterr()
    assert main(["train", "toy", *TOY, f"--out_dir={out}"]) == 2
    line = one_error_line(capsys.readouterr().err, "train")
    assert f"attnlab train: error: {out}: no space left on device writing " in line
    assert "it needs at least" in line and "free;" in line and "--resume" in line
    monkeypatch.undo()
    assert temp_files(out) == []
    saved = [p for p in (out / "last.pt", out / "best.pt") if p.exists()]
    assert saved  # the one checkpoint that fitted
    for path in saved:
        assert load_checkpoint(path)["state"]["step"] >= 1  # readable, not half-written
    if "the previous" in line:
        name = line.split("writing ")[1].split(":")[0]
        assert f"the previous {name} is intact" in line and (out / name).exists()


@contextlib.contextmanager
def tmpfs(path: Path, size: int):
    """A real, small file system at ``path`` (root only), unmounted afterwards."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None,
                    reason="mounting a small tmpfs needs root")  # fmt: skip
def test_a_really_full_disk(toy_run, tmp_path, capsys):
    size = (toy_run / "last.pt").stat().st_size
    pages = -(-int(2.5 * size) // 4096) * 4096  # room for two checkpoints, not a third
    with tmpfs(tmp_path / "small", pages) as disk:
        out = disk / "run"
        capsys.readouterr()
        assert main(["train", "toy", *TOY, f"--out_dir={out}"]) == 2
        line = one_error_line(capsys.readouterr().err, "train")
        assert f"{out}: no space left on device writing " in line and "intact" in line
        assert temp_files(out) == []
        for name in ("last.pt", "best.pt"):
            assert load_checkpoint(out / name)["state"]["step"] >= 1


# -- weights that do not fit the config --------------------------------------------------------

HERE = {"attnlab": "0.1.0", "commit": "b" * 40, "commit_time": 2_000_000, "dirty": False}


@pytest.fixture
def edited(toy_run, tmp_path, monkeypatch):
    """A copy of the toy run whose best.pt is rewritten by ``edit(ckpt)``; the code reading it
    is :data:`HERE`."""
    monkeypatch.setattr("attnlab.lab.train.checkpoint.code_identity", lambda: HERE)
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)

    def edit(change, written_by=None) -> Path:
        ckpt = torch.load(run / "best.pt", weights_only=True)
        change(ckpt["model"])
        if written_by is None:
            ckpt.pop("written_by", None)
        else:
            ckpt["written_by"] = written_by
        torch.save(ckpt, run / "best.pt")
        return run

    return edit


def wider(weights):
    weights["hidden.weight"] = torch.zeros(33, weights["hidden.weight"].shape[1])


OLDER = {"attnlab": "0.1.0", "commit": "a" * 40, "commit_time": 1_000_000, "dirty": False}
NEWER = {**OLDER, "commit_time": 3_000_000}

CASES = {
    "unstamped": (wider, None, ["'hidden.weight' is (33, 16) in the checkpoint but (32, 16) in "
                                "the model", "predates attnlab's version stamps, so it is older"]),
    "older": (wider, OLDER, ["the checkpoint is older: written by attnlab 0.1.0 at commit "
                             "aaaaaaaaaaaa (1970-01-12), read by attnlab 0.1.0 at commit "
                             "bbbbbbbbbbbb (1970-01-24)", "git checkout aaaaaaaaaaaa"]),
    "newer": (wider, NEWER, ["the checkpoint is newer", "update attnlab"]),
    "same commit": (wider, {**HERE, "dirty": True}, ["uncommitted changes"]),
    "lacks": (lambda w: w.pop("norm.bias"), OLDER,
              ["the model has 'norm.bias', which the checkpoint lacks"]),
    "extra": (lambda w: w.update(extra=torch.zeros(2)), OLDER,
              ["the checkpoint has 'extra', which the model lacks"]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_weights_that_do_not_fit_name_the_weight_and_the_older_side(edited, capsys, case):
    change, written_by, fragments = CASES[case]
    run = edited(change, written_by)
    capsys.readouterr()
    assert main(["eval", str(run)]) == 2
    line = one_error_line(capsys.readouterr().err, "eval")
    assert f"{run / 'best.pt'}: its weights do not fit the model its config builds: " in line
    for fragment in fragments:
        assert fragment in line, (fragment, line)


def test_resume_from_weights_that_do_not_fit(toy_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("attnlab.lab.train.checkpoint.code_identity", lambda: HERE)
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    ckpt = torch.load(run / "last.pt", weights_only=True)
    wider(ckpt["model"])
    ckpt["written_by"] = OLDER
    torch.save(ckpt, run / "last.pt")
    capsys.readouterr()
    # one more epoch: resuming the complete run as it was would only say it is complete
    assert main(["train", "toy", *TOY, "--train.epochs=4", f"--out_dir={run}", "--resume"]) == 2
    line = one_error_line(capsys.readouterr().err, "train")
    assert "resume: the run's last.pt: its weights do not fit" in line and "older" in line


def test_checkpoints_say_which_code_wrote_them(toy_run):
    from attnlab import __version__

    written_by = load_checkpoint(toy_run / "best.pt")["written_by"]
    assert written_by["attnlab"] == __version__ and written_by["time"] > 0
