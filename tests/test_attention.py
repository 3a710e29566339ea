"""MultiHeadAttention: equal to ``torch.nn.MultiheadAttention`` with the same weights, the
invariances self-attention must have, incremental decoding, bf16 autocast, the backend that ran,
and errors that name what was wrong."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import attnlab.backends
from attnlab import AttentionConfig, KVCache, MultiHeadAttention, masks
from attnlab.backends import Problem, select_backend
from attnlab.convert import attention_from_torch
from attnlab.functional import NORMALIZATIONS, SCORES, attend, get_normalize, get_score
from attnlab.kernels import AttentionKernel, ExactKernel

pytestmark = pytest.mark.usefixtures("single_thread")

F64 = torch.float64
EXACT = ["reference", "sdpa", "chunked"]
SDPA_OK = {("dot", "softmax"), ("scaled_dot", "softmax")}


def combos(backends=EXACT):
    """(backend, score, normalize) for every request each backend serves."""
    return [
        (be, s, n)
        for be in backends
        for s in SCORES.names()
        for n in NORMALIZATIONS.names()
        if be != "sdpa" or (s, n) in SDPA_OK
    ]


def layer(dim=16, heads=4, dtype=F64, **kwargs) -> MultiHeadAttention:
    return MultiHeadAttention(dim, heads, **kwargs).to(dtype).eval()


# ---- equal to torch.nn.MultiheadAttention ------------------------------------------------------
TORCH_MASKS = ["none", "padding", "padding_tensor", "causal", "causal&padding"]


def ours_and_torch_masks(kind: str, b: int, n: int, m: int):
    """Our mask (True = attend) and torch's (attn_mask, key_padding_mask) (True = ignore)."""
    lengths = torch.tensor([m, m - 3, 2])[:b]
    ignore_pad = torch.arange(m)[None] >= lengths[:, None]  # (b, m)
    ignore_future = torch.ones(n, m, dtype=torch.bool).triu(1)  # (n, m)
    if kind == "none":
        return None, (None, None)
    if kind == "padding":
        return masks.padding(lengths), (None, ignore_pad)
    if kind == "padding_tensor":
        return ~ignore_pad[:, None, None, :], (None, ignore_pad)  # (b, 1, 1, m)
    if kind == "causal":
        return masks.causal(), (ignore_future, None)
    if kind == "causal&padding":
        return masks.causal() & masks.padding(lengths), (ignore_future, ignore_pad)
    raise ValueError(kind)


@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
@pytest.mark.parametrize("mask_kind", TORCH_MASKS)
@pytest.mark.parametrize("batch_first", [True, False])
def test_equals_torch_multihead_attention(batch_first, mask_kind, cross):
    b, n, m, e = 3, 6, (9 if cross else 6), 16
    kdim = 12 if cross else None  # cross-attention from a context of another width
    ref = nn.MultiheadAttention(e, 4, batch_first=batch_first, kdim=kdim, vdim=kdim, dtype=F64)
    ref.eval()
    ours = attention_from_torch(ref).eval()
    x = torch.randn(b, n, e, dtype=F64)
    ctx = torch.randn(b, m, kdim or e, dtype=F64) if cross else x
    our_mask, (attn_mask, key_padding_mask) = ours_and_torch_masks(mask_kind, b, n, m)

    def t(z):  # torch's layout
        return z if batch_first else z.transpose(0, 1)

    want, want_w = ref(
        t(x), t(ctx), t(ctx), key_padding_mask=key_padding_mask, attn_mask=attn_mask,
        need_weights=True, average_attn_weights=False,
    )  # fmt: skip
    want = t(want)
    got = ours(x, ctx if cross else None, mask=our_mask)  # auto: the fused path
    torch.testing.assert_close(got.out, want, atol=1e-12, rtol=0)
    got = ours(x, ctx if cross else None, mask=our_mask, need_weights=True)
    assert got.backend == "reference"
    torch.testing.assert_close(got.out, want, atol=1e-12, rtol=0)
    torch.testing.assert_close(got.weights, want_w, atol=1e-12, rtol=0)


