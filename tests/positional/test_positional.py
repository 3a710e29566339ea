"""Properties of every positional encoding in attnlab.positional (parametrised over the registry)."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab import KVCache, MultiHeadAttention, masks
from attnlab.positional import (
    POSITIONAL,
    ALiBi,
    Floater,
    Learned,
    PositionalEncoding,
    Recurrent,
    RelativeBias,
    Rotary,
    ShawRelative,
    Sinusoidal,
    alibi_slopes,
    make_positional,
    t5_bucket,
)

DIM, HEADS, MAX_LEN = 16, 4, 32
NAMES = POSITIONAL.names()
INPUT_NAMES = [n for n in NAMES if POSITIONAL.get(n).acts_on == "input"]
SCORE_NAMES = [n for n in NAMES if POSITIONAL.get(n).acts_on == "scores"]


def make(name: str, **kw) -> PositionalEncoding:
    torch.manual_seed(0)
    return make_positional(name, dim=DIM, heads=HEADS, max_len=kw.pop("max_len", MAX_LEN), **kw)


def encode_x(pe: PositionalEncoding, x: torch.Tensor) -> torch.Tensor:
    """A probe of any encoding: what it does to ``x (b, n, DIM)`` seen as the layer sees it."""
    b, n, _ = x.shape
    if pe.acts_on == "input":
        return pe(x)
    if pe.acts_on == "qk":
        q = x.view(b, n, HEADS, DIM // HEADS).transpose(1, 2)  # (b, h, i, d)
        return pe.rotate(q, q)[0]
    return pe.score_bias(n, n)


# ---- registry and factory -------------------------------------------------------------------
def test_registry_lists_every_encoding():
    expected = {"sinusoidal", "learned", "relative", "shaw", "rotary", "alibi", "floater"}
    assert set(NAMES) == expected | {"recurrent"}
    for name in NAMES:
        assert POSITIONAL.get(name).acts_on in ("input", "qk", "scores")


def test_make_positional_errors():
    with pytest.raises(ValueError, match="valid choices"):
        make_positional("nope", dim=DIM, heads=HEADS)
    with pytest.raises(ValueError, match="needs max_len"):
        make_positional("learned", dim=DIM, heads=HEADS)
    with pytest.raises(ValueError, match="valid options"):
        make_positional("alibi", dim=DIM, heads=HEADS, base=2.0)
    with pytest.raises(ValueError, match="divisor"):
        make_positional("rotary", dim=DIM, heads=3)
    assert make_positional("rotary", dim=DIM, heads=HEADS, base=500.0).head_dim == DIM // HEADS
    assert make_positional("recurrent", dim=DIM, heads=HEADS, cell="lstm").cell == "lstm"


# ---- generic properties ---------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_shapes_and_finite(name):
    pe = make(name)
    b, n = 2, 7
    x = torch.randn(b, n, DIM)
    if pe.acts_on == "input":
        assert pe(x).shape == (b, n, DIM)
    elif pe.acts_on == "qk":
        q, k = torch.randn(b, HEADS, n, DIM // HEADS), torch.randn(b, HEADS, n + 3, DIM // HEADS)
        rq, rk = pe.rotate(q, k)
        assert rq.shape == q.shape and rk.shape == k.shape
    else:
        bias = pe.score_bias(n, n + 3, q_offset=3)
        assert bias.shape == (1, HEADS, n, n + 3) and torch.isfinite(bias).all()
    res = MultiHeadAttention(DIM, HEADS)(x, positional=pe)
    assert res.out.shape == (b, n, DIM) and torch.isfinite(res.out).all()


@pytest.mark.parametrize("name", NAMES)
def test_gradients_reach_every_parameter(name):
    pe = make(name)
    torch.manual_seed(1)
    mha = MultiHeadAttention(DIM, HEADS)
    mha(torch.randn(2, 9, DIM), positional=pe).out.sum().backward()
    for pname, p in [*pe.named_parameters(), *mha.named_parameters()]:
        assert p.grad is not None and p.grad.abs().sum() > 0, f"no gradient reaches {pname}"


@pytest.mark.parametrize("name", [None, *NAMES])
def test_positions_break_permutation_equivariance(name):
    torch.manual_seed(2)
    mha = MultiHeadAttention(DIM, HEADS).double()
    pe = None if name is None else make(name).double()
    x = torch.randn(2, 6, DIM, dtype=torch.float64)
    perm = torch.tensor([2, 0, 5, 1, 4, 3])  # not a reversal: |i - j| is reversal-symmetric
    out = mha(x, positional=pe).out
    out_perm = mha(x[:, perm], positional=pe).out
    equivariant = torch.allclose(out_perm, out[:, perm], atol=1e-6)
    assert equivariant == (name is None)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "learned"])
def test_extrapolating_encodings_run_beyond_training_length(name):
    kw = {"relative": {"num_buckets": 8, "max_distance": 8}, "shaw": {"max_distance": 8}}
    pe = make(name, max_len=None, **kw.get(name, {}))
    assert pe.max_len is None
    mha = MultiHeadAttention(DIM, HEADS)
    for n in (16, 32, 64):  # "trained" at 16: 2x and 4x beyond
        out = mha(torch.randn(1, n, DIM), positional=pe).out
        assert out.shape == (1, n, DIM) and torch.isfinite(out).all()
    probe = encode_x(pe, torch.randn(1, 64, DIM))
    assert torch.isfinite(probe).all()


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("name", INPUT_NAMES)
def test_input_encodings_incremental_equals_full(name, grad):
    pe = make(name)
    x = torch.randn(2, 12, DIM)
    with torch.set_grad_enabled(grad):
        full = pe(x)
        for t in range(x.shape[1]):  # no_grad: Floater / Recurrent extend their cache per step
            step = pe(x[:, t : t + 1], offset=t)
            torch.testing.assert_close(step, full[:, t : t + 1], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(pe(x[:, 4:9], offset=4), full[:, 4:9], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_kv_cache_decoding_matches_full_causal_pass(name):
    """MultiHeadAttention + encoding, one token at a time with a KV cache == the full pass."""
    torch.manual_seed(3)
    pe = make(name).double()
    mha = MultiHeadAttention(DIM, HEADS).double().eval()
    x = torch.randn(2, 8, DIM, dtype=torch.float64)
    with torch.no_grad():
        full = mha(x, mask=masks.causal(), positional=pe).out
        cache = KVCache()
        steps = [
            mha(x[:, t : t + 1], mask=masks.causal(), positional=pe, cache=cache).out
            for t in range(x.shape[1])
        ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-10, rtol=1e-10)


# ---- score biases ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", SCORE_NAMES)
def test_score_biases_are_toeplitz_and_offset_consistent(name):
    kw = {"relative": {"num_buckets": 8, "max_distance": 6}, "shaw": {"max_distance": 5}}
    pe = make(name, **kw.get(name, {}))
    bias = pe.score_bias(20, 24)  # (1, h, i, j)
    # depends only on i - j: every diagonal is constant
    torch.testing.assert_close(bias[..., 1:, 1:], bias[..., :-1, :-1], atol=0, rtol=0)
    for t in (0, 5, 19):
        torch.testing.assert_close(pe.score_bias(1, 24, q_offset=t), bias[:, :, t : t + 1])


def _t5_reference_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """Hugging Face's ``T5Attention._relative_position_bucket``, verbatim in substance."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return relative_buckets + torch.where(is_small, relative_position, large)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_match_reference(bidirectional):
    rel = torch.arange(-300, 301)
    for num_buckets, max_distance in [(32, 128), (8, 20)]:
        ours = t5_bucket(
            rel, num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional
        )
        ref = _t5_reference_bucket(rel, bidirectional, num_buckets, max_distance)
        assert torch.equal(ours, ref)
        assert ours.min() >= 0 and ours.max() < num_buckets


