"""Every backend computes exactly what the reference path computes, for every request it claims,
and refuses by name the ones it cannot compute.

FlexAttention compiles (seconds per mask kind on CPU): its tests carry the ``compile`` marker
and share one shape, so that each costs one compilation per mask kind.
"""

from __future__ import annotations

import pytest
import torch

from attnlab import masks
from attnlab.backends import (
    BACKENDS,
    ChunkedBackend,
    FlexBackend,
    Problem,
    SDPABackend,
    get_backend,
    run_backend,
)
from attnlab.backends.sdpa import _math_with_dropout
from attnlab.dropout import dropout
from attnlab.functional import NORMALIZATIONS, SCORES, attend, get_normalize, get_score, make_score

pytestmark = pytest.mark.usefixtures("single_thread")

F64 = torch.float64
EXACT = ["reference", "sdpa", "chunked"]  # backends that run in float64 with gradients on CPU


def make_backend(name: str):
    # Blocks smaller than n, and n no multiple of them: every block shape occurs.
    return ChunkedBackend(block=16) if name == "chunked" else get_backend(name)


def make_problem(
    score: str,
    normalize: str,
    mask,
    with_bias: bool,
    *,
    b: int = 2,
    h: int = 2,
    i: int = 50,
    j: int | None = None,
    d: int = 8,
    dtype: torch.dtype = F64,
    requires_grad: bool = True,
    **kwargs,
) -> Problem:
    j = i if j is None else j
    q = torch.randn(b, h, i, d, dtype=dtype, requires_grad=requires_grad)
    k = torch.randn(b, h, j, d, dtype=dtype, requires_grad=requires_grad)
    v = torch.randn(b, h, j, d, dtype=dtype, requires_grad=requires_grad)
    sc = (
        make_score(score, head_dim=d, heads=h).to(dtype)
        if score == "additive"
        else get_score(score)
    )
    bias = None
    if with_bias:
        bias = torch.randn(1, h, i, j, dtype=dtype, requires_grad=requires_grad)
    return Problem(q, k, v, sc, get_normalize(normalize), mask=mask, bias=bias, **kwargs)


def reference(p: Problem) -> torch.Tensor:
    return attend(
        p.q, p.k, p.v, score=p.score, normalize=p.normalize, mask=p.mask, bias=p.bias,
        q_offset=p.q_offset,
    ).out  # fmt: skip


def differentiable(p: Problem) -> list[torch.Tensor]:
    ts = [p.q, p.k, p.v] + ([p.bias] if p.bias is not None else [])
    if isinstance(p.score, torch.nn.Module):
        ts += list(p.score.parameters())
    return ts


def assert_same_values_and_gradients(out, want, p: Problem, tol: float) -> None:
    torch.testing.assert_close(out, want, atol=tol, rtol=0)
    g = torch.randn_like(want)
    ts = differentiable(p)
    got_g = torch.autograd.grad(out, ts, g)
    want_g = torch.autograd.grad(want, ts, g)
    for name, a, c in zip(["q", "k", "v", "bias/param", "param", "param"], got_g, want_g):
        torch.testing.assert_close(a, c, atol=tol * 10, rtol=0, msg=f"gradient of {name}")


# ---- every backend x score x normalisation x mask x bias -----------------------------------------
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("normalize", NORMALIZATIONS.names())
@pytest.mark.parametrize("score", SCORES.names())
@pytest.mark.parametrize("backend", EXACT)
def test_backend_equals_reference(backend, score, normalize, mask_kind, with_bias, make_mask):
    p = make_problem(score, normalize, make_mask(mask_kind, 2, 2, 50), with_bias)
    kernel = make_backend(backend)
    reason = kernel.unsupported(p)
    if reason is not None:
        with pytest.raises(ValueError, match=f"backend '{backend}' cannot compute this request"):
            run_backend(backend, p)
        return
    out, weights = kernel(p)
    assert weights is None
    assert_same_values_and_gradients(out, reference(p), p, tol=1e-12)