def test_from_torch_without_biases():
    ref = nn.MultiheadAttention(8, 2, bias=False, batch_first=True, dtype=F64).eval()
    ours = attention_from_torch(ref, backend="reference")
    assert ours.q_proj.bias is None and ours.backend == "reference"
    x = torch.randn(2, 5, 8, dtype=F64)
    torch.testing.assert_close(ours(x).out, ref(x, x, x, need_weights=False)[0])


@pytest.mark.parametrize(
    ("kwargs", "qkv", "out"),
    [
        ({}, True, True),
        ({"bias": False}, False, False),
        ({"qkv_bias": False}, False, True),  # timm's ViT default
        ({"bias": False, "out_bias": True}, False, True),
        ({"out_bias": False}, True, False),
    ],
)
def test_separate_bias_flags(kwargs, qkv, out):
    """``qkv_bias`` / ``out_bias`` (None: follow ``bias``) choose the projections' biases; the
    state-dict names stay, and the fused self-attention matmul equals the separate q and kv
    projections (cross-attention to x itself), with or without biases."""
    torch.manual_seed(0)
    mha = layer(**kwargs)
    assert (mha.q_proj.bias is not None, mha.kv_proj.bias is not None) == (qkv, qkv)
    assert (mha.out_proj.bias is not None) == out
    names = {"q_proj.weight", "kv_proj.weight", "out_proj.weight"}
    names |= {"q_proj.bias", "kv_proj.bias"} if qkv else set()
    names |= {"out_proj.bias"} if out else set()
    assert set(mha.state_dict()) == names
    x = torch.randn(2, 5, 16, dtype=F64, requires_grad=True)
    fused = mha(x, mask=masks.padding([5, 3])).out
    separate = mha(x, x, mask=masks.padding([5, 3])).out  # q_proj and kv_proj one by one
    torch.testing.assert_close(fused, separate, atol=1e-12, rtol=0)
    fused.square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in mha.parameters())
    with torch.no_grad():  # the no-grad path caches the fused weights: same result
        torch.testing.assert_close(mha(x, mask=masks.padding([5, 3])).out, fused)


def test_a_layer_without_qkv_biases_equals_one_with_zero_biases():
    torch.manual_seed(0)
    free = layer(qkv_bias=False)
    zero = layer()
    zero.load_state_dict({**free.state_dict(), "q_proj.bias": torch.zeros(16, dtype=F64),
                          "kv_proj.bias": torch.zeros(32, dtype=F64)})  # fmt: skip
    x = torch.randn(2, 5, 16, dtype=F64)
    torch.testing.assert_close(free(x).out, zero(x).out, atol=0, rtol=0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bias": None}, "bias must be True or False, got None"),
        ({"qkv_bias": 1}, r"qkv_bias must be True or False \(or None: follow bias\), got 1"),
        ({"out_bias": "yes"}, "out_bias must be True or False"),
    ],
)
def test_bias_flags_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(16, 4, **kwargs)


def test_from_torch_copies_the_training_mode():
    # Dropout included: an eval-mode torch layer gives an eval-mode layer, equal outputs.
    ref = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True, dtype=F64).eval()
    ours = attention_from_torch(ref)
    assert not ours.training and ours.dropout == 0.5
    x = torch.randn(2, 5, 8, dtype=F64)
    torch.testing.assert_close(ours(x).out, ref(x, x, x)[0], atol=1e-12, rtol=0)
    assert attention_from_torch(ref.train()).training


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(add_bias_kv=True), "add_bias_kv"),
        (dict(add_zero_attn=True), "add_zero_attn"),
        (dict(kdim=6, vdim=10), r"kdim \(6\) must equal vdim \(10\)"),
    ],
)
def test_from_torch_refuses_what_it_cannot_copy(kwargs, match):
    with pytest.raises(ValueError, match=match):
        attention_from_torch(nn.MultiheadAttention(8, 2, **kwargs))


# ---- invariances ---------------------------------------------------------------------------------
@pytest.mark.parametrize("backend, score, normalize", combos())
def test_padding_invariance(backend, score, normalize):
    # Whatever sits in the padded positions, the real tokens' outputs do not change.
    mha = layer(score=score, normalize=normalize, backend=backend)
    lengths = torch.tensor([7, 4])
    x = torch.randn(2, 7, 16, dtype=F64)
    y = x.clone()
    y[1, 4:] = 100 * torch.randn(3, 16, dtype=F64)
    mask = masks.padding(lengths)
    a, c = mha(x, mask=mask).out, mha(y, mask=mask).out
    assert torch.equal(a[0], c[0])
    assert torch.equal(a[1, :4], c[1, :4])