def test_relative_bias_shares_last_bucket_beyond_max_distance():
    pe = RelativeBias(HEADS, num_buckets=16, max_distance=10)
    bias = pe.score_bias(1, 60, q_offset=59)[0, :, 0]  # (h, j): distances 59 .. 0 back
    torch.testing.assert_close(bias[:, 0:49], bias[:, 49:50].expand(-1, 49))  # distance >= 10


def test_shaw_clips_distances():
    pe = ShawRelative(HEADS, max_distance=3)
    row = pe.score_bias(1, 21, q_offset=10)[0, :, 0]  # (h, j): j - i from -10 to 10
    w = pe.bias.detach().T  # (h, 2K+1)
    torch.testing.assert_close(row[:, :8], w[:, :1].expand(-1, 8))  # j - i <= -3
    torch.testing.assert_close(row[:, 7:14], w)  # j - i in -3 .. 3
    torch.testing.assert_close(row[:, 13:], w[:, -1:].expand(-1, 8))  # j - i >= 3


def test_alibi_slopes():
    assert alibi_slopes(8) == [2.0**-k for k in range(1, 9)]
    torch.testing.assert_close(ALiBi(8).slopes, torch.tensor([2.0**-k for k in range(1, 9)]))
    # not a power of two (the paper's code): slopes of 4 heads, then every other one of 8
    assert alibi_slopes(6) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert len(alibi_slopes(12)) == 12 and len(set(alibi_slopes(12))) == 12