@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("normalize", NORMALIZATIONS.names())
@pytest.mark.parametrize("score", SCORES.names())
def test_flex_refuses_what_it_cannot_compute(score, normalize, with_bias):
    # Checked before any compilation: cheap, in the default run.
    p = make_problem(score, normalize, masks.causal(), with_bias, dtype=torch.float32)
    with torch.no_grad():
        reason = FlexBackend().unsupported(p)
        if score in ("dot", "scaled_dot") and normalize == "softmax" and not with_bias:
            assert reason is None
            return
        assert reason
        with pytest.raises(ValueError, match="backend 'flex' cannot compute this request"):
            run_backend("flex", p)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(requires_grad=True), "no backward pass on CPU"),
        (dict(dtype=F64), "float64"),
        (dict(q_offset=3), "q_offset"),
        (dict(dropout=0.1), "dropout"),
        (dict(need_weights=True), "weights"),
    ],
)
def test_flex_refusals_name_the_reason(change, match):
    kwargs = dict(dtype=torch.float32, requires_grad=False) | change
    p = make_problem("scaled_dot", "softmax", masks.causal(), False, **kwargs)
    with pytest.raises(ValueError, match=f"backend 'flex'.*{match}"):
        run_backend("flex", p)


@pytest.mark.parametrize("backend", ["sdpa", "chunked", "flex"])
def test_need_weights_only_on_reference(backend):
    p = make_problem("scaled_dot", "softmax", None, False, need_weights=True)
    with pytest.raises(ValueError, match=f"backend '{backend}'.*need_weights=True"):
        run_backend(backend, p)
    out, weights, ran = run_backend("reference", p)
    assert ran == "reference"
    torch.testing.assert_close(weights, attend(p.q, p.k, p.v).weights)


@pytest.mark.parametrize("backend", EXACT)
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "tensor"])
def test_cross_attention_shapes(backend, mask_kind):
    # Fewer queries than keys, and a value dim that differs from the key dim.
    b, h, i, j = 2, 2, 23, 50
    mask = {
        "none": None,
        "causal": masks.causal(),
        "padding": masks.padding([j - 5, 0]),
        "tensor": torch.rand(b, 1, i, j) < 0.5,
    }[mask_kind]
    q = torch.randn(b, h, i, 8, dtype=F64, requires_grad=True)
    k = torch.randn(b, h, j, 8, dtype=F64, requires_grad=True)
    v = torch.randn(b, h, j, 5, dtype=F64, requires_grad=True)
    p = Problem(q, k, v, get_score("scaled_dot"), get_normalize("softmax"), mask=mask)
    out, _ = make_backend(backend)(p)
    assert out.shape == (b, h, i, 5)
    assert_same_values_and_gradients(out, reference(p), p, tol=1e-12)


@pytest.mark.parametrize("backend", EXACT)
@pytest.mark.parametrize("normalize", NORMALIZATIONS.names())
def test_q_offset_equals_the_last_rows(backend, normalize):
    # Incremental decoding: 3 new queries after 47 cached keys see the causal mask's last rows.
    p = make_problem("scaled_dot", normalize, masks.causal(), False)
    full = reference(p)
    q_last = p.q[:, :, -3:]
    tail = Problem(q_last, p.k, p.v, p.score, p.normalize, mask=masks.causal(), q_offset=47)
    if make_backend(backend).unsupported(tail):
        pytest.skip("unsupported")
    out, _ = make_backend(backend)(tail)
    torch.testing.assert_close(out, full[:, :, -3:], atol=1e-12, rtol=0)