@pytest.mark.parametrize("backend, score, normalize", combos())
def test_permutation_equivariance(backend, score, normalize):
    # No positional encoding: permuting the tokens permutes the outputs.
    mha = layer(score=score, normalize=normalize, backend=backend)
    x = torch.randn(2, 7, 16, dtype=F64)
    perm = torch.randperm(7)
    torch.testing.assert_close(mha(x[:, perm]).out, mha(x).out[:, perm], atol=1e-12, rtol=0)


def dependence(mha, mask, n=10) -> torch.Tensor:
    """``(n, n)`` bool: whether output token i depends on input token j (Jacobian structure)."""
    x = torch.randn(1, n, 16, dtype=F64, requires_grad=True)
    out = mha(x, mask=mask).out
    r = torch.randn_like(out)  # a generic direction: rows of the Jacobian do not cancel
    rows = [torch.autograd.grad(out[0, i] @ r[0, i], x, retain_graph=True)[0] for i in range(n)]
    return torch.stack(rows)[:, 0].abs().sum(-1) > 0  # (i, j)


@pytest.mark.parametrize("backend, score, normalize", combos())
def test_locality(backend, score, normalize):
    # With local(w), output i depends on inputs i - w .. i + w only; so does causality.
    mha = layer(score=score, normalize=normalize, backend=backend)
    i, j = torch.meshgrid(torch.arange(10), torch.arange(10), indexing="ij")
    for mask, window in [(masks.local(2), (i - j).abs() <= 2), (masks.causal(), j <= i)]:
        dep = dependence(mha, mask)
        assert not (dep & ~window).any()
        if normalize != "relu":  # relu zeroes negative scores: some pairs may not count
            assert dep[window].all()


def test_local_window_covering_the_sequence_equals_full_attention():
    mha = layer(backend="reference", normalize="sigmoid")
    x = torch.randn(2, 7, 16, dtype=F64)
    assert torch.equal(mha(x, mask=masks.local(6)).out, mha(x).out)


@pytest.mark.parametrize("backend", EXACT)
def test_fully_masked_rows_give_the_output_bias(backend):
    # Attention output zero, so the layer returns the output projection's bias: no NaN.
    mha = layer(backend=backend)
    x = torch.randn(2, 5, 16, dtype=F64, requires_grad=True)
    out = mha(x, mask=masks.padding([5, 0])).out
    torch.testing.assert_close(out[1], mha.out_proj.bias.expand(5, 16), atol=0, rtol=0)
    out.square().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in mha.parameters())


@pytest.mark.parametrize("backend", EXACT)
def test_dropout_only_while_training(backend):
    mha = layer(backend=backend, dropout=0.5)
    x = torch.randn(2, 6, 16, dtype=F64)
    plain = layer(backend=backend)
    plain.load_state_dict(mha.state_dict())
    assert torch.equal(mha(x).out, plain(x).out)  # eval: no dropout
    mha.train()
    a, c = mha(x).out, mha(x).out
    assert not torch.allclose(a, c) and not torch.allclose(a, plain(x).out)


# ---- gradients -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
@pytest.mark.parametrize("backend, score, normalize", combos())
def test_every_parameter_receives_a_gradient(backend, score, normalize, cross):
    mha = layer(
        score=score, normalize=normalize, backend=backend, context_dim=12 if cross else None
    )
    x = torch.randn(2, 5, 16, dtype=F64)
    ctx = torch.randn(2, 8, 12, dtype=F64) if cross else None
    mha(x, ctx, mask=masks.padding([5, 3] if not cross else [8, 3])).out.square().sum().backward()
    names = [name for name, _ in mha.named_parameters()]
    if score == "additive":
        assert {"score.w_q", "score.w_k", "score.w"} <= set(names)
    for name, p in mha.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


