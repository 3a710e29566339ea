"""Ensemble: the log of the members' mean class probabilities, exactly, and clear refusals."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlab.lab.models import Ensemble, ModelOutput


def _members(k: int, *, classes: int = 5) -> list[nn.Module]:
    torch.manual_seed(0)
    return [nn.Linear(4, classes).double() for _ in range(k)]


def test_the_output_is_the_log_of_the_mean_probability_float64():
    members = _members(3)
    x = torch.randn(2, 7, 4, dtype=torch.float64) * 10  # large logits: confident members
    probs = torch.stack([m(x).softmax(-1) for m in members]).mean(0)
    out = Ensemble(members)(x)
    assert out.shape == (2, 7, 5)
    torch.testing.assert_close(out.double(), probs.log(), rtol=0, atol=1e-6)  # float32 output
    torch.testing.assert_close(out.exp().sum(-1), torch.ones(2, 7), rtol=0, atol=1e-5)


def test_one_member_is_its_log_softmax_and_copies_change_nothing():
    (m,) = _members(1)
    x = torch.randn(3, 4, dtype=torch.float64)
    expected = m(x).float().log_softmax(-1)
    torch.testing.assert_close(Ensemble([m])(x), expected)
    torch.testing.assert_close(Ensemble([m, m, m])(x), expected)


def test_the_vote_follows_probabilities_not_logit_size():
    # two members prefer class 0 mildly; one prefers class 1 with huge logits. Averaging
    # logits would follow the loud member; averaging probabilities follows the majority.
    class Fixed(nn.Module):
        def __init__(self, logits):
            super().__init__()
            self.logits = torch.tensor(logits)

        def forward(self, x):
            return self.logits.expand(x.shape[0], -1)

    members = [Fixed([3.0, 0.0]), Fixed([3.0, 0.0]), Fixed([0.0, 50.0])]
    x = torch.zeros(1, 1)
    assert torch.stack([m(x) for m in members]).mean(0).argmax(-1).item() == 1
    out = Ensemble(members)(x)
    p0 = 2 / 3 * torch.tensor([3.0, 0.0]).softmax(-1)[0]  # 0.635 (the loud member: ~e^-50)
    torch.testing.assert_close(out[0, 0].exp(), p0)
    assert out.argmax(-1).item() == 0


def test_refusals_name_the_problem():
    with pytest.raises(ValueError, match="at least one model, got none"):
        Ensemble([])

    class Weights(nn.Module):
        def forward(self, x):
            return ModelOutput(x, None, None)

    with pytest.raises(TypeError, match="member 0 returned ModelOutput"):
        Ensemble([Weights()])(torch.zeros(1, 2))