def test_alibi_bias_values():
    i, j = torch.meshgrid(torch.arange(5), torch.arange(7), indexing="ij")
    slopes = torch.tensor(alibi_slopes(HEADS))[:, None, None]
    bidir = ALiBi(HEADS).score_bias(5, 7)[0]
    torch.testing.assert_close(bidir, -slopes * (i - j).abs().float())
    causal = ALiBi(HEADS, causal=True).score_bias(5, 7)[0]
    torch.testing.assert_close(causal, -slopes * (i - j).clamp_min(0).float())
    allowed = j <= i
    torch.testing.assert_close(causal[:, allowed], bidir[:, allowed])  # agree under a causal mask


# ---- rotary ---------------------------------------------------------------------------------
def test_rotary_scores_depend_only_on_relative_position():
    torch.manual_seed(4)
    d, n = 8, 40
    pe = Rotary(d)
    q0, k0 = torch.randn(d, dtype=torch.float64), torch.randn(d, dtype=torch.float64)
    q = q0.expand(1, 1, n, d)  # the same query vector at every position
    k = k0.expand(1, 1, n, d)
    rq, rk = pe.rotate(q, k)
    assert rq.dtype == torch.float64
    s = (rq @ rk.transpose(-2, -1))[0, 0]  # (i, j)
    torch.testing.assert_close(s[1:, 1:], s[:-1, :-1], atol=1e-10, rtol=0)
    # and the same score for the same i - j, whatever the offsets
    rq2, rk2 = pe.rotate(q[..., :1, :], k[..., :1, :], q_offset=1000, k_offset=1000 - 7)
    torch.testing.assert_close((rq2 * rk2).sum(), s[7, 0], atol=1e-10, rtol=0)
    # rotations preserve norms
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1), atol=1e-12, rtol=0)