# ---- incremental decoding -------------------------------------------------------------------------
@pytest.mark.parametrize("backend, score, normalize", combos(["auto", "reference", "chunked"]))
def test_kv_cache_step_by_step_equals_full_causal(backend, score, normalize):
    mha = layer(score=score, normalize=normalize, backend=backend)
    x = torch.randn(2, 9, 16, dtype=F64)
    full = mha(x, mask=masks.causal()).out
    cache = KVCache()
    steps = [mha(x[:, :4], mask=masks.causal(), cache=cache)]  # prefill, then one at a time
    steps += [mha(x[:, t : t + 1], mask=masks.causal(), cache=cache) for t in range(4, 9)]
    assert cache.length == 9
    torch.testing.assert_close(torch.cat([s.out for s in steps], 1), full, atol=1e-12, rtol=0)
    if backend == "auto" and normalize == "softmax" and score != "additive":
        assert {s.backend for s in steps} == {"sdpa"}


def test_kv_cache_cross_attention_projects_the_context_once():
    mha = layer(context_dim=12)
    ctx = torch.randn(2, 8, 12, dtype=F64)
    x = torch.randn(2, 3, 16, dtype=F64)
    cache = KVCache()
    first = mha(x[:, :1], ctx, cache=cache).out
    assert cache.length == 8
    k = cache.k
    later = mha(x[:, 1:], torch.zeros_like(ctx), cache=cache).out  # the cached context is used
    assert cache.k is k and cache.length == 8
    torch.testing.assert_close(torch.cat([first, later], 1), mha(x, ctx).out, atol=1e-12, rtol=0)


def test_kv_cache_refuses_dense_mask_tensors():
    mha = layer()
    cache = KVCache()
    mha(torch.randn(1, 2, 16, dtype=F64), cache=cache)
    with pytest.raises(ValueError, match="with a KV cache pass a Mask object"):
        mha(torch.randn(1, 1, 16, dtype=F64), mask=torch.ones(1, 3, dtype=torch.bool), cache=cache)


# ---- bf16 autocast --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "backend, score, normalize",
    [c for c in combos() if c[1:] in {("scaled_dot", "softmax"), ("additive", "relu"), ("dot", "sigmoid")}],
)  # fmt: skip
def test_bf16_autocast_end_to_end(backend, score, normalize):
    mha = layer(
        dim=32, heads=4, dtype=torch.float32, score=score, normalize=normalize, backend=backend
    )
    x = torch.randn(2, 24, 32, requires_grad=True)
    mask = masks.causal() & masks.padding([24, 17])
    want = mha(x, mask=mask).out
    need_weights = backend == "reference"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        res = mha(x, mask=mask, need_weights=need_weights)
        res.out.float().square().sum().backward()
    assert res.out.dtype == torch.bfloat16
    torch.testing.assert_close(res.out.float(), want, atol=2e-2, rtol=2e-2)
    assert torch.isfinite(x.grad).all()
    for name, p in mha.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    if need_weights:
        assert res.weights.dtype == torch.float32  # computed, and returned, in float32
        if normalize == "softmax":
            torch.testing.assert_close(res.weights.sum(-1), torch.ones(2, 4, 24), atol=1e-3, rtol=0)


# ---- which backend ran ----------------------------------------------------------------------------
def test_auto_picks_sdpa_then_reference_for_weights():
    mha = layer(dim=32, heads=2, dtype=torch.float32)
    x = torch.randn(2, 10, 32)
    assert mha(x).backend == "sdpa"
    assert mha(x, mask=masks.causal()).backend == "sdpa"
    assert mha(x, need_weights=True).backend == "reference"


@pytest.mark.parametrize("score, normalize", [("additive", "softmax"), ("scaled_dot", "relu")])
def test_auto_picks_chunked_above_the_size_threshold(score, normalize, monkeypatch):
    mha = layer(score=score, normalize=normalize)
    x = torch.randn(2, 10, 16, dtype=F64)
    small = mha(x, mask=masks.causal())
    assert small.backend == "reference"
    monkeypatch.setattr(attnlab.backends, "_CHUNK_THRESHOLD", 2 * 4 * 10 * 10)
    big = mha(x, mask=masks.causal())
    assert big.backend == "chunked"
    torch.testing.assert_close(big.out, small.out, atol=1e-12, rtol=0)
    assert mha(x, need_weights=True).backend == "reference"


