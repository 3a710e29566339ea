"""AdamW parameter groups: no weight decay on biases, norms and embeddings."""

from __future__ import annotations

import torch
from torch import nn

from attnlab.lab.train.optim import build_optimizer, param_groups


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(10, 4)
        self.pos_embedding = nn.Parameter(torch.randn(6, 4))
        self.norm = nn.LayerNorm(4)
        self.proj = nn.Linear(4, 4)
        self.out = nn.Linear(4, 10, bias=False)
        self.out.weight = self.tok.weight  # tied: placed once, not decayed
        self.extra = nn.Linear(4, 4)

    def no_weight_decay(self) -> set[str]:
        return {"extra.weight"}


def test_decay_only_weight_matrices():
    net = Net()
    decay, no_decay = param_groups(net, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in net.named_parameters()}
    assert [names[id(p)] for p in decay["params"]] == ["proj.weight"]
    assert {names[id(p)] for p in no_decay["params"]} == {
        "tok.weight", "pos_embedding", "norm.weight", "norm.bias", "proj.bias",
        "extra.weight", "extra.bias",
    }  # fmt: skip
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(net.parameters()))


def test_build_optimizer():
    opt = build_optimizer(nn.Linear(3, 3), lr=0.5, weight_decay=0.2, betas=(0.8, 0.9))
    assert [g["weight_decay"] for g in opt.param_groups] == [0.2, 0.0]
    assert opt.param_groups[0]["betas"] == (0.8, 0.9) and opt.param_groups[0]["lr"] == 0.5
