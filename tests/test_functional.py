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
    Normalization,
    Score,
    attend,
    get_normalize,
    get_score,
    make_score,
    masked_softmax,
    safe_max,
    zero_dead_keys,
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


def test_additive_scores_in_blocks_are_the_broadcast_sum(monkeypatch):
    """Many blocks of queries (13 in blocks of 4: the last one short): values and gradients of
    the projected queries and keys and of w equal the one-broadcast formula in float64."""
    from attnlab import additive_blocks

    monkeypatch.setattr(additive_blocks, "BLOCK_ELEMENTS", 4 * 2 * 3 * 11 * 5)  # 4 queries
    qa, ka = (torch.randn(2, 3, n, 5, dtype=F64, requires_grad=True) for n in (13, 11))
    w = torch.randn(3, 5, dtype=F64, requires_grad=True)
    got = additive_blocks.additive_scores(qa, ka, w)
    want = torch.einsum("bhija,ha->bhij", torch.tanh(qa.unsqueeze(3) + ka.unsqueeze(2)), w)
    torch.testing.assert_close(got, want, atol=1e-14, rtol=0)
    g = torch.randn_like(want)
    for a, b in zip(
        torch.autograd.grad(got, (qa, ka, w), g), torch.autograd.grad(want, (qa, ka, w), g)
    ):
        torch.testing.assert_close(a, b, atol=1e-13, rtol=0)
    assert additive_blocks.block_queries(2, 3, 11, 5) == 4


def test_additive_scores_under_bf16_autocast_come_back_in_bf16_close_to_float32():
    score = AdditiveScore(head_dim=8, heads=2)
    q, k, _ = qkv(h=2, d=8, dtype=torch.float32, requires_grad=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = score(q, k)
    assert low.dtype == torch.bfloat16
    torch.testing.assert_close(low.float(), score(q, k), atol=0.05, rtol=0.02)


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


# ---- relu and sigmoid by their properties ------------------------------------------------------
def _scores_and_mask(seed=0):
    gen = torch.Generator().manual_seed(seed)
    s = 3 * torch.randn(2, 3, 6, 9, dtype=F64, generator=gen)
    mask = torch.rand(2, 3, 6, 9, generator=gen) < 0.6
    mask[0, 0, 1] = False  # a fully masked row
    return s, mask


@pytest.mark.parametrize("normalize", ["relu", "sigmoid"])
def test_elementwise_weights_are_non_negative_and_zero_where_masked(normalize):
    s, mask = _scores_and_mask()
    w = get_normalize(normalize)(s, mask)
    assert (w >= 0).all() and (w[~mask] == 0).all()
    assert torch.isfinite(w).all()


def test_relu_rows_sum_to_the_mean_positive_part_of_allowed_scores():
    # Documented: a row sums to the mean, over its allowed keys, of the scores' positive parts;
    # a key with a negative score gets nothing; an all-negative row attends to nothing.
    s, mask = _scores_and_mask()
    w = get_normalize("relu")(s, mask)
    for b, h, i in [(0, 0, 0), (1, 2, 5), (0, 1, 3)]:
        allowed = s[b, h, i][mask[b, h, i]]
        torch.testing.assert_close(w[b, h, i].sum(), allowed.clamp_min(0).mean())
    assert (w[(s < 0) & mask] == 0).all()
    negative = -s.abs() - 0.1
    assert (get_normalize("relu")(negative, mask) == 0).all()


def test_relu_is_positively_homogeneous_and_sigmoid_monotone():
    s, mask = _scores_and_mask()
    relu, sigmoid = get_normalize("relu"), get_normalize("sigmoid")
    torch.testing.assert_close(relu(2.5 * s, mask), 2.5 * relu(s, mask))
    w, w_up = sigmoid(s, mask), sigmoid(s + 0.5, mask)
    assert (w_up[mask] > w[mask]).all()  # a higher score never gets less weight
    assert (w[mask] > 0).all() and (w[mask] < 1).all()  # each allowed weight in (0, 1)


def test_sigmoid_rows_of_zero_scores_sum_to_n_over_n_plus_one():
    # sigma(0 - log n) = 1 / (1 + n): a row of n equal zero scores sums to n / (n + 1), close to
    # one like softmax's rows (the point of the -log n bias), whatever n.
    for n in (1, 4, 64, 1024):
        w = get_normalize("sigmoid")(torch.zeros(1, 1, 1, n, dtype=F64), None)
        torch.testing.assert_close(w.sum(), torch.tensor(n / (n + 1), dtype=F64))


@pytest.mark.parametrize("normalize", ["relu", "sigmoid"])
def test_elementwise_weights_ignore_masked_keys_and_follow_key_order(normalize):
    # Appending masked keys (padding) changes no allowed weight; permuting the keys permutes
    # the weights. Neither holds for a weight that counted keys regardless of the mask.
    s, mask = _scores_and_mask()
    norm = get_normalize(normalize)
    w = norm(s, mask)
    padded = torch.cat([s, 100 * torch.randn(2, 3, 6, 4, dtype=F64)], -1)
    padded_mask = torch.cat([mask, torch.zeros(2, 3, 6, 4, dtype=torch.bool)], -1)
    torch.testing.assert_close(norm(padded, padded_mask)[..., :9], w, atol=0, rtol=0)
    perm = torch.randperm(9)
    torch.testing.assert_close(norm(s[..., perm], mask[..., perm]), w[..., perm])


# ---- the one masked softmax ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, F64, torch.bfloat16])
def test_masked_softmax_without_a_mask_is_torch_softmax(dtype):
    s = torch.randn(2, 3, 5, 7, dtype=dtype, requires_grad=True)
    got = masked_softmax(s)
    want = torch.softmax(s, -1, dtype=torch.promote_types(dtype, torch.float32))
    assert torch.equal(got, want)
    g = torch.randn_like(want)
    assert torch.equal(torch.autograd.grad(got, s, g)[0], torch.autograd.grad(want, s, g)[0])


def test_masked_softmax_with_a_mask():
    s = torch.randn(2, 3, 5, 7, dtype=F64, requires_grad=True)
    allowed = torch.rand(2, 3, 5, 7) < 0.5
    allowed[0, 0, 0] = False  # a fully masked row
    allowed[1, 2, 3] = True
    w = masked_softmax(s, allowed)
    want = torch.softmax(s.masked_fill(~allowed, -math.inf), -1).nan_to_num(0.0)
    torch.testing.assert_close(w, want, atol=1e-15, rtol=0)
    assert (w[0, 0, 0] == 0).all() and (w[~allowed] == 0).all()
    (g,) = torch.autograd.grad(w.square().sum(), s)
    assert torch.isfinite(g).all() and (g[~allowed] == 0).all()
    # A NaN or inf at a forbidden position cannot leak into the allowed ones.
    poisoned = s.detach().masked_fill(~allowed, math.nan)
    poisoned[1, 2, 3, ~allowed[1, 2, 3]] = math.inf
    torch.testing.assert_close(masked_softmax(poisoned, allowed), w.detach(), atol=0, rtol=0)


def test_safe_max():
    s = torch.tensor([[1.0, -math.inf, 3.0], [-math.inf, -math.inf, -math.inf]], requires_grad=True)
    m = safe_max(s)
    assert m.tolist() == [[3.0], [0.0]] and not m.requires_grad  # a shift: no gradient


def test_zero_dead_keys():
    k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 6)
    live = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool).view(2, 1, 1, 5)
    k[0, :, 3:] = math.nan
    zk, zv = zero_dead_keys(k, v, live)
    assert (zk[0, :, 3:] == 0).all() and (zv[0, :, 3:] == 0).all()
    assert torch.equal(zk[1], k[1]) and torch.equal(zv[0, :, :3], v[0, :, :3])
    assert zero_dead_keys(k, v, None) == (k, v)


