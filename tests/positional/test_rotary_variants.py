"""Rotary layouts and partial rotation (issue 9): the rotate-half and interleaved-pairs layouts,
rotating only the first ``rotary_dim`` channels, equal in float64 to Hugging Face's GPT-J and
GPT-NeoX functions, and the properties every variant must keep."""

from __future__ import annotations

import contextlib

import pytest
import torch

from attnlab import KVCache, MultiHeadAttention, masks
from attnlab.positional import Rotary, make_positional
from attnlab.positional.rotary import rotate_every_two, rotate_half

F64 = torch.float64
D = 12  # head dim
# (interleaved, rotary_dim): both layouts, whole head and part of it
VARIANTS = [(False, None), (True, None), (False, 4), (True, 8), (False, 6), (True, 2)]
IDS = [f"{'pairs' if il else 'half'}-r{r or D}" for il, r in VARIANTS]


def rotary(interleaved: bool, rotary_dim: int | None, **kw) -> Rotary:
    return Rotary(D, interleaved=interleaved, rotary_dim=rotary_dim, **kw)


def pair_permutation(r: int, d: int) -> torch.Tensor:
    """Channels ``[0, 2, .., r-2, 1, 3, .., r-1, r, .., d-1]``: interleaved pairs -> halves."""
    return torch.cat([torch.arange(0, r, 2), torch.arange(1, r, 2), torch.arange(r, d)])


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    """Hugging Face's tables follow the default dtype; float64 makes them exact references."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


# ---- the default stays what it was -----------------------------------------------------------
def test_defaults_rotate_every_channel_in_halves():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, D, dtype=F64)
    plain = Rotary(D).rotate_one(x, offset=3)
    for pe in (Rotary(D, rotary_dim=D), Rotary(D, fraction=1.0), Rotary(D, interleaved=False)):
        assert pe.rotary_dim == D and not pe.interleaved
        torch.testing.assert_close(pe.rotate_one(x, offset=3), plain, atol=0, rtol=0)
    assert repr(Rotary(D)) == "Rotary(head_dim=12, base=10000)"
    assert "interleaved=True, rotary_dim=4" in repr(Rotary(D, interleaved=True, rotary_dim=4))


def test_rotate_every_two_turns_adjacent_pairs():
    x = torch.arange(1.0, 7.0)
    torch.testing.assert_close(rotate_every_two(x), torch.tensor([-2.0, 1, -4, 3, -6, 5]))
    torch.testing.assert_close(rotate_half(x), torch.tensor([-4.0, -5, -6, 1, 2, 3]))
    torch.testing.assert_close(rotate_every_two(rotate_every_two(x)), -x)  # a quarter turn


# ---- properties of every variant ---------------------------------------------------------------
@pytest.mark.parametrize("interleaved, rotary_dim", VARIANTS, ids=IDS)
def test_scores_depend_only_on_relative_position(interleaved, rotary_dim):
    torch.manual_seed(1)
    n, pe = 30, rotary(interleaved, rotary_dim)
    q0, k0 = torch.randn(D, dtype=F64), torch.randn(D, dtype=F64)
    rq, rk = pe.rotate(q0.expand(1, 1, n, D), k0.expand(1, 1, n, D))
    s = (rq @ rk.transpose(-2, -1))[0, 0]  # (i, j)
    torch.testing.assert_close(s[1:, 1:], s[:-1, :-1], atol=1e-12, rtol=0)
    rq2, rk2 = pe.rotate(q0.view(1, 1, 1, D), k0.view(1, 1, 1, D), q_offset=900, k_offset=893)
    torch.testing.assert_close((rq2 * rk2).sum(), s[7, 0], atol=1e-10, rtol=0)
    # not trivially so: the score does change with the distance
    assert (s[0] - s[0, 0]).abs().max() > 1e-3


@pytest.mark.parametrize("interleaved, rotary_dim", VARIANTS, ids=IDS)
def test_pass_through_channels_are_unchanged_and_the_rest_is_a_full_rotary(interleaved, rotary_dim):
    torch.manual_seed(2)
    pe = rotary(interleaved, rotary_dim)
    r = pe.rotary_dim
    x = torch.randn(2, 3, 11, D, dtype=F64)
    out = pe.rotate_one(x, offset=5)
    torch.testing.assert_close(out[..., r:], x[..., r:], atol=0, rtol=0)
    # frequencies are spaced over r, not d (θ_k = base^(-2k/r), as GPT-J / GPT-NeoX compute)
    whole = Rotary(r, interleaved=interleaved).rotate_one(x[..., :r], offset=5)
    torch.testing.assert_close(out[..., :r], whole, atol=0, rtol=0)


@pytest.mark.parametrize("rotary_dim", [None, 4, 8])
def test_interleaved_is_rotate_half_up_to_a_fixed_channel_permutation(rotary_dim):
    torch.manual_seed(3)
    pairs, half = (
        Rotary(D, interleaved=True, rotary_dim=rotary_dim),
        Rotary(D, rotary_dim=rotary_dim),
    )
    perm = pair_permutation(pairs.rotary_dim, D)
    x = torch.randn(2, 3, 13, D, dtype=F64)
    torch.testing.assert_close(
        pairs.rotate_one(x, offset=2)[..., perm], half.rotate_one(x[..., perm], offset=2)
    )
    # ... and the layouts really differ (a wrong layout would not load pretrained weights)
    assert (pairs.rotate_one(x) - half.rotate_one(x))[..., 1:, :].abs().max() > 1e-2


@pytest.mark.parametrize("interleaved, rotary_dim", VARIANTS, ids=IDS)
def test_norms_preserved_and_position_zero_is_identity(interleaved, rotary_dim):
    torch.manual_seed(4)
    pe = rotary(interleaved, rotary_dim)
    x = torch.randn(2, 3, 17, D, dtype=F64)
    out = pe.rotate_one(x, offset=40)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), atol=1e-12, rtol=0)
    torch.testing.assert_close(pe.rotate_one(x[..., :1, :]), x[..., :1, :], atol=0, rtol=0)


@pytest.mark.parametrize("interleaved, rotary_dim", VARIANTS, ids=IDS)
def test_offsets_equal_slicing_the_full_computation(interleaved, rotary_dim):
    torch.manual_seed(5)
    pe = rotary(interleaved, rotary_dim)
    q, k = torch.randn(2, 3, 10, D), torch.randn(2, 3, 10, D)
    rq, rk = pe.rotate(q, k)
    fresh = rotary(interleaved, rotary_dim)  # grows its table step by step
    for t in range(10):
        sq, sk = fresh.rotate(q[:, :, t : t + 1], k[:, :, t:], q_offset=t, k_offset=t)
        torch.testing.assert_close(sq, rq[:, :, t : t + 1], atol=0, rtol=0)
        torch.testing.assert_close(sk, rk[:, :, t:], atol=0, rtol=0)


@pytest.mark.parametrize("interleaved, rotary_dim", [(True, 4), (False, 2)])
def test_kv_cache_step_by_step_equals_full_causal(interleaved, rotary_dim):
    torch.manual_seed(6)
    mha = MultiHeadAttention(2 * D, 2).to(F64).eval()
    pe = rotary(interleaved, rotary_dim)
    x = torch.randn(2, 9, 2 * D, dtype=F64)
    full = mha(x, mask=masks.causal(), positional=pe).out
    cache = KVCache()
    steps = [mha(x[:, :4], mask=masks.causal(), positional=pe, cache=cache)]
    steps += [
        mha(x[:, t : t + 1], mask=masks.causal(), positional=pe, cache=cache) for t in range(4, 9)
    ]
    torch.testing.assert_close(torch.cat([s.out for s in steps], 1), full, atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_low_precision_keeps_dtype_and_pass_through_bits(dtype):
    torch.manual_seed(7)
    pe = Rotary(D, interleaved=True, rotary_dim=6)
    x = torch.randn(2, 3, 8, D).to(dtype)
    out = pe.rotate_one(x, offset=1)
    assert out.dtype == dtype
    assert torch.equal(out[..., 6:], x[..., 6:])
    ref = pe.rotate_one(x.double(), offset=1)
    torch.testing.assert_close(
        out.double(), ref, atol=2e-2 if dtype == torch.bfloat16 else 1e-6, rtol=0
    )
    assert dict(pe.state_dict()) == {} and list(pe.buffers()) == []  # the cache stays outside


# ---- equal to Hugging Face's own functions ----------------------------------------------------
@pytest.mark.parametrize("rotary_dim", [None, 4, 8])
@pytest.mark.parametrize("offset", [0, 7])
def test_equals_hugging_face_gptj(rotary_dim, offset):
    gptj = pytest.importorskip("transformers.models.gptj.modeling_gptj")
    torch.manual_seed(8)
    b, n, h = 2, 9, 3
    q = torch.randn(b, n, h, D, dtype=F64)  # GPT-J's layout before its transpose: (b, n, h, d)
    pos_dim = rotary_dim or D
    with default_dtype(F64):
        table = gptj.create_sinusoidal_positions(offset + n + 4, pos_dim)
    assert table.dtype == F64
    position_ids = torch.arange(offset, offset + n).expand(b, n)
    sincos = table[position_ids]  # (b, n, pos_dim): [sin | cos], as GPTJRotaryEmbedding.forward
    sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
    if rotary_dim is not None:  # as GPTJAttention.forward does
        rot = gptj.apply_rotary_pos_emb(q[..., :rotary_dim], sin, cos)
        expected = torch.cat([rot, q[..., rotary_dim:]], dim=-1)
    else:
        expected = gptj.apply_rotary_pos_emb(q, sin, cos)
    pe = Rotary(D, interleaved=True, rotary_dim=rotary_dim)
    ours = pe.rotate_one(q.transpose(1, 2), offset=offset).transpose(1, 2)  # (b, n, h, d)
    torch.testing.assert_close(ours, expected, atol=1e-13, rtol=0)
    torch.testing.assert_close(rotate_every_two(q), gptj.rotate_every_two(q), atol=0, rtol=0)


@pytest.mark.parametrize("fraction", [1.0, 0.5, 0.25])
def test_equals_hugging_face_gpt_neox_partial_rotary(fraction):
    neox = pytest.importorskip("transformers.models.gpt_neox.modeling_gpt_neox")
    from transformers import GPTNeoXConfig

    torch.manual_seed(9)
    b, h, n, d, offset, base = 2, 2, 9, 16, 5, 500.0
    config = GPTNeoXConfig(
        hidden_size=h * d,
        num_attention_heads=h,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": base,
            "partial_rotary_factor": fraction,
        },
    )
    q, k = torch.randn(b, h, n, d, dtype=F64), torch.randn(b, h, n, d, dtype=F64)
    position_ids = torch.arange(offset, offset + n).expand(b, n)
    pe = Rotary(d, base=base, fraction=fraction)
    assert pe.rotary_dim == int(d * fraction)
    ours = pe.rotate(q, k, q_offset=offset, k_offset=offset)

    # float64: HF's rotation (rotate_half, partial by cos.shape[-1]) on float64 tables built
    # by HF's formula (compute_default_rope_parameters + GPTNeoXRotaryEmbedding.forward)
    r = int(d * fraction)
    inv_freq = 1.0 / (base ** (torch.arange(0, r, 2, dtype=F64) / r))
    freqs = position_ids[..., None].to(F64) * inv_freq  # (b, n, r/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (b, n, r)
    expected = neox.apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
    for got, want in zip(ours, expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-13, rtol=0)

    # and HF's own module (float32 tables, as it always computes them) agrees at float32
    cos32, sin32 = neox.GPTNeoXRotaryEmbedding(config)(q.float(), position_ids)
    assert cos32.shape[-1] == r
    expected32 = neox.apply_rotary_pos_emb(q.float(), k.float(), cos32, sin32)
    for got, want in zip(ours, expected32, strict=True):
        torch.testing.assert_close(got.float(), want, atol=1e-5, rtol=1e-5)


# ---- reaching users -----------------------------------------------------------------------------
def test_make_positional_passes_the_options():
    pe = make_positional("rotary", dim=2 * D, heads=2, interleaved=True, fraction=0.5)
    assert isinstance(pe, Rotary) and pe.interleaved and (pe.head_dim, pe.rotary_dim) == (D, 6)
    pe = make_positional("rotary", dim=2 * D, heads=2, rotary_dim=4)
    assert (pe.rotary_dim, pe.interleaved) == (4, False)
    with pytest.raises(ValueError, match="rotary_dim"):
        make_positional("rotary", dim=2 * D, heads=2, rotary_dim=14)


# ---- clear errors -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rotary_dim": 5}, r"rotary_dim must be a positive even int at most head_dim=12.*got 5"),
        ({"rotary_dim": 0}, r"rotary_dim must be .* got 0"),
        ({"rotary_dim": 14}, r"rotary_dim must be .* at most head_dim=12.*got 14"),
        ({"rotary_dim": 4.0}, r"rotary_dim must be .* got 4\.0"),
        ({"rotary_dim": True}, r"rotary_dim must be .* got True"),
        ({"fraction": 0.0}, r"fraction must be in \(0, 1\], got 0\.0"),
        ({"fraction": 1.5}, r"fraction must be in \(0, 1\], got 1\.5"),
        ({"fraction": "half"}, r"fraction must be a number in \(0, 1\], got 'half'"),
        ({"fraction": 0.25}, r"fraction=0\.25 of head_dim=12 gives rotary_dim=3.*even"),
        ({"fraction": 0.1}, r"fraction=0\.1 of head_dim=12 gives rotary_dim=1"),
        ({"rotary_dim": 4, "fraction": 0.5}, r"at most one of rotary_dim and fraction"),
        ({"interleaved": "yes"}, r"interleaved must be a bool, got 'yes'"),
    ],
)
def test_bad_options_raise_naming_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Rotary(D, **kwargs)