# ---- fully masked rows --------------------------------------------------------------------------
@pytest.mark.parametrize("normalize", NORMALIZATIONS.names())
@pytest.mark.parametrize("score", SCORES.names())
@pytest.mark.parametrize("backend", EXACT)
def test_fully_masked_rows_give_zeros_and_finite_gradients(backend, score, normalize):
    mask = torch.rand(2, 2, 20, 20) < 0.6
    mask[0, :, 3] = False  # a row empty in every head
    mask[1, 1, 7:12] = False  # rows empty in one head
    p = make_problem(score, normalize, mask, True, i=20)
    kernel = make_backend(backend)
    if kernel.unsupported(p):
        pytest.skip("unsupported")
    out, _ = kernel(p)
    empty = ~mask.any(-1)
    assert (out[empty] == 0).all()
    assert torch.isfinite(out).all()
    for g in torch.autograd.grad(out.square().sum(), differentiable(p)):
        assert torch.isfinite(g).all()


# ---- chunked specifics --------------------------------------------------------------------------
def test_chunked_block_size_from_budget():
    p = make_problem("scaled_dot", "softmax", None, False, b=2, h=4)
    t = ChunkedBackend(budget=1 << 16).block_for(p)
    assert t == 64  # largest power of two with 2 * 4 * t^2 <= 2^16
    assert ChunkedBackend(budget=1).block_for(p) == 16  # never below 16
    pa = make_problem("additive", "softmax", None, False, b=2, h=4)
    assert ChunkedBackend(budget=1 << 16).block_for(pa) == 32  # 8 hidden units per pair
    with pytest.raises(ValueError, match="block must be a positive int"):
        ChunkedBackend(block=0)


def test_chunked_checks_the_mask_size_before_blocking():
    p = make_problem("scaled_dot", "relu", None, False, b=2)
    p.mask = masks.padding([3, 4, 5])
    with pytest.raises(ValueError, match="lengths has 3 entries but the batch has 2"):
        ChunkedBackend(block=16)(p)
    p.mask = masks.graph(torch.tensor([[0], [1]]), 60)
    with pytest.raises(ValueError, match="graph: the mask is for 60 nodes"):
        ChunkedBackend(block=16)(p)


@pytest.mark.parametrize("backend", EXACT)
@pytest.mark.parametrize("normalize", ["softmax", "relu"])
def test_empty_batch_gives_an_empty_output(backend, normalize):
    # Issue 8: the chunked backend divided by the batch size when sizing its blocks.
    p = make_problem("scaled_dot", normalize, masks.causal(), False, b=0, i=20)
    kernel = ChunkedBackend() if backend == "chunked" else get_backend(backend)
    if kernel.unsupported(p):
        pytest.skip("unsupported")
    out, _ = kernel(p)
    assert out.shape == (0, 2, 20, 8)


@pytest.mark.parametrize("normalize", ["softmax", "relu"])
@pytest.mark.parametrize("backend", ["reference", "chunked", "sdpa"])
def test_dropout_gradients_match_their_forward(backend, normalize):
    # With a fixed seed the dropped forward is a deterministic function; its gradient must be
    # that function's, so the checkpointed tiles must redraw the same dropout mask in backward.
    if backend == "sdpa" and normalize != "softmax":
        pytest.skip("sdpa computes softmax only")
    kernel = ChunkedBackend(block=4) if backend == "chunked" else get_backend(backend)
    shapes = [(1, 1, 6, 3), (1, 1, 9, 3), (1, 1, 9, 2)]
    inputs = tuple(torch.randn(s, dtype=F64, requires_grad=True) for s in shapes)

    def fn(q, k, v):
        torch.manual_seed(1234)
        p = Problem(q, k, v, get_score("scaled_dot"), get_normalize(normalize), dropout=0.5)
        return kernel(p)[0]

    assert not torch.equal(fn(*inputs), attend(*inputs, normalize=normalize).out)
    assert torch.autograd.gradcheck(fn, inputs)


