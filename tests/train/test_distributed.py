"""DDP on CPU: ``torchrun`` with 2 processes equals one process with the same global batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from attnlab.lab.tasks.registry import BUILTIN_TASKS
from attnlab.lab.train import load_checkpoint
from attnlab.lab.train.distributed import (
    DistEnv,
    all_gather_object,
    all_reduce_sum,
    broadcast_object,
    env_ranks,
    init_distributed,
    wrap_model,
)

from .helpers import final_weights, run, strip_timing

SCRIPT = Path(__file__).with_name("ddp_toy.py")
TASKS_SCRIPT = Path(__file__).with_name("ddp_tasks.py")
#: tasks whose train split is one example (a whole graph), so both ranks see the same lengths
FULL_BATCH_TASKS = {"cora", "citeseer", "karate", "node-classify"}
#: tasks whose examples all have one size (images: every batch's length is rows x cols), and
#: the own-file tasks whose tiny fixtures do (tests/tasks/data: 1 s tones, 8x8 images, pairs
#: of two words; their models are fsdd's, phones', fashion's and g2p's, checked above)
FIXED_SIZE_TASKS = {"fashion", "digits", "recall", "positions", "image-classify",
                    "audio-classify", "audio-frames", "seq2seq"}  # fmt: skip

# Tag mode (ranks hold different numbers of tokens), 99 examples in global batches of 16: the
# last batch of 3 examples leaves one of the 2 ranks x 2 accumulation micro-batches empty.
OVERRIDES = [
    "--task_options.mode=tag",
    "--task_options.n_train=99",
    "--model.encoder.dropout=0",  # dropout masks differ per rank by design
    "--train.epochs=2",
    "--train.batch_size=16",
]


def test_single_process_env(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert env_ranks() == (0, 1, 0, 1)
    env = init_distributed("cpu")
    assert env == DistEnv() and env.is_main and not env.distributed
    x = torch.ones(2)
    assert all_reduce_sum(x, env) is x and torch.equal(x, torch.ones(2))
    assert broadcast_object({"a": 1}, env) == {"a": 1} and all_gather_object(3, env) == [3]
    model = torch.nn.Linear(2, 2)
    assert wrap_model(model, env) is model
    assert not dist.is_initialized()


def _torchrun_env() -> dict[str, str]:
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")
    return {k: v for k, v in os.environ.items() if k not in drop}


def test_torchrun_two_processes_match_one(tmp_path):
    ddp_dir, report_dir = tmp_path / "ddp", tmp_path / "report"
    env = _torchrun_env()
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        str(SCRIPT), str(ddp_dir), str(report_dir), *OVERRIDES, "--train.grad_accum=2",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]

    reports = [json.loads((report_dir / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["world_size"], r["distributed"]) for r in reports] == [
        (0, 2, True), (1, 2, True),
    ]  # fmt: skip
    assert all(r["threads"] == 1 for r in reports)  # 2 ranks share the cores
    r0, r1 = (r["result"] for r in reports)
    assert r0["test"] == r1["test"] and r0["best_dev"] == r1["best_dev"]  # ranks agree
    assert r0["steps"] == 14  # ceil(99 / 16) = 7 steps per epoch

    single = run(tmp_path / "single", *OVERRIDES)
    a, b = final_weights(ddp_dir), final_weights(tmp_path / "single")
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-5)
    for row_ddp, row_single in zip(strip_timing(r0["history"]), strip_timing(single.history)):
        assert row_ddp.keys() == row_single.keys()
        for key in row_ddp:
            assert row_ddp[key] == pytest.approx(row_single[key], abs=1e-5), key
    assert r0["test"] == pytest.approx(single.test, abs=1e-5)
    # Rank 0 alone wrote the run directory.
    assert sorted(p.name for p in ddp_dir.iterdir()) == [
        "best.pt", "config.json", "last.pt", "metrics.csv", "metrics.json",
    ]  # fmt: skip


def test_torchrun_trains_the_default_model_of_every_task(tmp_path, data_mirror):
    # The real default models (rotary positions for pos, sinusoidal for the sentence tasks),
    # 2 ranks seeing sentences of different lengths: a positional table that grew per rank as a
    # DDP buffer made gloo abort ("Received data size doesn't match expected size").
    report_dir = tmp_path / "report"
    env = {**_torchrun_env(), "ATTNLAB_DATA": str(data_mirror)}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        str(TASKS_SCRIPT), str(tmp_path / "runs"), str(report_dir),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]

    r0, r1 = (json.loads((report_dir / f"rank{r}.json").read_text()) for r in range(2))
    assert set(r0) == set(r1) == set(BUILTIN_TASKS)  # every task of the lab (no test tasks)
    for name in r0:
        a, b = r0[name], r1[name]
        assert a["steps"] == b["steps"] == 3, name
        if name not in FULL_BATCH_TASKS | FIXED_SIZE_TASKS:  # a whole graph; fixed-size images
            assert a["train_lengths"] != b["train_lengths"], f"{name}: ranks saw the same lengths"
        assert a["weights"] == pytest.approx(b["weights"], rel=1e-9), name  # DDP kept them equal
        assert a["test"] == b["test"] and a["best_dev"] == b["best_dev"], name
        assert (tmp_path / "runs" / name / "last.pt").is_file(), name


@pytest.mark.slow  # another torchrun (~10 s); the single-process signal tests run by default
def test_a_signal_on_one_rank_stops_every_rank_after_the_same_step(tmp_path):
    # Rank 1 alone gets SIGTERM in step 4: the stop request travels with the step's loss
    # all-reduce, so both ranks finish step 4, rank 0 saves it, and both report it.
    env = {**_torchrun_env(), "DDP_TOY_SIGTERM": "1:4"}
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        str(SCRIPT), str(tmp_path / "run"), str(tmp_path / "report"), *OVERRIDES,
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    reports = [json.loads((tmp_path / "report" / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["interrupted"] for r in reports] == [
        {"signal": "a signal on another rank", "step": 4}, {"signal": "SIGTERM", "step": 4},
    ]  # fmt: skip
    assert load_checkpoint(tmp_path / "run" / "last.pt")["state"]["step"] == 4
