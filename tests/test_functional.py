"""The reference maths: scores and normalisations against their definitions, the properties of
:func:`attend` (masks, graphs, degenerate windows), and its gradients (``gradcheck``)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from attnlab import masks
from attnlab.functional import (
    NORMALIZATIONS,
    SCORES,
    AdditiveScore,
    attend,
    get_normalize,
    get_score,
    make_score,
)

pytestmark = pytest.mark.usefixtures("single_thread")

F64 = torch.float64


def qkv(b=2, h=2, i=5, j=6, d=4, e=None, dtype=F64, requires_grad=False):
    e = d if e is None else e
    shapes = [(b, h, i, d), (b, h, j, d), (b, h, j, e)]
    return [torch.randn(s, dtype=dtype, requires_grad=requires_grad) for s in shapes]


def build_score(name: str, h: int, d: int):
    return make_score(name, head_dim=d, heads=h).to(F64) if name == "additive" else get_score(name)


# ---- scores and normalisations against their definitions ----------------------------------------
def test_dot_scores():
    q, k, _ = qkv()
    want = torch.einsum("bhid,bhjd->bhij", q, k)
    torch.testing.assert_close(get_score("dot")(q, k), want)
    torch.testing.assert_close(get_score("scaled_dot")(q, k), want / math.sqrt(q.shape[-1]))


def test_additive_score_per_pair():
    h, d = 2, 4
    score = AdditiveScore(head_dim=d, heads=h, hidden=3).to(F64)
    q, k, _ = qkv(h=h, d=d)
    got = score(q, k)
    for b, hh, i, j in [(0, 0, 0, 0), (1, 1, 4, 5), (0, 1, 2, 3)]:
        want = score.w[hh] @ torch.tanh(q[b, hh, i] @ score.w_q[hh] + k[b, hh, j] @ score.w_k[hh])
        torch.testing.assert_close(got[b, hh, i, j], want)


def test_normalizations_follow_their_definitions():
    s = torch.randn(2, 2, 5, 6, dtype=F64)
    mask = torch.rand(2, 2, 5, 6) < 0.6
    mask[0, 0, 1] = False  # one fully masked row
    n = mask.sum(-1, keepdim=True).to(F64)
    want = {
        "softmax": torch.where(
            n > 0, torch.softmax(s.masked_fill(~mask, -math.inf), -1), torch.zeros_like(s)
        ),
        "relu": F.relu(s) / n.clamp_min(1),
        "sigmoid": torch.sigmoid(s - n.clamp_min(1).log()),
        "none": s,
    }
    for name in NORMALIZATIONS:
        got = get_normalize(name)(s, mask)
        torch.testing.assert_close(got, want[name].masked_fill(~mask, 0.0), msg=name)
        assert torch.isfinite(got).all()


def test_unmasked_elementwise_normalizations_divide_by_key_count():
    s = torch.randn(1, 1, 3, 8, dtype=F64)
    torch.testing.assert_close(get_normalize("relu")(s, None), F.relu(s) / 8)
    torch.testing.assert_close(get_normalize("sigmoid")(s, None), torch.sigmoid(s - math.log(8)))


# ---- attend ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("score", ["dot", "scaled_dot"])
def test_attend_equals_sdpa_equivalent(score):
    # The plain-Python "equivalent to" of F.scaled_dot_product_attention's docstring.
    q, k, v = qkv(e=3)
    mask = torch.rand(5, 6) < 0.7
    mask[:, 0] = True
    bias = torch.randn(1, 2, 5, 6, dtype=F64)
    scale = 1.0 if score == "dot" else 1 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-2, -1) * scale + bias
    s = s.masked_fill(~mask, -math.inf)
    want = torch.softmax(s, -1) @ v
    got = attend(q, k, v, score=score, mask=mask, bias=bias)
    torch.testing.assert_close(got.out, want)
    torch.testing.assert_close(got.weights, torch.softmax(s, -1))


def test_attend_accepts_mask_objects_and_tensors_alike(mask_kind, make_mask):
    b, h, n = 2, 3, 9
    q, k, v = qkv(b=b, h=h, i=n, j=n)
    mask = make_mask(mask_kind, b, h, n)
    if mask is None:
        pytest.skip("no mask")
    dense = masks.from_tensor(mask).dense(b, h, n, n)
    a = attend(q, k, v, mask=mask)
    c = attend(q, k, v, mask=dense)
    assert torch.equal(a.out, c.out)
    assert (a.weights.masked_select(~dense.expand_as(a.weights)) == 0).all()


@pytest.mark.parametrize("normalize", NORMALIZATIONS.names())
def test_fully_masked_rows_are_zero_with_finite_gradients(normalize):
    q, k, v = qkv(requires_grad=True)
    mask = torch.rand(2, 2, 5, 6) < 0.6
    mask[0, 1, 2] = False
    mask[1, :, 4] = False
    res = attend(q, k, v, normalize=normalize, mask=mask)
    empty = ~mask.any(-1)  # (b, h, i)
    assert (res.out[empty] == 0).all() and (res.weights[empty] == 0).all()
    assert torch.isfinite(res.out).all()
    res.out.square().sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


@pytest.mark.parametrize("normalize", NORMALIZATIONS.names())
@pytest.mark.parametrize("causal", [False, True])
def test_local_window_covering_the_sequence_is_full_attention_exactly(normalize, causal):
    n = 7
    q, k, v = qkv(i=n, j=n)
    full = attend(q, k, v, normalize=normalize, mask=masks.causal() if causal else None)
    for window in (n - 1, n, 3 * n):
        got = attend(q, k, v, normalize=normalize, mask=masks.local(window, causal=causal))
        assert torch.equal(got.out, full.out)
        assert torch.equal(got.weights, full.weights)


def test_graph_attends_only_along_edges():
    n = 6
    # 0 -> 1, 0 -> 2, 1 -> 2, 3 -> 4, 4 -> 3; node 5 has no in-edge and no self loop.
    edges = torch.tensor([[0, 0, 1, 3, 4], [1, 2, 2, 4, 3]])
    g = masks.graph(edges, n, self_loops=False)
    q, k, v = qkv(b=1, h=2, i=n, j=n)
    res = attend(q, k, v, mask=g)
    adj = torch.zeros(n, n, dtype=torch.bool)
    adj[edges[1], edges[0]] = True
    w = res.weights
    assert (w[..., ~adj] == 0).all()  # nothing off the edges
    has_in = adj.any(-1)
    torch.testing.assert_close(
        w.sum(-1)[..., has_in], torch.ones(1, 2, int(has_in.sum()), dtype=F64)
    )
    assert (w[..., adj] > 0).all()
    # Node 0 and node 5 have no in-edge: zero output.
    assert (res.out[:, :, ~has_in] == 0).all()
    # Node 1's only in-edge is from node 0: its output is node 0's value.
    torch.testing.assert_close(res.out[:, :, 1], v[:, :, 0])


def test_graph_with_self_loops_includes_the_node():
    edges = torch.tensor([[0], [1]])
    q, k, v = qkv(b=1, h=1, i=3, j=3)
    w = attend(q, k, v, mask=masks.graph(edges, 3)).weights[0, 0]
    assert torch.equal(w > 0, torch.tensor([[1, 0, 0], [1, 1, 0], [0, 0, 1]], dtype=torch.bool))


def test_dropout_only_in_training_and_weights_are_before_dropout():
    q, k, v = qkv()
    plain = attend(q, k, v)
    assert torch.equal(attend(q, k, v, dropout=0.5).out, plain.out)  # training=False
    dropped = attend(q, k, v, dropout=0.5, training=True)
    assert not torch.allclose(dropped.out, plain.out)
    assert torch.equal(dropped.weights, plain.weights)


def test_bf16_autocast_softmax_weights_in_float32():
    q, k, v = qkv(i=16, j=40, d=8, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        res = attend(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask=masks.padding([30, 40]))
    assert res.weights.dtype == torch.float32
    torch.testing.assert_close(res.weights.sum(-1), torch.ones(2, 2, 16), atol=1e-3, rtol=0)


# ---- gradients ----------------------------------------------------------------------------------
def _inputs_away_from_relu_kink(score, h, d):
    """q, k, v and a bias whose biased scores all lie at least 1e-3 from 0 (relu's kink)."""
    gen = torch.Generator().manual_seed(0)
    for _ in range(100):
        q, k, v = (torch.randn(1, h, n, d, dtype=F64, generator=gen) for n in (3, 4, 4))
        bias = torch.randn(1, h, 3, 4, dtype=F64, generator=gen)
        with torch.no_grad():
            s = score(q, k) + bias
        if s.abs().min() > 1e-3:
            return q, k, v, bias
    raise AssertionError("no seed keeps the scores away from 0")


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("normalize", NORMALIZATIONS.names())
@pytest.mark.parametrize("score_name", SCORES.names())
def test_gradcheck(score_name, normalize, with_mask):
    h, d = 2, 3
    score = build_score(score_name, h, d)
    q, k, v, bias = _inputs_away_from_relu_kink(score, h, d)
    mask = (masks.causal() | masks.global_tokens([3])) & masks.padding([3]) if with_mask else None
    inputs = [t.requires_grad_() for t in (q, k, v)]
    params = dict(score.named_parameters()) if isinstance(score, torch.nn.Module) else {}
    names = list(params)
    inputs += [p.detach().clone().requires_grad_() for p in params.values()]

    def fn(q, k, v, *ps):
        sc = score
        if names:

            def sc(q_, k_):
                return functional_call(score, dict(zip(names, ps)), (q_, k_))

        return attend(q, k, v, score=sc, normalize=normalize, mask=mask, bias=bias).out

    assert torch.autograd.gradcheck(fn, tuple(inputs))


# ---- errors --------------------------------------------------------------------------------------
def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ValueError, match="unknown score 'cosine'; valid choices: additive, dot"):
        get_score("cosine")
    with pytest.raises(ValueError, match="unknown normalization 'max'; valid choices: none, relu"):
        get_normalize("max")
    with pytest.raises(ValueError, match="unknown score"):
        attend(*qkv(), score="cosine")


def test_parametric_score_by_name_says_how_to_build_it():
    with pytest.raises(ValueError, match="make_score"):
        attend(*qkv(), score="additive")


def test_attend_rejects_bad_shapes_and_masks():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"\(b, h, n, d\)"):
        attend(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="does not broadcast"):
        attend(q, k, v, mask=torch.ones(5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="boolean"):
        attend(q, k, v, mask=torch.ones(5, 6))
    with pytest.raises(ValueError, match=r"\(i, j\) or \(b, h, i, j\)"):
        attend(q, k, v, mask=torch.ones(2, 5, 6, dtype=torch.bool))