# ---- sdpa with attention dropout on a CPU: SDPA's math path, attnlab's dropout mask -----------
@pytest.mark.parametrize("blocks", [True, False], ids=["blocks", "materialised"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_sdpa_dropout_path_is_the_reference_without_its_mask(
    mask_kind, with_bias, make_mask, blocks
):
    """Both paths SDPA's dropout takes (in blocks when eager, materialised under compile), run
    with the mask turned off (p = 0): the reference, values and gradients, for every kind of
    mask (rows with no allowed key give zeros)."""
    p = make_problem("scaled_dot", "softmax", make_mask(mask_kind, 2, 2, 50), with_bias)
    if SDPABackend().unsupported(p):
        pytest.skip("unsupported")
    out = _math_with_dropout(p, blocks=blocks)  # (a block: 50 queries)
    assert_same_values_and_gradients(out, reference(p), p, tol=1e-12)


@pytest.mark.parametrize("with_mask", [False, True])
def test_sdpa_dropout_path_draws_attnlabs_mask(with_mask):
    """With dropout it is softmax's weights through attnlab.dropout.dropout (same seed, same
    draws), times the values; and what the backend runs on a CPU."""
    p = make_problem("scaled_dot", "softmax", None, False, dropout=0.3)
    if with_mask:
        p.mask = masks.padding(torch.tensor([50, 31]))
    torch.manual_seed(7)
    out, _ = SDPABackend()(p)
    weights = attend(p.q, p.k, p.v, mask=p.mask).weights  # (b, h, i, j)
    torch.manual_seed(7)
    want = dropout(weights.reshape(-1, 50, 50), 0.3).view_as(weights) @ p.v
    torch.testing.assert_close(out, want, atol=1e-12, rtol=0)
    assert not torch.allclose(out, reference(p))


def _dropped_reference(p: Problem, block: int, seed: int):
    """The materialised computation with the block path's masks: softmax weights times the
    keep-masks drawn block of queries by block (same seed, same order), scaled, times V."""
    from attnlab.dropout import dropout_mask

    weights = attend(p.q, p.k, p.v, mask=p.mask, bias=p.bias).weights  # (b, h, i, j)
    b, h, i, j = weights.shape
    torch.manual_seed(seed)
    keeps = [dropout_mask((b * h, min(s + block, i) - s, j), p.dropout)
             for s in range(0, i, block)]  # fmt: skip
    keep = torch.cat([m for m, _ in keeps], 1).view(b, h, i, j)
    return weights * keep * keeps[0][1] @ p.v


@pytest.mark.parametrize("masked", [False, True], ids=["nomask", "rowmask"])
@pytest.mark.parametrize("with_bias", [False, True], ids=["nobias", "bias"])
def test_sdpa_dropout_in_blocks_is_the_materialised_computation(monkeypatch, masked, with_bias):
    """Many blocks of queries (100 in blocks of 32: the last one short): values and gradients of
    q, k, v and the bias equal the materialised weights times the same masks, in float64."""
    from attnlab.backends import dropout_blocks, sdpa

    monkeypatch.setattr(sdpa, "DROPOUT_BLOCKS_FROM", 0)  # blocks at any size
    monkeypatch.setattr(dropout_blocks, "BLOCK_ELEMENTS", 1)  # the smallest block: 32
    mask = torch.rand(100, 100) < 0.8 if masked else None
    if masked:
        mask[7] = False  # a query with no key: zeros, as every backend gives
    p = make_problem("scaled_dot", "softmax", mask, with_bias, i=100, dropout=0.4)
    torch.manual_seed(5)
    out, _ = SDPABackend()(p)
    want = _dropped_reference(p, 32, 5)
    assert_same_values_and_gradients(out, want, p, tol=1e-12)
    if masked:
        assert torch.all(out[:, :, 7] == 0)


def _blocks_with_reference(monkeypatch, bias: torch.Tensor, p: float = 0.3, dtype=F64):
    """``attention_with_dropout`` in blocks of 32 queries on (2, 3, 40, 4) queries of ``dtype``
    over 9 keys with ``bias``, and the materialised computation in float64 with the same
    masks."""
    from attnlab.backends import dropout_blocks
    from attnlab.dropout import dropout_mask

    monkeypatch.setattr(dropout_blocks, "BLOCK_ELEMENTS", 1)  # 32 queries a block: 2 blocks
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(s, dtype=F64, generator=gen).to(dtype).requires_grad_()
               for s in [(2, 3, 40, 4), (2, 3, 9, 4), (2, 3, 9, 5)])  # fmt: skip
    torch.manual_seed(3)
    out = dropout_blocks.attention_with_dropout(q, k, v, bias, p, 0.5)
    torch.manual_seed(3)
    keeps = [dropout_mask((6, min(s + 32, 40) - s, 9), p) for s in (0, 32)]
    keep = torch.cat([m for m, _ in keeps], 1).view(2, 3, 40, 9).to(F64)
    q64, k64, v64 = (t.to(F64) for t in (q, k, v))
    weights = torch.softmax(0.5 * q64 @ k64.transpose(-1, -2) + bias.to(F64), -1)
    return (q, k, v), out, weights * keep * keeps[0][1] @ v64


@pytest.mark.parametrize("shape", [(2, 3, 40, 9), (1, 3, 40, 9), (1, 1, 40, 9), (2, 1, 1, 9),
                                   (2, 3, 40, 1)],
                         ids=["full", "over-batch", "over-batch-and-heads", "over-queries",
                              "over-keys"])  # fmt: skip
def test_dropout_blocks_bias_gradient_sums_over_its_broadcast_dimensions(monkeypatch, shape):
    """A bias broadcast along the batch, the heads, the queries or the keys gets the score
    gradient summed along them (written once per block of queries, or added up over blocks;
    along the keys the sum is 0: a query's constant shift leaves its softmax as it is)."""
    bias = torch.randn(shape, dtype=F64, requires_grad=True)
    (q, k, v), out, want = _blocks_with_reference(monkeypatch, bias)
    torch.testing.assert_close(out, want, atol=1e-12, rtol=0)
    g = torch.randn_like(want)
    for name, a, c in zip("qkvb", torch.autograd.grad(out, (q, k, v, bias), g),
                          torch.autograd.grad(want, (q, k, v, bias), g)):  # fmt: skip
        torch.testing.assert_close(a, c, atol=1e-11, rtol=0, msg=f"gradient of {name}")


@pytest.mark.parametrize("dtype", [F64, torch.float32], ids=["float64", "float32"])
def test_dropout_blocks_bfloat16_bias_gradient_is_the_exact_one_rounded(monkeypatch, dtype):
    """A bfloat16 bias (as autocast makes it; the blocks add it to the float32 or float64
    scores as it is): the output is the exact one to the scores' precision, and the bias's
    gradient comes back in bfloat16, the exact gradient rounded."""
    bias = torch.randn(1, 3, 40, 9).to(torch.bfloat16).requires_grad_()
    (q, k, v), out, want = _blocks_with_reference(monkeypatch, bias, dtype=dtype)
    tol = 1e-12 if dtype == F64 else 1e-5
    torch.testing.assert_close(out.to(F64), want, atol=tol, rtol=0)
    g = torch.randn_like(want)
    (got,) = torch.autograd.grad(out, bias, g.to(dtype))
    (exact,) = torch.autograd.grad(want, bias, g)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), exact.to(torch.bfloat16).double(), atol=1e-4,
                               rtol=0.01)  # fmt: skip