@pytest.mark.parametrize("backend", ["reference", "sdpa", "chunked"])
def test_explicit_backend_is_what_runs(backend):
    assert layer(backend=backend)(torch.randn(1, 3, 16, dtype=F64)).backend == backend


def test_auto_picks_flex_only_for_sparse_structured_masks_without_grad(monkeypatch):
    # The decision alone (no compilation): long enough, sparse enough, no gradient, float32.
    monkeypatch.setattr(attnlab.backends, "_FLEX_MIN_KEYS", 128)
    monkeypatch.setattr(attnlab.backends, "_BUILD_COST_EAGER", 0.0)  # block masks cost nothing
    q, k, v = (torch.randn(2, 2, 256, 16) for _ in range(3))
    sparse = masks.causal() & masks.padding([251, 0])  # 3 of 8 blocks of 128 x 128

    def pick(mask, q=q, normalize="softmax"):
        return select_backend(Problem(q, k, v, get_score("scaled_dot"), get_normalize(normalize), mask=mask)).name  # fmt: skip

    with torch.no_grad():
        assert pick(sparse) == "flex"
        assert pick(masks.causal()) == "sdpa"  # 3 of 4 blocks: too dense to pay off
        assert pick(masks.from_tensor(torch.ones(256, 256, dtype=torch.bool).tril())) == "sdpa"
        assert pick(sparse, q=q[:, :, :100]) == "flex"
        assert pick(sparse, normalize="relu") == "reference"
        assert pick(sparse, q=q.double()) == "sdpa"  # CPU flex has no float64
    assert pick(sparse, q=q.requires_grad_()) == "sdpa"  # no CPU backward for flex


@pytest.mark.compile
def test_auto_runs_flex_and_says_so(monkeypatch):
    # n = 320, not a multiple of flex's 128-blocks; the second sequence is empty (zeros).
    monkeypatch.setattr(attnlab.backends, "_FLEX_MIN_KEYS", 128)
    monkeypatch.setattr(attnlab.backends, "_BUILD_COST_EAGER", 0.0)  # block masks cost nothing
    mha = layer(dim=32, heads=2, dtype=torch.float32)
    x = torch.randn(2, 320, 32)
    mask = masks.causal() & masks.padding([315, 0])  # 6 of 18 blocks, density 0.48
    with torch.no_grad():
        got = mha(x, mask=mask)
        want = mha(x, mask=mask, need_weights=True)
    assert got.backend == "flex" and want.backend == "reference"
    torch.testing.assert_close(got.out, want.out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.out[1], mha.out_proj.bias.expand(320, 32), atol=0, rtol=0)


# ---- errors name what was wrong -------------------------------------------------------------------
def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="heads must be a positive divisor of dim=10, got heads=3"):
        MultiHeadAttention(10, 3)
    with pytest.raises(ValueError, match="dim must be a positive int"):
        MultiHeadAttention(0, 1)
    with pytest.raises(ValueError, match="dropout must be in"):
        MultiHeadAttention(8, 2, dropout=1.0)
    with pytest.raises(ValueError, match="unknown score 'cosine'; valid choices: additive, dot, scaled_dot"):  # fmt: skip
        MultiHeadAttention(8, 2, score="cosine")
    with pytest.raises(ValueError, match="unknown normalization 'max'; valid choices: none, relu, sigmoid, softmax"):  # fmt: skip
        MultiHeadAttention(8, 2, normalize="max")
    with pytest.raises(ValueError, match="unknown backend 'cuda'; valid choices: auto, chunked, edges, flex, reference, sdpa"):  # fmt: skip
        MultiHeadAttention(8, 2, backend="cuda")
    with pytest.raises(ValueError, match="kernel options"):
        MultiHeadAttention(8, 2, window=4)


