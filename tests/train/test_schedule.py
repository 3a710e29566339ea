"""Warm-up then cosine / linear / constant learning rates."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.lab.train.schedule import WarmupDecay, build_scheduler


@pytest.mark.parametrize("schedule", ["cosine", "linear", "constant"])
def test_warmup_then_decay(schedule):
    f = WarmupDecay(total_steps=14, warmup_steps=4, schedule=schedule, min_ratio=0.1)
    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert f(4) == pytest.approx(1.0)
    end = 1.0 if schedule == "constant" else 0.1
    assert f(14) == pytest.approx(end) and f(100) == pytest.approx(end)
    if schedule == "cosine":
        assert f(9) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    if schedule == "linear":
        assert f(9) == pytest.approx(0.55)
    values = [f(s) for s in range(4, 15)]
    assert values == sorted(values, reverse=True)


def test_unknown_schedule_lists_choices():
    with pytest.raises(ValueError, match="constant, cosine, linear"):
        WarmupDecay(10, schedule="step")


def test_scheduler_drives_the_optimizer_and_warmup_fraction():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=2.0)
    sched = build_scheduler(opt, total_steps=10, warmup_fraction=0.2, schedule="linear")
    assert opt.param_groups[0]["lr"] == pytest.approx(1.0)  # step 0 of 2 warm-up steps
    lrs = []
    for _ in range(10):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs[0] == pytest.approx(2.0) and lrs[-1] == pytest.approx(0.0)
