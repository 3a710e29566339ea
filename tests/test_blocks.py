"""Tests for attnlab.blocks: FeedForward, TransformerBlock, TransformerEncoder, TransformerDecoder.

Properties: shapes, gradients to every parameter, incremental decoding equals the full causal
computation, no look-ahead, padding invariance, every core option reachable, agreement with
torch.nn.Transformer*Layer.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch import Tensor, nn

from attnlab import masks
from attnlab.attention_config import AttentionConfig
from attnlab.blocks import (
    BlockCache,
    DecoderCache,
    FeedForward,
    TransformerBlock,
    TransformerDecoder,
    TransformerEncoder,
)
from attnlab.convert import block_from_torch
from attnlab.positional.base import PositionalEncoding

DIM, HEADS = 16, 4
F64 = torch.float64


# ---- small positional encodings of each kind, independent of attnlab.positional ---------------
class ToySinusoid(PositionalEncoding):
    acts_on = "input"

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        pos = torch.arange(offset, offset + x.shape[1], dtype=x.dtype)[:, None]  # (n, 1)
        freq = torch.arange(self.dim, dtype=x.dtype)[None] + 1.0  # (1, dim)
        return x + torch.sin(pos / freq)


class ToyRotary(PositionalEncoding):
    acts_on = "qk"

    def _rot(self, x: Tensor, offset: int) -> Tensor:
        n, d = x.shape[-2:]
        pos = torch.arange(offset, offset + n, dtype=x.dtype)[:, None]
        ang = pos / 10.0 ** (torch.arange(d // 2, dtype=x.dtype) / (d // 2))  # (n, d/2)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * ang.cos() - x2 * ang.sin(), x1 * ang.sin() + x2 * ang.cos()], -1)

    def rotate(self, q, k, *, q_offset=0, k_offset=0):
        return self._rot(q, q_offset), self._rot(k, k_offset)


class ToyALiBi(PositionalEncoding):
    acts_on = "scores"

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.slopes = nn.Parameter(torch.linspace(0.1, 0.5, heads))

    def score_bias(self, q_len, kv_len, *, q_offset=0):
        i = torch.arange(q_offset, q_offset + q_len)[:, None]
        j = torch.arange(kv_len)[None]
        return -self.slopes.view(1, -1, 1, 1) * (i - j).abs().to(self.slopes.dtype)


def make_positional(kind: str | None) -> PositionalEncoding | None:
    if kind is None:
        return None
    if kind == "rotary":  # the library's own, if written yet
        rotary = pytest.importorskip("attnlab.positional.rotary")
        return rotary.Rotary(DIM // HEADS)
    return {"toy_input": ToySinusoid(DIM), "toy_qk": ToyRotary(), "toy_scores": ToyALiBi(HEADS)}[
        kind
    ]


POSITIONALS = [None, "toy_input", "toy_qk", "toy_scores", "rotary"]


def randn(*shape, dtype=F64, seed=0) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


# ---- FeedForward ------------------------------------------------------------------------------
@pytest.mark.parametrize("gated", [False, True])
def test_feedforward_shapes_and_hidden(gated):
    ff = FeedForward(DIM, gated=gated, activation=nn.SiLU)
    assert ff(torch.randn(2, 5, DIM)).shape == (2, 5, DIM)
    assert ff.fc1.out_features == (2 if gated else 1) * 4 * DIM
    assert ff.fc2.in_features == 4 * DIM


def test_feedforward_gated_is_swiglu():
    torch.manual_seed(0)
    ff = FeedForward(DIM, hidden=8, activation=nn.SiLU, gated=True, bias=False).double()
    x = randn(3, DIM)
    w_a, w_g = ff.fc1.weight.split(8)
    expected = (nn.functional.silu(x @ w_g.T) * (x @ w_a.T)) @ ff.fc2.weight.T
    torch.testing.assert_close(ff(x), expected)


def test_feedforward_rejects_bad_args():
    with pytest.raises(ValueError, match="dropout"):
        FeedForward(DIM, dropout=1.5)
    with pytest.raises(ValueError, match="hidden"):
        FeedForward(DIM, hidden=0)


# ---- TransformerBlock -------------------------------------------------------------------------
@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("cross", [False, True])
def test_block_shapes(norm_first, cross):
    torch.manual_seed(0)
    block = TransformerBlock(
        DIM, HEADS, norm_first=norm_first, cross_attention=cross, context_dim=8 if cross else None
    )
    x, ctx = torch.randn(2, 5, DIM), torch.randn(2, 7, 8)
    o = block(x, context=ctx if cross else None, need_weights=True)
    assert o.out.shape == (2, 5, DIM)
    assert o.self_weights.shape == (2, HEADS, 5, 5)
    assert (o.cross_weights.shape == (2, HEADS, 5, 7)) if cross else o.cross_weights is None
    assert torch.isfinite(o.out).all()


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("gated", [False, True])
def test_block_every_parameter_gets_a_gradient(norm_first, cross, gated):
    torch.manual_seed(0)
    block = TransformerBlock(
        DIM, HEADS, norm_first=norm_first, cross_attention=cross, causal=cross,
        attention=AttentionConfig(score="additive"), ff_layer=partial(FeedForward, gated=gated),
    )  # fmt: skip
    x, ctx = torch.randn(2, 5, DIM), torch.randn(2, 3, DIM)
    block(x, context=ctx if cross else None).out.square().sum().backward()
    for name, p in block.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_pre_and_post_norm_differ():
    torch.manual_seed(0)
    pre = TransformerBlock(DIM, HEADS, norm_first=True).double()
    post = TransformerBlock(DIM, HEADS, norm_first=False).double()
    post.load_state_dict(pre.state_dict())
    x = randn(2, 5, DIM)
    assert not torch.allclose(pre(x).out, post(x).out, atol=1e-3)
    # post-norm ends in a LayerNorm (weight 1, bias 0 at init): per-position mean 0, variance 1
    out = post(x).out
    torch.testing.assert_close(out.mean(-1), torch.zeros(2, 5, dtype=F64), atol=1e-10, rtol=0)


def test_block_dropout_only_in_training():
    torch.manual_seed(0)
    block = TransformerBlock(DIM, HEADS, dropout=0.5, cross_attention=True)
    assert block.self_attn.dropout == 0.5 and block.ff.drop.p == 0.5
    plain = TransformerBlock(DIM, HEADS, cross_attention=True)
    plain.load_state_dict(block.state_dict())
    x = torch.randn(2, 5, DIM)
    assert not torch.allclose(block(x, context=x).out, block(x, context=x).out)
    block.eval()
    torch.testing.assert_close(block(x, context=x).out, plain(x, context=x).out)


def test_block_causal_combines_with_mask():
    torch.manual_seed(0)
    block = TransformerBlock(DIM, HEADS, causal=True).double()
    x = randn(2, 6, DIM)
    lengths = torch.tensor([6, 4])
    w = block(x, mask=masks.padding(lengths), need_weights=True).self_weights
    i, j = torch.arange(6)[:, None], torch.arange(6)[None]
    allowed = (j <= i) & (j < lengths.view(2, 1, 1, 1))  # (b, 1, i, j)
    assert (w.masked_select(~allowed.expand_as(w)) == 0).all()
    # a boolean key-padding tensor is the same mask
    keep = torch.arange(6)[None] < lengths[:, None]  # (b, j)
    w2 = block(x, mask=keep[:, None, None, :], need_weights=True).self_weights
    torch.testing.assert_close(w, w2)


def test_block_rejects_impossible_combinations():
    with pytest.raises(ValueError, match="cross_attention=True"):
        TransformerBlock(DIM, HEADS, context_dim=8)
    with pytest.raises(
        TypeError, match=r"expected an AttentionConfig.*AttentionConfig\(\*\*settings\)"
    ):
        TransformerBlock(DIM, HEADS, cross_attention=True, attention={"context_dim": 8})
    block = TransformerBlock(DIM, HEADS)
    x = torch.randn(1, 3, DIM)
    with pytest.raises(ValueError, match="no cross-attention"):
        block(x, context=x)
    with pytest.raises(ValueError, match="once"):
        block(x, positional=ToySinusoid(DIM))
    with pytest.raises(ValueError, match="pass context"):
        TransformerBlock(DIM, HEADS, cross_attention=True)(x)


def test_a_feed_forward_partial_keeps_its_own_settings():
    # Issue 9: the block's dropout used to override the user's partial(FeedForward, dropout=0).
    block = TransformerBlock(DIM, HEADS, dropout=0.3, ff_layer=partial(FeedForward, dropout=0.0))
    assert block.ff.drop.p == 0.0
    assert block.drop.p == 0.3 and block.self_attn.dropout == 0.3  # the rest keeps the block's
    assert TransformerBlock(DIM, HEADS, dropout=0.3).ff.drop.p == 0.3
    block = TransformerBlock(DIM, HEADS, ff_layer=partial(FeedForward, hidden=24))
    assert block.ff.hidden == 24  # a bound width wins over the default ff_hidden=None
    assert TransformerBlock(DIM, HEADS, ff_hidden=24, ff_layer=partial(FeedForward, hidden=24))
    with pytest.raises(ValueError, match="ff_hidden=8 and ff_layer's bound hidden=24"):
        TransformerBlock(DIM, HEADS, ff_hidden=8, ff_layer=partial(FeedForward, hidden=24))


def test_block_attention_settings_and_dropout():
    block = TransformerBlock(
        DIM, HEADS, dropout=0.2, cross_attention=True,
        attention=AttentionConfig(score="dot", backend="reference"), attention_dropout=0.05,
    )  # fmt: skip
    for attn in (block.self_attn, block.cross_attn):
        assert (attn.score.name, attn.backend, attn.dropout) == ("dot", "reference", 0.05)
    assert block.ff.drop.p == 0.2 and block.drop.p == 0.2
    # efficient kernels have no attention-weight dropout: the block's dropout stays outside them
    block = TransformerBlock(DIM, HEADS, dropout=0.2, attention=AttentionConfig(kernel="linear"))
    assert block.self_attn.kernel is not None and block.self_attn.dropout == 0.0
    with pytest.raises(ValueError, match="dropout"):
        TransformerBlock(
            DIM, HEADS, attention=AttentionConfig(kernel="linear"), attention_dropout=0.1
        )
    with pytest.raises(TypeError, match="AttentionConfig"):
        TransformerBlock(DIM, HEADS, attention="performer")


def test_block_cache_matches_full_causal():
    torch.manual_seed(0)
    block = TransformerBlock(DIM, HEADS, causal=True, cross_attention=True).double().eval()
    x, ctx = randn(2, 5, DIM), randn(2, 4, DIM, seed=1)
    full = block(x, context=ctx).out
    cache = BlockCache()
    steps = [block(x[:, t : t + 1], context=ctx, cache=cache).out for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-10, rtol=0)
    assert cache.length == 5 and cache.cross_attn.length == 4


# ---- from_torch -------------------------------------------------------------------------------
@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_from_torch_encoder_layer(norm_first, activation):
    torch.manual_seed(0)
    ref = nn.TransformerEncoderLayer(
        DIM, HEADS, dim_feedforward=24, dropout=0.0, activation=activation, batch_first=True,
        norm_first=norm_first, dtype=F64,
    )  # fmt: skip
    ref.eval()
    block = block_from_torch(ref).eval()
    assert block.ff.fc1.out_features == 24 and block.norm_first == norm_first
    x = randn(2, 6, DIM)
    lengths = torch.tensor([6, 4])
    pad = torch.arange(6)[None] >= lengths[:, None]  # torch: True = ignore
    with torch.no_grad():
        expected = ref(x, src_key_padding_mask=pad)
        got = block(x, mask=masks.padding(lengths)).out
        # torch's fast path zeroes padded positions; compare the real ones
        for b, n in enumerate(lengths.tolist()):
            torch.testing.assert_close(got[b, :n], expected[b, :n], atol=1e-10, rtol=0)
        causal = nn.Transformer.generate_square_subsequent_mask(6, dtype=F64)
        expected = ref(x, src_mask=causal, is_causal=True)
        got = block_from_torch(ref, causal=True)(x).out
        torch.testing.assert_close(got, expected, atol=1e-10, rtol=0)


@pytest.mark.parametrize("norm_first", [True, False])
def test_from_torch_decoder_layer(norm_first):
    torch.manual_seed(0)
    ref = nn.TransformerDecoderLayer(
        DIM, HEADS, dim_feedforward=24, dropout=0.0, activation="gelu", batch_first=True,
        norm_first=norm_first, dtype=F64,
    ).eval()  # fmt: skip
    block = block_from_torch(ref, causal=True, attention=AttentionConfig(backend="reference"))
    x, mem = randn(2, 5, DIM), randn(2, 7, DIM, seed=1)
    causal = nn.Transformer.generate_square_subsequent_mask(5, dtype=F64)
    with torch.no_grad():
        expected = ref(x, mem, tgt_mask=causal, tgt_is_causal=True)
        got = block(x, context=mem).out
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=0)
    assert block.self_attn.backend == "reference" and block.cross_attn.backend == "reference"


def test_from_torch_keeps_a_module_activation():
    ref = nn.TransformerEncoderLayer(DIM, HEADS, 24, 0.0, nn.GELU(approximate="tanh"))
    block = block_from_torch(ref)
    assert isinstance(block.ff.act, nn.GELU) and block.ff.act.approximate == "tanh"


# ---- TransformerEncoder -----------------------------------------------------------------------
@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("positional", POSITIONALS)
def test_encoder_shapes_and_weights(norm_first, positional):
    torch.manual_seed(0)
    enc = TransformerEncoder(
        DIM, HEADS, 2, norm_first=norm_first, positional=make_positional(positional)
    )
    assert (enc.norm is not None) == norm_first  # final_norm defaults to norm_first
    o = enc(torch.randn(3, 7, DIM), need_weights=True)
    assert o.out.shape == (3, 7, DIM) and torch.isfinite(o.out).all()
    assert len(o.weights) == 2 and all(w.shape == (3, HEADS, 7, 7) for w in o.weights)
    assert enc(torch.randn(3, 7, DIM)).weights is None


def test_encoder_every_parameter_gets_a_gradient():
    torch.manual_seed(0)
    enc = TransformerEncoder(DIM, HEADS, 2, positional=ToyALiBi(HEADS))
    enc(torch.randn(2, 5, DIM), mask=masks.padding([5, 3])).out.sum().backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_encoder_input_positional_is_applied_once():
    torch.manual_seed(0)
    pe = ToySinusoid(DIM)
    enc = TransformerEncoder(DIM, HEADS, 2, positional=pe).double()
    plain = TransformerEncoder(DIM, HEADS, 2).double()
    plain.load_state_dict(enc.state_dict())
    x = randn(2, 5, DIM)
    torch.testing.assert_close(enc(x).out, plain(pe(x)).out, atol=1e-12, rtol=0)


@pytest.mark.parametrize("positional", POSITIONALS)
@pytest.mark.parametrize("mask_kind", ["padding", "tensor"])
def test_encoder_padding_invariance(positional, mask_kind):
    torch.manual_seed(0)
    enc = TransformerEncoder(DIM, HEADS, 2, positional=make_positional(positional)).double()
    lengths = torch.tensor([7, 4, 1])
    keep = torch.arange(7)[None] < lengths[:, None]  # (b, n)
    mask = masks.padding(lengths) if mask_kind == "padding" else keep[:, None, None, :]
    x = randn(3, 7, DIM)
    y = torch.where(keep[..., None], x, randn(3, 7, DIM, seed=1) * 10)  # new padding values
    a, b = enc(x, mask=mask).out, enc(y, mask=mask).out
    torch.testing.assert_close(a[keep], b[keep], atol=1e-10, rtol=0)
    assert not torch.allclose(a[~keep], b[~keep])  # the padded inputs did change


SCORES = ["dot", "scaled_dot", "additive"]
NORMALIZES = ["softmax", "relu", "sigmoid", "none"]
BACKENDS = ["reference", "chunked", "sdpa"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("normalize", NORMALIZES)
@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("causal", [False, True])
def test_encoder_every_core_option(score, normalize, backend, causal):
    if backend == "sdpa" and (score == "additive" or normalize != "softmax"):
        attention = AttentionConfig(score=score, normalize=normalize, backend=backend)
        with pytest.raises(ValueError, match="computes dot-product scores with softmax only"):
            TransformerEncoder(DIM, HEADS, 1, causal=causal, attention=attention)
        return
    torch.manual_seed(0)
    opts = {"score": score, "normalize": normalize}
    enc = TransformerEncoder(
        DIM, HEADS, 2, causal=causal, attention=AttentionConfig(**opts, backend=backend)
    )
    ref = TransformerEncoder(
        DIM, HEADS, 2, causal=causal, attention=AttentionConfig(**opts, backend="reference")
    )
    enc, ref = enc.double(), ref.double()
    ref.load_state_dict(enc.state_dict())
    x, mask = randn(2, 6, DIM), masks.padding([6, 4])
    out = enc(x, mask=mask).out
    assert out.shape == (2, 6, DIM) and torch.isfinite(out).all()
    torch.testing.assert_close(out, ref(x, mask=mask).out, atol=1e-10, rtol=0)
    assert enc.blocks[0].self_attn.score.name == score
    assert enc.blocks[0].self_attn.normalize.name == normalize


class ReferenceKernel(nn.Module):
    """A stand-in 'efficient' kernel: exact attention through the kernel interface."""

    name = "test_kernel"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.scale = nn.Parameter(torch.ones(()))

    def forward(self, q, k, v, *, mask=None, q_offset=0):
        from attnlab.functional import attend

        self.calls += 1
        return attend(self.scale * q, k, v, mask=mask, q_offset=q_offset).out


def test_encoder_with_a_kernel_module():
    torch.manual_seed(0)
    kernel = ReferenceKernel()
    settings = AttentionConfig(kernel=kernel)
    enc = TransformerEncoder(DIM, HEADS, 2, causal=True, attention=settings).double()
    ref = TransformerEncoder(DIM, HEADS, 2, causal=True).double()
    ref.load_state_dict(enc.state_dict(), strict=False)
    x = randn(2, 5, DIM)
    torch.testing.assert_close(enc(x).out, ref(x).out, atol=1e-10, rtol=0)
    k0, k1 = enc.blocks[0].self_attn.kernel, enc.blocks[1].self_attn.kernel
    assert k0 is not k1 and k0 is not kernel  # each layer owns a copy
    assert k0.calls == k1.calls == 1


def test_encoder_rejects_bad_args():
    with pytest.raises(ValueError, match="depth"):
        TransformerEncoder(DIM, HEADS, 0)
    with pytest.raises(TypeError, match="PositionalEncoding"):
        TransformerEncoder(DIM, HEADS, 1, positional=nn.Identity())
    with pytest.raises(ValueError, match="expected shape"):
        TransformerEncoder(DIM, HEADS, 1)(torch.randn(2, 5, DIM + 1))


# ---- TransformerDecoder -----------------------------------------------------------------------
def make_decoder(positional=None, norm_first=True, backend="auto", context_dim=12, seed=0):
    torch.manual_seed(seed)
    dec = TransformerDecoder(
        DIM, HEADS, 2, context_dim=context_dim, norm_first=norm_first,
        positional=make_positional(positional), attention=AttentionConfig(backend=backend),
    )  # fmt: skip
    return dec.double().eval()


@pytest.mark.parametrize("positional", POSITIONALS)
@pytest.mark.parametrize("norm_first", [True, False])
def test_decoder_incremental_equals_full(positional, norm_first):
    dec = make_decoder(positional, norm_first)
    x, ctx = randn(2, 6, DIM), randn(2, 5, 12, seed=1)
    ctx_mask = masks.padding([5, 3])
    full = dec(x, ctx, context_mask=ctx_mask, need_weights=True)
    cache = DecoderCache()
    outs = []
    for t in range(6):
        o = dec(x[:, t : t + 1], ctx, context_mask=ctx_mask, cache=cache, need_weights=True)
        outs.append(o.out)
        # the step's weights are the full weights' row t
        torch.testing.assert_close(
            o.self_weights[1][..., : t + 1], full.self_weights[1][:, :, t : t + 1, : t + 1]
        )
        torch.testing.assert_close(o.cross_weights[0], full.cross_weights[0][:, :, t : t + 1])
    torch.testing.assert_close(torch.cat(outs, 1), full.out, atol=1e-10, rtol=0)
    assert cache.length == 6 and len(cache.layers) == 2
    assert all(layer.cross_attn.length == 5 for layer in cache.layers)


@pytest.mark.parametrize("backend", ["auto", "reference", "sdpa", "chunked"])
@pytest.mark.parametrize("positional", ["toy_input", "toy_qk", "toy_scores"])
def test_decoder_chunked_steps_equal_full(backend, positional):
    dec = make_decoder(positional, backend=backend)
    x, ctx = randn(2, 6, DIM), randn(2, 5, 12, seed=1)
    full = dec(x, ctx).out
    cache = DecoderCache()
    outs = [dec(x[:, s:e], ctx, cache=cache).out for s, e in [(0, 2), (2, 3), (3, 6)]]
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-10, rtol=0)


def test_decoder_reuses_the_cross_cache():
    dec = make_decoder()
    x, ctx = randn(1, 3, DIM), randn(1, 4, 12, seed=1)
    cache = DecoderCache()
    dec(x[:, :1], ctx, cache=cache)
    k0 = cache.layers[0].cross_attn.k
    dec(x[:, 1:2], ctx, cache=cache)
    assert cache.layers[0].cross_attn.k is k0  # filled once, not recomputed or appended
    with pytest.raises(ValueError, match="fresh DecoderCache"):
        make_decoder()(x, ctx, cache=DecoderCache(layers=[BlockCache()]))


@pytest.mark.parametrize("positional", POSITIONALS)
def test_decoder_does_not_look_ahead(positional):
    dec = make_decoder(positional)
    x, ctx = randn(2, 7, DIM), randn(2, 5, 12, seed=1)
    t = 4
    y = x.clone()
    y[:, t:] = randn(2, 7 - t, DIM, seed=2)
    a, b = dec(x, ctx).out, dec(y, ctx).out
    torch.testing.assert_close(a[:, :t], b[:, :t], atol=1e-12, rtol=0)
    assert not torch.allclose(a[:, t], b[:, t])


def test_decoder_target_padding_and_context_padding():
    dec = make_decoder()
    x, ctx = randn(2, 5, DIM), randn(2, 6, 12, seed=1)
    tgt, src = torch.tensor([5, 3]), torch.tensor([6, 2])
    ctx2 = ctx.clone()
    ctx2[1, 2:] = 100.0  # only padded context changes
    a = dec(x, ctx, mask=masks.padding(tgt), context_mask=masks.padding(src), need_weights=True)
    b = dec(x, ctx2, mask=masks.padding(tgt), context_mask=masks.padding(src))
    torch.testing.assert_close(a.out, b.out, atol=1e-10, rtol=0)
    assert (a.cross_weights[0][1, :, :, 2:] == 0).all()


def test_decoder_incremental_with_target_padding():
    dec = make_decoder("toy_qk")
    x, ctx = randn(2, 5, DIM), randn(2, 4, 12, seed=1)
    lengths = torch.tensor([5, 2])
    full = dec(x, ctx, mask=masks.padding(lengths)).out
    cache, outs = DecoderCache(), []
    for t in range(5):  # the padding mask must fit the keys seen so far
        step_mask = masks.padding(lengths.clamp(max=t + 1))
        outs.append(dec(x[:, t : t + 1], ctx, mask=step_mask, cache=cache).out)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-10, rtol=0)


def test_decoder_every_parameter_gets_a_gradient():
    torch.manual_seed(0)
    dec = TransformerDecoder(DIM, HEADS, 2, context_dim=12, positional=ToyALiBi(HEADS))
    x, ctx = torch.randn(2, 5, DIM), torch.randn(2, 4, 12, requires_grad=True)
    dec(x, ctx).out.square().sum().backward()
    for name, p in dec.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert ctx.grad is not None