@pytest.mark.parametrize("backend", ["auto", "reference", "sdpa", "chunked"])
def test_bad_inputs(backend):
    mha = layer(backend=backend, context_dim=12)
    x = torch.randn(2, 5, 16, dtype=F64)
    ctx = torch.randn(2, 6, 12, dtype=F64)
    bad = [
        (
            dict(x=torch.randn(2, 5, 15, dtype=F64)),
            r"x: expected shape \(batch, seq, 16\), got \(2, 5, 15\)",
        ),
        (dict(x=torch.randn(5, 16, dtype=F64)), r"x: expected shape \(batch, seq, 16\)"),
        (dict(x=torch.randn(2, 0, 16, dtype=F64)), "x: empty sequence"),
        (dict(context=torch.randn(2, 0, 12, dtype=F64)), "context: empty sequence"),
        (
            dict(context=torch.randn(2, 6, 16, dtype=F64)),
            r"context: expected shape \(batch, seq, 12\)",
        ),
        (
            dict(context=torch.randn(3, 6, 12, dtype=F64)),
            "context: batch 3 differs from x's batch 2",
        ),
        (dict(mask=torch.ones(5, 5, dtype=torch.bool)), "does not broadcast"),
        (dict(mask=torch.ones(2, 4, 5, 6)), "mask must be a boolean tensor"),
        (dict(mask=torch.ones(2, 5, 6, dtype=torch.bool)), r"shape \(i, j\) or \(b, h, i, j\)"),
        (dict(mask=[[True]]), "mask must be a boolean tensor or an attnlab.masks.Mask, got list"),
        (dict(mask=masks.padding([6, 6, 6])), "lengths has 3 entries but the batch has 2"),
        (dict(mask=masks.padding([6, 7])), "a length \\(7\\) exceeds the key length 6"),
        (
            dict(mask=masks.graph(torch.tensor([[0], [1]]), 6)),
            "graph: the mask is for 6 nodes, but the attention has 5 queries",
        ),  # fmt: skip
    ]
    for change, match in bad:
        args = dict(x=x, context=ctx) | change
        with pytest.raises(ValueError, match=match):
            mha(args.pop("x"), args.pop("context"), **args)


def test_need_weights_with_sdpa_names_the_backend():
    with pytest.raises(ValueError, match="backend 'sdpa' cannot compute this request.*weights"):
        layer(backend="sdpa")(torch.randn(1, 3, 16, dtype=F64), need_weights=True)


@pytest.mark.parametrize("backend", ["sdpa", "flex"])
@pytest.mark.parametrize("kw", [{"normalize": "relu"}, {"score": "additive"}])
def test_impossible_backend_combination_fails_at_construction(backend, kw):
    with pytest.raises(ValueError, match=f"backend '{backend}' computes dot-product.*chunked"):
        layer(backend=backend, **kw)


def test_cross_attention_positional_with_cache_is_refused():
    from attnlab import KVCache
    from attnlab.positional import Rotary

    m = layer()
    x, ctx = torch.randn(1, 2, 16, dtype=F64), torch.randn(1, 3, 16, dtype=F64)
    with pytest.raises(ValueError, match="positional: with cross-attention and a KV cache"):
        m(x, ctx, positional=Rotary(4), cache=KVCache())


def test_kernel_with_attention_dropout_is_refused():
    with pytest.raises(ValueError, match="efficient kernels never form attention weights"):
        MultiHeadAttention(16, 4, dropout=0.1, kernel="linear")


def test_inference_cache_of_fused_projection_follows_weight_updates():
    m = layer()
    x = torch.randn(2, 5, 16, dtype=F64)
    with torch.no_grad():
        before = m(x).out
        m.kv_proj.weight.add_(1.0)  # an optimizer-style in-place update
        after = m(x).out
    ref = MultiHeadAttention(16, 4).to(F64).eval()
    ref.load_state_dict(m.state_dict())
    with torch.enable_grad():
        expected = ref(x).out
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, expected, rtol=0, atol=1e-12)


# ---- one kernel ------------------------------------------------------------------------------------
def test_the_layer_holds_one_kernel():
    exact = layer(score="additive", normalize="relu", backend="chunked", dropout=0.1)
    assert isinstance(exact.kernel, ExactKernel) and exact.kernel.backend == "chunked"
    assert exact.kernel.score is exact.score and exact.kernel.dropout == 0.1
    # The additive score's parameters are the layer's, once: keys and order unchanged.
    assert [n for n, _ in exact.named_parameters()][:3] == ["score.w_q", "score.w_k", "score.w"]
    assert not any(k.startswith("kernel.") for k in exact.state_dict())
    approx = layer(kernel="linear")
    assert isinstance(approx.kernel, AttentionKernel) and approx.kernel.name == "linear"