def test_dropout_blocks_refuses_a_boolean_add():
    from attnlab.backends.dropout_blocks import attention_with_dropout

    q = torch.randn(1, 1, 4, 2)
    with pytest.raises(TypeError, match=r"add: expected a floating-point tensor, got torch.bool"):
        attention_with_dropout(q, q, q, torch.ones(1, 1, 4, 4, dtype=torch.bool), 0.1, 1.0)


def test_sdpa_dropout_in_blocks_gradcheck(monkeypatch):
    from attnlab.backends import dropout_blocks, sdpa

    monkeypatch.setattr(sdpa, "DROPOUT_BLOCKS_FROM", 0)
    monkeypatch.setattr(dropout_blocks, "BLOCK_ELEMENTS", 1)
    shapes = [(1, 2, 40, 3), (1, 2, 9, 3), (1, 2, 9, 2), (1, 2, 40, 9)]
    inputs = tuple(torch.randn(s, dtype=F64, requires_grad=True) for s in shapes)

    def fn(q, k, v, bias):
        torch.manual_seed(99)
        p = Problem(q, k, v, get_score("scaled_dot"), get_normalize("softmax"),
                    mask=masks.padding(torch.tensor([7])), bias=bias, dropout=0.3)  # fmt: skip
        return SDPABackend()(p)[0]

    assert torch.autograd.gradcheck(fn, inputs)