def test_scores_and_normalizations_satisfy_their_protocols():
    for name in SCORES:
        assert isinstance(build_score(name, 2, 4), Score), name
    for name in NORMALIZATIONS:
        assert isinstance(get_normalize(name), Normalization), name
    assert build_score("additive", 2, 4).pair_cost == 4 and get_score("dot").pair_cost == 1


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
def test_nan_in_padded_keys_and_values_does_not_leak(normalize):
    # Issue 8: masked must mean ignored; 0 * NaN is NaN, so padded keys and values are zeroed.
    q, k, v = qkv(requires_grad=False)
    mask = masks.padding([6, 4])
    clean = attend(q, k, v, normalize=normalize, mask=mask)
    k, v = k.clone(), v.clone()
    k[1, :, 4:], v[1, :, 4:] = math.nan, math.inf
    q.requires_grad_()
    got = attend(q, k, v, normalize=normalize, mask=mask)
    assert torch.equal(got.out, clean.out) and torch.equal(got.weights, clean.weights)
    (g,) = torch.autograd.grad(got.out.sum(), q)
    assert torch.isfinite(g).all()


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


def test_attend_bias_is_added_to_the_scores():
    q, k, v = qkv()
    bias = torch.randn(2, 1, 5, 6, dtype=F64)
    s = q @ k.transpose(-2, -1) / 2 + bias  # d = 4
    torch.testing.assert_close(attend(q, k, v, bias=bias).weights, torch.softmax(s, -1))
    with pytest.raises(ValueError, match="bias must be a float tensor"):
        attend(q, k, v, bias=torch.ones(5, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="bias of shape .* does not broadcast"):
        attend(q, k, v, bias=torch.ones(1, 1, 5, 5, dtype=F64))
    with pytest.raises(ValueError, match="bias of shape .* is ambiguous"):
        attend(q, k, v, bias=torch.zeros(2, 6, dtype=F64))


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