def test_rotary_offsets_equal_slicing_the_full_computation():
    torch.manual_seed(5)
    pe = Rotary(DIM // HEADS)
    q, k = torch.randn(2, HEADS, 10, DIM // HEADS), torch.randn(2, HEADS, 10, DIM // HEADS)
    rq, rk = pe.rotate(q, k)
    for t in range(10):
        sq, sk = pe.rotate(q[:, :, t : t + 1], k[:, :, t:], q_offset=t, k_offset=t)
        torch.testing.assert_close(sq, rq[:, :, t : t + 1], atol=0, rtol=0)
        torch.testing.assert_close(sk, rk[:, :, t:], atol=0, rtol=0)


def test_rotary_rejects_bad_head_dim():
    with pytest.raises(ValueError, match="even"):
        Rotary(5)
    with pytest.raises(ValueError, match="head_dim=4"):
        Rotary(4).rotate(torch.randn(1, 1, 3, 6), torch.randn(1, 1, 3, 6))


# ---- absolute encodings ---------------------------------------------------------------------
def test_sinusoidal_matches_the_paper_formula():
    dim = 7  # odd: the last sine is kept
    pe = Sinusoidal(dim, base=10000.0).double()
    out = pe(torch.zeros(1, 50, dim, dtype=torch.float64))[0]
    for t in (0, 1, 17, 49):
        for c in range(dim):
            angle = t / 10000.0 ** (2 * (c // 2) / dim)
            ref = math.sin(angle) if c % 2 == 0 else math.cos(angle)
            assert abs(out[t, c].item() - ref) < 1e-12


def test_learned_raises_beyond_max_len():
    pe = Learned(DIM, 8)
    assert pe(torch.randn(1, 8, DIM)).shape == (1, 8, DIM)
    with pytest.raises(ValueError, match="does not extrapolate"):
        pe(torch.randn(1, 9, DIM))
    with pytest.raises(ValueError, match="max_len=8"):
        pe(torch.randn(1, 1, DIM), offset=8)
    with pytest.raises(ValueError, match="does not extrapolate"):
        MultiHeadAttention(DIM, HEADS)(torch.randn(1, 9, DIM), positional=pe)


def test_floater_starts_at_p0_and_is_smooth():
    torch.manual_seed(6)
    pe = Floater(DIM)
    x = torch.randn(2, 64, DIM)
    torch.testing.assert_close(pe(x)[:, 0], x[:, 0], atol=0, rtol=0)  # p(0) = 0
    learned = Floater(DIM, learn_initial=True)
    with torch.no_grad():
        learned.p0.normal_()
    torch.testing.assert_close(learned(x)[:, 0], x[:, 0] + learned.p0, atol=0, rtol=0)
    p = pe.table(64)  # (n, c)
    step = (p[1:] - p[:-1]).norm(dim=-1)
    assert (step[8:] < 0.2 * p[9:].norm(dim=-1)).all()  # adjacent positions are close
    assert step.max() < 0.25 * (p[-1] - p[0]).norm()  # ... compared with the whole trajectory
    curvature = (p[2:] - 2 * p[1:-1] + p[:-2]).norm(dim=-1)
    assert (curvature < 0.5 * step[1:]).all()  # and the trajectory is smooth


def test_floater_rk4_converges_with_smaller_steps():
    torch.manual_seed(7)
    coarse = Floater(DIM, delta=0.2).double()
    fine = Floater(DIM, delta=0.2, substeps=16).double()
    fine.load_state_dict(coarse.state_dict())
    a, b = coarse.table(30), fine.table(30)
    assert (a - b).norm() < 1e-5 * b.norm()  # RK4: error O(step^4) per unit time


@pytest.mark.parametrize("cls", [Floater, Recurrent])
def test_trajectory_cache_is_dropped_when_parameters_change(cls):
    torch.manual_seed(8)
    pe = cls(DIM)
    with torch.no_grad():
        before = pe.table(10).clone()
        pe.table(20)
        for p in pe.parameters():
            p.mul_(1.5)
        after = pe.table(10)
    assert not torch.allclose(before, after)
    fresh = pe.table(10)  # grad enabled: integrates afresh
    torch.testing.assert_close(after, fresh.detach(), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_recurrent_depends_on_position_only(cell):
    torch.manual_seed(9)
    pe = Recurrent(DIM, cell=cell)
    x = torch.randn(3, 10, DIM)
    enc = pe(x) - x  # (b, n, c)
    torch.testing.assert_close(enc, enc[:1].expand(3, -1, -1))  # the same for every sequence
    assert (enc[:, 1:] - enc[:, :-1]).abs().amax() > 1e-3  # and differs across positions
    with torch.no_grad():  # decoding continues the cached recurrent state (h, or (h, c))
        pe._cache = None
        steps = torch.cat([pe.table(t + 1)[t:] for t in range(10)])
    torch.testing.assert_close(steps, enc[0], atol=1e-6, rtol=1e-6)


# ---- DDP: buffers never depend on the lengths seen -----------------------------------------
def _buffer_shapes(module: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(b.shape) for name, b in module.named_buffers()}


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("name", NAMES)
def test_buffers_do_not_grow_with_the_lengths_seen(name, grad):
    # DDP broadcasts every buffer from rank 0 at each forward; ranks see different lengths, so a
    # table that grows as a buffer has different sizes on different ranks and gloo aborts.
    pe = make(name, max_len=64)
    before = _buffer_shapes(pe)
    with torch.set_grad_enabled(grad):
        for n in (5, 37, 64):
            encode_x(pe, torch.randn(2, n, DIM, dtype=torch.float64))
    assert _buffer_shapes(pe) == before
    assert all(not k.startswith("_") for k in pe.state_dict())  # caches never in the state dict


@pytest.mark.parametrize("cls", [Rotary, Sinusoidal])
def test_cached_tables_are_outside_the_state_dict_and_follow_dtype(cls):
    pe = cls(DIM // HEADS) if cls is Rotary else cls(DIM)
    assert dict(pe.state_dict()) == {} and list(pe.buffers()) == []
    x32 = torch.randn(1, 3, 7, DIM // HEADS) if cls is Rotary else torch.randn(1, 7, DIM)
    long = torch.randn(1, 3, 20, DIM // HEADS) if cls is Rotary else torch.randn(1, 20, DIM)
    probe = (lambda t: pe.rotate_one(t)) if cls is Rotary else pe
    first = probe(x32)
    probe(long.double())  # regrow in float64
    torch.testing.assert_close(probe(x32), first, rtol=0, atol=0)  # same values after regrowth
    assert list(pe.buffers()) == [] and pe.load_state_dict({}, strict=True) is not None