def test_sdpa_dropout_in_blocks_is_unbiased(monkeypatch):
    """Over 2,000 draws, the mean output is the undropped one (0.02 away at most; with the
    scale left out it is 0.59 away)."""
    from attnlab.backends import sdpa

    monkeypatch.setattr(sdpa, "DROPOUT_BLOCKS_FROM", 0)
    p = make_problem("scaled_dot", "softmax", None, False, b=1, h=1, i=64, j=64,
                     requires_grad=False, dropout=0.6)  # fmt: skip
    torch.manual_seed(0)
    mean = sum(SDPABackend()(p)[0] for _ in range(2000)) / 2000
    torch.testing.assert_close(mean, reference(p), atol=0.05, rtol=0)


def test_sdpa_dropout_path_under_bf16_autocast_returns_bf16_as_sdpa_does():
    p = make_problem("scaled_dot", "softmax", masks.padding(torch.tensor([50, 20])), False,
                     dtype=torch.float32, dropout=0.1)  # fmt: skip
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = SDPABackend()(p)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    assert (out[1, :, 20:] != 0).any()  # padded queries still attend to the real keys


@pytest.mark.parametrize("backend", EXACT)
@pytest.mark.parametrize("score, normalize", [("scaled_dot", "softmax"), ("additive", "sigmoid")])
def test_bf16_autocast(backend, score, normalize):
    # In blocks under autocast: close to float32, finite gradients through the checkpointed tiles.
    p = make_problem(score, normalize, masks.local(7) & masks.padding([50, 31]), False, dtype=torch.float32)  # fmt: skip
    kernel = make_backend(backend)
    if kernel.unsupported(p):
        pytest.skip("unsupported")
    want = reference(p)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = Problem(p.q.bfloat16(), p.k.bfloat16(), p.v.bfloat16(), p.score, p.normalize, mask=p.mask)  # fmt: skip
        out, _ = kernel(low)
    torch.testing.assert_close(out.float(), want, atol=3e-2, rtol=3e-2)
    for g in torch.autograd.grad(out.float().square().sum(), differentiable(p)):
        assert torch.isfinite(g).all()


@pytest.mark.parametrize("autocast", [False, True], ids=["bf16-inputs", "autocast"])
@pytest.mark.parametrize("masked", [False, True], ids=["nomask", "mask"])
def test_sdpa_short_bf16_runs_in_float32(autocast, masked):
    # CPU's bf16 flash kernel is slow on short sequences, so sdpa computes them in float32:
    # exactly the float32 kernel on the bf16 inputs, rounded once, even under autocast (which
    # would otherwise cast the float32 call back down).
    mask = masks.padding([20, 13]) if masked else None
    p = make_problem("scaled_dot", "softmax", mask, False, i=20, dtype=torch.bfloat16)
    up = Problem(p.q.float(), p.k.float(), p.v.float(), p.score, p.normalize, mask=mask)
    dense = up.dense_mask()
    want = torch.nn.functional.scaled_dot_product_attention(up.q, up.k, up.v, attn_mask=dense)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out, _ = SDPABackend()(p)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, want.bfloat16())
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (p.q, p.k, p.v), g)
    want_g = torch.autograd.grad(reference(up), (up.q, up.k, up.v), g.float())
    for a, c in zip(got, want_g):
        assert a.dtype == torch.bfloat16
        torch.testing.assert_close(a.float(), c, atol=2e-2, rtol=2e-2)


