"""Heads and poolings: shapes, padding-awareness."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.models import POOLINGS, SequenceHead, TokenHead

B, N, D, L = 3, 6, 8, 5
LENGTHS = torch.tensor([6, 3, 0])


def hidden(seed: int = 0) -> torch.Tensor:
    return torch.randn(B, N, D, generator=torch.Generator().manual_seed(seed))


def test_token_head_shape():
    logits, weights = TokenHead(D, L)(hidden(), LENGTHS)
    assert logits.shape == (B, N, L) and weights is None


@pytest.mark.parametrize("pooling", POOLINGS.names())
def test_sequence_head_shape_and_padding_awareness(pooling):
    torch.manual_seed(0)
    head = SequenceHead(D, L, pooling=pooling).eval()
    h = hidden()
    noisy = h.clone()
    noisy[1, 3:] = 1e3 * torch.randn(3, D)
    noisy[2] = -1e3
    logits, weights = head(h, LENGTHS)
    assert logits.shape == (B, L)
    torch.testing.assert_close(head(noisy, LENGTHS).logits, logits)
    torch.testing.assert_close(logits[2], head.proj.bias)  # empty sequence pools to zeros
    if pooling == "attention":
        assert weights.shape == (B, N)
        torch.testing.assert_close(weights[:2].sum(-1), torch.ones(2))
        assert (weights[1, 3:] == 0).all() and (weights[2] == 0).all()
    else:
        assert weights is None


@pytest.mark.parametrize(
    "pooling, reference",
    [
        ("mean", lambda h: h.mean(0)),
        ("max", lambda h: h.amax(0)),
        ("first", lambda h: h[0]),
        ("last", lambda h: h[-1]),
    ],
)
def test_poolings_match_their_definition_on_the_valid_part(pooling, reference):
    pool = POOLINGS.get(pooling)(D)
    h = hidden()
    pooled = pool(h, LENGTHS).pooled
    for b, n in enumerate(LENGTHS.tolist()[:2]):
        torch.testing.assert_close(pooled[b], reference(h[b, :n]))


def test_attention_pooling_is_attend_with_one_query():
    """Values, weights and gradients equal attend()'s with the learned query (float64),
    with or without autocast."""
    from attnlab.functional import attend
    from attnlab.lab.models.encoders import valid_positions

    pool = POOLINGS.get("attention")(D).double()
    h = hidden().double().requires_grad_()
    mask = valid_positions(LENGTHS, N).view(B, 1, 1, N)
    ref = attend(pool.query.expand(B, 1, 1, D), h.unsqueeze(1), h.unsqueeze(1), mask=mask)
    want = torch.autograd.grad(ref.out.sum(), (h, pool.query))
    got = pool(h, LENGTHS)
    torch.testing.assert_close(got.pooled, ref.out.view(B, D))
    torch.testing.assert_close(got.weights, ref.weights.view(B, N))
    for g, w in zip(torch.autograd.grad(got.pooled.sum(), (h, pool.query)), want):
        torch.testing.assert_close(g, w)
    pool = POOLINGS.get("attention")(D)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # computed in float32 all the same
        pooled = pool(hidden(), LENGTHS).pooled
    torch.testing.assert_close(pooled, pool(hidden(), LENGTHS).pooled, rtol=0, atol=0)


def test_attention_pooling_ignores_nan_and_inf_at_padded_positions():
    """Uninitialised padding or a diverged encoder there reaches neither the pooled vector
    nor the gradients of the real positions."""
    pool = POOLINGS.get("attention")(D)
    h = hidden().requires_grad_()
    bad = h.detach().clone()
    bad[1, 3:] = float("nan")
    bad[2] = float("inf")
    bad.requires_grad_()
    clean, dirty = pool(h, LENGTHS).pooled, pool(bad, LENGTHS).pooled
    torch.testing.assert_close(dirty[:2], clean[:2])
    assert (dirty[2] == 0).all()  # the empty sequence
    dirty.sum().backward()
    clean.sum().backward()
    torch.testing.assert_close(bad.grad[1, :3], h.grad[1, :3])
    assert bad.grad.isfinite().all()


def test_attention_pooling_gets_gradients():
    head = SequenceHead(D, L, pooling="attention")
    head(hidden(), LENGTHS).logits.sum().backward()
    for name, p in head.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_unknown_pooling_lists_choices():
    with pytest.raises(ValueError, match="attention, first, last, max, mean"):
        SequenceHead(D, L, pooling="median")