def test_from_config_equals_the_keyword_arguments():
    cfg = AttentionConfig(score="dot", normalize="sigmoid", backend="chunked")
    a = MultiHeadAttention.from_config(16, 4, cfg, bias=False).double().eval()
    b = layer(score="dot", normalize="sigmoid", backend="chunked", bias=False)
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 5, 16, dtype=F64)
    assert torch.equal(a(x).out, b(x).out) and a(x).backend == "chunked"
    k = MultiHeadAttention.from_config(16, 4, AttentionConfig(kernel="local", kernel_options={"window": 1}))  # fmt: skip
    assert k.kernel.name == "local" and k.kernel.window == 1
    with pytest.raises(TypeError, match="AttentionConfig"):
        MultiHeadAttention.from_config(16, 4, {"score": "dot"})


@pytest.mark.parametrize("backend", ["reference", "sdpa", "chunked"])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_additive_bias_equals_the_boolean_mask(backend, cross):
    # Issue 9: forward(bias=) takes a float additive mask (Hugging Face style, -inf / 0) and
    # gives what the boolean mask gives, on every backend that accepts it.
    mha = layer(backend=backend)
    x = torch.randn(2, 6, 16, dtype=F64)
    ctx = torch.randn(2, 9, 16, dtype=F64) if cross else None
    allowed = torch.rand(2, 1, 6, 9 if cross else 6) < 0.6
    allowed[..., 0] = True  # no fully masked row (a row of -inf bias is NaN, as in torch)
    bias = torch.zeros(allowed.shape, dtype=F64).masked_fill(~allowed, -math.inf)
    want = mha(x, ctx, mask=allowed).out
    torch.testing.assert_close(mha(x, ctx, bias=bias).out, want, atol=1e-12, rtol=0)


@pytest.mark.parametrize("backend, score, normalize", combos())
def test_bias_is_added_to_the_scores(backend, score, normalize):
    mha = layer(score=score, normalize=normalize, backend=backend)
    ref = layer(score=score, normalize=normalize, backend="reference")
    ref.load_state_dict(mha.state_dict())
    x = torch.randn(2, 6, 16, dtype=F64)
    bias = torch.randn(2, 4, 6, 6, dtype=F64, requires_grad=True)
    out = mha(x, bias=bias, mask=masks.padding([6, 4])).out
    res = ref(x, bias=bias, mask=masks.padding([6, 4]), need_weights=True)
    torch.testing.assert_close(out, res.out, atol=1e-12, rtol=0)
    # The weights are the normalised scores plus bias (checked against attend on the same q, k).
    q, k, v = (
        p(x).view(2, 6, 4, 4).transpose(1, 2)  # (b, h, i, d)
        for p in (
            ref.q_proj,
            lambda t: ref.kv_proj(t)[..., :16],
            lambda t: ref.kv_proj(t)[..., 16:],
        )
    )
    want = attend(q, k, v, score=ref.score, normalize=normalize, mask=masks.padding([6, 4]), bias=bias)  # fmt: skip
    torch.testing.assert_close(res.weights, want.weights, atol=1e-12, rtol=0)
    (g,) = torch.autograd.grad(out.sum(), bias)
    assert torch.isfinite(g).all() and g.abs().sum() > 0