def test_sdpa_long_bf16_stays_in_bf16():
    # Past the threshold the bf16 kernel is as fast as float32 and half the memory: kept.
    from attnlab.backends.sdpa import CPU_LOWP_FLOAT32_MAX_WORK

    d = 32
    n = CPU_LOWP_FLOAT32_MAX_WORK // d + 1
    p = make_problem("scaled_dot", "softmax", None, False, b=1, h=1, i=n, d=d, dtype=torch.bfloat16)
    out, _ = SDPABackend()(p)
    want = torch.nn.functional.scaled_dot_product_attention(p.q, p.k, p.v)
    assert torch.equal(out, want)


def test_sdpa_small_head_dim_bf16_runs_float32_at_any_length():
    # At head dim <= 16 the bf16 kernel is slower at every length: float32, cast back.
    from attnlab.backends.sdpa import CPU_LOWP_FLOAT32_MAX_HEAD_DIM, CPU_LOWP_FLOAT32_MAX_WORK

    d = CPU_LOWP_FLOAT32_MAX_HEAD_DIM
    n = CPU_LOWP_FLOAT32_MAX_WORK // d + 1
    p = make_problem("scaled_dot", "softmax", None, False, b=1, h=1, i=n, d=d, dtype=torch.bfloat16)
    out, _ = SDPABackend()(p)
    want = torch.nn.functional.scaled_dot_product_attention(p.q.float(), p.k.float(), p.v.float())
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, want.bfloat16())


@pytest.mark.parametrize("score", SCORES.names())
@pytest.mark.parametrize("normalize", NORMALIZATIONS.names())
@pytest.mark.parametrize("backend", BACKENDS.names())
def test_refuses_at_construction_is_the_per_call_rule(backend, score, normalize):
    # One rule: what a backend refuses for a layer it also refuses for every request.
    p = make_problem(score, normalize, None, False, dtype=torch.float32, requires_grad=False)
    reason = get_backend(backend).refuses(p.score, p.normalize)
    fused = score in ("dot", "scaled_dot") and normalize == "softmax"
    assert (reason is None) == (fused or backend in ("reference", "chunked", "edges"))
    if reason is not None:
        assert "computes dot-product scores with softmax only" in reason
        assert reason in get_backend(backend).unsupported(p)


def test_get_backend():
    assert isinstance(get_backend("sdpa"), SDPABackend)
    with pytest.raises(ValueError, match="valid choices: chunked, edges, flex, reference, sdpa"):
        get_backend("cuda")
    with pytest.raises(ValueError, match="select_backend"):
        get_backend("auto")
    assert BACKENDS.names() == ["chunked", "edges", "flex", "reference", "sdpa"]


# ---- flex (compiled) -----------------------------------------------------------------------------
#: One shared shape: dynamo guards on the shapes (flex is compiled with dynamic=False), so a new
#: shape would cost another compilation. n = 320 is 2.5 blocks of 128: every mask kind also meets
#: a partial last block. tests/masks/test_block_cache.py runs causal&padding at this shape too.
FLEX_SHAPE = dict(b=2, h=2, i=320, d=16)
#: every mask kind of conftest.MASK_KINDS but "none" (test_flex_plain_dot_score): one compilation
#: each (dynamo guards on the mask's class and its Python parameters), ~5 s on a 2-core CPU
FLEX_KINDS = ["causal", "causal&padding", "local|global", "local", "local_causal", "padding", "graph", "global_tokens", "causal&tensor", "tensor"]  # fmt: skip


