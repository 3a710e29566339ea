"""Recurrent decoding of linear attention at the layer and decoder level: a ``RecurrentCache``
passed per call, equal to the parallel causal form, of constant size."""

from __future__ import annotations

import pytest
import torch

from attnlab import KVCache, MultiHeadAttention, RecurrentCache, masks
from attnlab.attention_config import AttentionConfig
from attnlab.blocks import DecoderCache, TransformerDecoder
from attnlab.positional import ALiBi, Rotary, Sinusoidal

F64 = torch.float64
DIM, HEADS = 16, 2


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


def linear_layer(seed=0) -> MultiHeadAttention:
    torch.manual_seed(seed)
    return MultiHeadAttention(DIM, HEADS, kernel="linear", block=4).double().eval()


@pytest.mark.parametrize("steps", [[1] * 7, [3, 1, 3], [7]])
@pytest.mark.parametrize("positional", [None, "rotary"])
def test_layer_recurrent_steps_equal_parallel_causal(steps, positional):
    layer = linear_layer()
    pe = Rotary(DIM // HEADS) if positional else None
    x = randn(2, 7, DIM)
    full = layer(x, mask=masks.causal(), positional=pe).out
    cache, outs, start = RecurrentCache(), [], 0
    for n in steps:
        o = layer(x[:, start : start + n], mask=masks.causal(), positional=pe, cache=cache)
        assert o.backend == "linear-recurrent"
        outs.append(o.out)
        start += n
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-12, rtol=0)
    assert cache.length == 7


def test_layer_state_has_constant_size():
    layer = linear_layer()
    cache, sizes = RecurrentCache(), []
    for t in range(6):
        layer(randn(1, 1, DIM, seed=t), mask=masks.causal(), cache=cache)
        sizes.append(sum(s.numel() for s in cache.state))
    d = DIM // HEADS
    assert sizes == [HEADS * (d * d + d)] * 6  # S (h, d, e) and z (h, d), whatever the length


def test_layer_new_cache_kind():
    assert isinstance(linear_layer().new_cache(), RecurrentCache)
    assert isinstance(MultiHeadAttention(DIM, HEADS).new_cache(), KVCache)
    assert isinstance(MultiHeadAttention(DIM, HEADS, kernel="performer").new_cache(), KVCache)


def test_layer_recurrent_padding_equals_parallel():
    layer = linear_layer()
    x, lengths = randn(2, 5, DIM), torch.tensor([5, 3])
    full = layer(x, mask=masks.causal() & masks.padding(lengths)).out
    cache, outs = RecurrentCache(), []
    for t in range(5):  # the padding mask fits the keys so far
        mask = masks.causal() & masks.padding(lengths.clamp(max=t + 1))
        outs.append(layer(x[:, t : t + 1], mask=mask, cache=cache).out)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-12, rtol=0)


def test_layer_recurrent_refusals():
    layer, x = linear_layer(), randn(1, 2, DIM)
    with pytest.raises(ValueError, match="causal"):
        layer(x, cache=RecurrentCache())  # no causal mask: a state cannot see later keys
    with pytest.raises(ValueError, match="score bias"):
        layer(x, mask=masks.causal(), positional=ALiBi(HEADS), cache=RecurrentCache())
    with pytest.raises(ValueError, match="attention weights"):
        layer(x, mask=masks.causal(), need_weights=True, cache=RecurrentCache())
    with pytest.raises(ValueError, match="kernel='linear'"):
        MultiHeadAttention(DIM, HEADS).double()(x, mask=masks.causal(), cache=RecurrentCache())
    cross = MultiHeadAttention(DIM, HEADS, kernel="linear").double()
    with pytest.raises(ValueError, match="cross-attention"):
        cross(x, randn(1, 3, DIM), cache=RecurrentCache())


def test_recurrent_cache_reorder_follows_the_batch():
    layer = linear_layer()
    x = randn(3, 4, DIM)
    cache = RecurrentCache()
    layer(x[:, :3], mask=masks.causal(), cache=cache)
    cache.reorder(torch.tensor([2, 0]))  # keep rows 2 and 0, as beam search does
    last = layer(x[[2, 0], 3:], mask=masks.causal(), cache=cache).out
    full = layer(x[[2, 0]], mask=masks.causal()).out
    torch.testing.assert_close(last, full[:, 3:], atol=1e-12, rtol=0)


@pytest.mark.parametrize("positional", [None, "sinusoidal", "rotary"])
def test_decoder_recurrent_equals_parallel(positional):
    torch.manual_seed(0)
    pe = {None: None, "sinusoidal": Sinusoidal(DIM), "rotary": Rotary(DIM // HEADS)}[positional]
    dec = TransformerDecoder(
        DIM, HEADS, 2, context_dim=12, positional=pe,
        attention=AttentionConfig(kernel="linear", kernel_options={"block": 4}),
    ).double().eval()  # fmt: skip
    x, ctx = randn(2, 6, DIM), randn(2, 5, 12, seed=1)
    ctx_mask = masks.padding([5, 3])
    full = dec(x, ctx, context_mask=ctx_mask).out
    cache = DecoderCache()
    outs = [dec(x[:, t : t + 1], ctx, context_mask=ctx_mask, cache=cache).out for t in range(6)]
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-10, rtol=0)
    assert cache.length == 6
    assert all(isinstance(layer.self_attn, RecurrentCache) for layer in cache.layers)
    assert all(layer.cross_attn.length == 5 for layer in cache.layers)  # context projected once