def test_bias_errors_name_the_argument():
    mha = layer()
    x = torch.randn(2, 5, 16, dtype=F64)
    with pytest.raises(ValueError, match="bias must be a float tensor"):
        mha(x, bias=torch.ones(5, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"bias of shape \(2, 4, 5, 6\) does not broadcast"):
        mha(x, bias=torch.zeros(2, 4, 5, 6, dtype=F64))
    with pytest.raises(ValueError, match="kernel 'linear' cannot add a score bias: .*kernel=None"):
        layer(kernel="linear")(x, bias=torch.zeros(5, 5, dtype=F64))


@pytest.mark.parametrize("backend", ["auto", "reference", "sdpa", "chunked"])
def test_a_float_mask_points_to_bias(backend):
    mha = layer(backend=backend)
    x = torch.randn(2, 5, 16, dtype=F64)
    with pytest.raises(ValueError, match="mask must be a boolean tensor.*bias="):
        mha(x, mask=torch.zeros(2, 1, 1, 5, dtype=F64))


@pytest.mark.parametrize("backend", ["auto", "reference", "sdpa", "chunked"])
def test_a_batch_by_keys_padding_mask_is_refused(backend):
    # Issue 9: with batch == seq, an HF/torch-style (b, n) padding mask used to be read as
    # (i, j): no error, wrong output. It is refused, pointing to the two right spellings, which
    # give the padded result.
    mha = layer(backend=backend)
    x = torch.randn(4, 4, 16, dtype=F64)
    lengths = torch.tensor([4, 2, 1, 3])
    pad = torch.arange(4) < lengths[:, None]  # (b, n), True = real token
    with pytest.raises(ValueError, match=r"ambiguous.*masks\.padding\(lengths\)"):
        mha(x, mask=pad)
    want = mha(x, mask=masks.padding(lengths)).out
    torch.testing.assert_close(mha(x, mask=pad[:, None, None, :]).out, want, atol=1e-12, rtol=0)


@pytest.mark.parametrize("backend", ["auto", "reference", "sdpa", "chunked"])
@pytest.mark.parametrize("cross", [False, True], ids=["self", "cross"])
def test_nan_in_padded_positions_does_not_reach_real_outputs(backend, cross):
    # Issue 8: a NaN at a masked key or value must not poison the outputs that may not see it.
    mha = layer(backend=backend)
    x = torch.randn(2, 6, 16, dtype=F64)
    src = torch.randn(2, 8, 16, dtype=F64) if cross else x
    lengths = [8, 5] if cross else [6, 4]
    poisoned = src.clone()
    poisoned[1, lengths[1] :] = math.nan
    for mask in (masks.padding(lengths), masks.causal() & masks.padding(lengths)):
        if cross and isinstance(mask, masks.And):
            continue
        clean = mha(x, src if cross else None, mask=mask).out
        got = mha(x if cross else poisoned, poisoned if cross else None, mask=mask).out
        rows = slice(None) if cross else slice(0, lengths[1])  # padded queries are no outputs
        torch.testing.assert_close(got[1, rows], clean[1, rows], atol=1e-12, rtol=0)
        torch.testing.assert_close(got[0], clean[0], atol=0, rtol=0)


@pytest.mark.parametrize("backend", ["auto", "reference", "sdpa", "chunked"])
def test_empty_batch_gives_an_empty_output(backend):
    # Issue 8: the chunked backend divided by the batch size.
    assert layer(backend=backend)(torch.randn(0, 5, 16, dtype=F64)).out.shape == (0, 5, 16)
    cross = layer(backend=backend, context_dim=12)
    ctx = torch.randn(0, 7, 12, dtype=F64)
    assert cross(torch.randn(0, 5, 16, dtype=F64), ctx).out.shape == (0, 5, 16)


def test_wrong_input_dtype_names_the_argument_and_the_layer_dtype():
    # Issue 8: not torch's "mat1 and mat2 must have the same dtype".
    mha = layer(dtype=torch.float32)
    with pytest.raises(ValueError, match=r"x: dtype torch.float64 differs from the layer's dtype torch.float32"):  # fmt: skip
        mha(torch.randn(2, 5, 16, dtype=F64))
    with pytest.raises(ValueError, match=r"x: dtype torch.int64 .*embedding"):
        mha(torch.ones(2, 5, 16, dtype=torch.long))
    cross = layer(dtype=torch.float32, context_dim=12)
    with pytest.raises(ValueError, match=r"context: dtype torch.float16 differs .* torch.float32"):
        cross(torch.randn(2, 5, 16), torch.randn(2, 3, 12, dtype=torch.float16))
    with pytest.raises(ValueError, match="context: this layer attends to a context of width"):
        cross(torch.randn(2, 5, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts: no dtype error
        assert mha(torch.randn(2, 5, 16, dtype=torch.bfloat16)).out.dtype == torch.bfloat16


def test_need_weights_from_an_efficient_kernel_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="kernel 'performer' does not return attention weights"):
        layer(kernel="performer")(torch.randn(1, 4, 16, dtype=F64), need_weights=True)