def flex_case(mask, score="scaled_dot"):
    p = make_problem(score, "softmax", mask, False, dtype=torch.float32, requires_grad=False, **FLEX_SHAPE)  # fmt: skip
    with torch.no_grad():
        out, _, ran = run_backend("flex", p)
    assert ran == "flex"
    return p, out


@pytest.mark.compile
@pytest.mark.parametrize("mask_kind", FLEX_KINDS)
def test_flex_equals_reference(mask_kind, make_mask):
    b, h, n = FLEX_SHAPE["b"], FLEX_SHAPE["h"], FLEX_SHAPE["i"]
    p, out = flex_case(make_mask(mask_kind, b, h, n))
    torch.testing.assert_close(out, reference(p), atol=2e-6, rtol=1e-5)
    if mask_kind == "causal&padding":  # the last sequence is empty: zeros, not NaN
        assert (out[-1] == 0).all()


@pytest.mark.compile
def test_flex_plain_dot_score():
    # Unscaled scores (scale=1 into the kernel), and no mask at all (no block mask). The scale is
    # a constant of the compiled kernel, independent of the mask: one case covers both.
    p, out = flex_case(None, score="dot")
    torch.testing.assert_close(out, reference(p), atol=2e-6, rtol=1e-5)


def test_flex_never_runs_uncompiled(monkeypatch):
    """Past its recompile limit dynamo would run flex_attention uncompiled on dense scores (its
    "SOLUTION: Use torch.compile(flex_attention)" warning): backend='flex' refuses, naming
    sdpa, and auto runs sdpa instead, with a warning. (The limit's hit is simulated here; a
    real one costs RECOMPILE_LIMIT compilations.)"""
    from torch._dynamo.exc import FailOnRecompileLimitHit

    import attnlab.backends.flex as flex

    def limit_hit(*args, **kwargs):
        raise FailOnRecompileLimitHit("Hard failure due to fail_on_recompile_limit_hit")

    monkeypatch.setattr(flex, "_flex_attention", lambda: limit_hit)
    mask = masks.local(8)
    p = make_problem("scaled_dot", "softmax", mask, False, dtype=torch.float32,
                     requires_grad=False, b=1, h=2, i=64, d=8)  # fmt: skip
    with pytest.raises(flex.FlexRecompileLimit, match="would now run uncompiled.*backend='sdpa'"):
        run_backend("flex", p)
    monkeypatch.setattr("attnlab.backends.select_backend", lambda p: flex.FlexBackend())
    with pytest.warns(UserWarning, match="auto runs sdpa instead"):
        out, _, ran = run_backend("auto", p)
    assert ran == "sdpa"
    torch.testing.assert_close(out, reference(p), atol=2e-6, rtol=1e-5)


def test_dropout_blocks_multiply_short_bfloat16_heads_in_float32(monkeypatch):
    """Heads of up to FLOAT32_PRODUCTS_UP_TO dimensions (here 4 and 5) multiply in float32
    whatever the inputs' dtype: bfloat16 inputs give the exact output rounded once to bfloat16
    (each element within half a bfloat16 step, 2^-8 of its size; with the products in
    bfloat16 one is 1.1 away), and their gradients in bfloat16."""
    bias = torch.zeros(1, 1, 1, 9, dtype=torch.bfloat16)
    (q, k, v), out, want = _blocks_with_reference(monkeypatch, bias, dtype=torch.bfloat16)
    assert out.dtype == torch.bfloat16
    error = (out.double() - want).abs() / want.abs().clamp_min(1e-3)
    assert error.max().item() <= 2**-8
    assert all(g.dtype == torch.bfloat16 for g in torch.autograd.grad(out.sum(), (q, k, v)))
