"""attnlab.PairBias: a score bias at a few pairs equals its dense form on every path (the block
kernel's, with and without dropout; the reference backend's weights; the functional API), in
value and gradient, and bad input is a clear error."""

import math

import pytest
import torch

import attnlab
from attnlab import MultiHeadAttention, PairBias
from attnlab.backends import dropout_blocks

B, H, N, D = 2, 3, 70, 8


def pairs(n: int = N, count: int = 300, heads: int = H, seed: int = 0) -> PairBias:
    g = torch.Generator().manual_seed(seed)
    index = torch.unique(torch.randint(0, n * n, (count,), generator=g))
    values = torch.randn(heads, index.numel(), generator=g, dtype=torch.float64)
    return PairBias(index, values.requires_grad_(), n, n)


def qkv(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, N, D, generator=g, dtype=torch.float64).requires_grad_()
            for _ in range(3)]  # fmt: skip


def test_dense_puts_the_values_at_their_pairs_and_zeros_elsewhere():
    bias = PairBias(torch.tensor([1, 5, 8]), torch.tensor([[1.0, 2.0, 3.0]]), 3, 3)
    want = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 3.0]])
    assert torch.equal(bias.dense(), want.view(1, 1, 3, 3))
    assert bias.dense(torch.bfloat16).dtype == torch.bfloat16
    assert torch.equal(bias + torch.ones(3, 3), (want + 1).view(1, 1, 3, 3))
    assert torch.equal(torch.ones(3, 3) + bias, (want + 1).view(1, 1, 3, 3))


def reference(q, k, v, bias, p=0.0):
    """The dense bias through the materialised reference (float64)."""
    return attnlab.attend(q, k, v, bias=bias.dense(), dropout=p).out


@pytest.mark.parametrize("p", [0.0, 0.3])
@pytest.mark.parametrize("heads", [H, 1])
def test_the_block_kernel_adds_pairs_as_the_dense_bias(monkeypatch, p, heads):
    """Across several blocks of queries, with and without dropout (the same mask), the output
    and the gradients of q, k, v and the values equal the dense bias's exactly (float64), and
    without dropout the materialised reference's."""
    monkeypatch.setattr(dropout_blocks, "BLOCK_ELEMENTS", 1)  # 32 queries a block: 3 blocks
    bias = pairs(heads=heads)
    q, k, v = qkv()
    torch.manual_seed(5)
    got = dropout_blocks.attention_with_dropout(q, k, v, bias, p, 1 / math.sqrt(D))
    upstream = torch.randn_like(got)
    grads = torch.autograd.grad(got, (q, k, v, bias.values), upstream)
    torch.manual_seed(5)
    want = dropout_blocks.attention_with_dropout(q, k, v, bias.dense(), p, 1 / math.sqrt(D))
    ref = torch.autograd.grad(want, (q, k, v, bias.values), upstream)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-15)
    for mine, theirs in zip(grads, ref):
        torch.testing.assert_close(mine, theirs, rtol=1e-13, atol=1e-13)
    if p == 0:  # the kernel's no-mask path against the materialised maths
        out = reference(q, k, v, bias)
        torch.testing.assert_close(got, out, rtol=1e-12, atol=1e-12)
        ref = torch.autograd.grad(out, (q, k, v, bias.values), upstream)
        for mine, theirs in zip(grads, ref):
            torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)


def never_dense(monkeypatch):
    """Route PairBias problems of any size to the blocks, and fail if one is made dense."""
    from attnlab.backends import sdpa

    monkeypatch.setattr(sdpa, "DROPOUT_BLOCKS_FROM", 0)

    def refuse(self, dtype=None):
        raise AssertionError("the pair bias was made dense")

    monkeypatch.setattr(PairBias, "dense", refuse)


@pytest.mark.parametrize("heads", [H, 1])
def test_a_layer_adds_a_pair_bias_at_its_pairs_as_its_dense_bias(monkeypatch, heads):
    """MultiHeadAttention on 2 sequences, evaluation (the block kernel without a mask to draw):
    the same outputs and value gradients as the dense bias, without making it dense."""
    torch.manual_seed(0)
    layer = MultiHeadAttention(H * D, H).double().eval()
    x = torch.randn(B, N, H * D, dtype=torch.float64)
    bias = pairs(count=500, heads=heads)
    dense = bias.dense().detach().requires_grad_()
    want = layer(x, bias=dense)
    (g_dense,) = torch.autograd.grad(want.out.sum(), dense)
    never_dense(monkeypatch)
    got = layer(x, bias=bias)
    assert got.backend == "sdpa"
    torch.testing.assert_close(got.out, want.out, rtol=1e-12, atol=1e-12)
    (g1,) = torch.autograd.grad(got.out.sum(), bias.values)
    # the dense bias's gradient read at the pairs (summed over heads for shared values)
    g2 = g_dense.reshape(-1, N * N)[:, bias.index].sum(0, keepdim=True)
    g2 = g2 if heads == 1 else g_dense.reshape(-1, N * N)[:, bias.index]
    torch.testing.assert_close(g1, g2, rtol=1e-12, atol=1e-12)


def test_a_pair_bias_under_bf16_autocast_matches_the_dense_bias(monkeypatch):
    """The block kernel adds float32 values to float32 scores, where a dense bias would be bf16:
    the two agree to bf16's precision."""
    torch.manual_seed(0)
    layer = MultiHeadAttention(H * D, H).eval()
    x = torch.randn(1, N, H * D)
    made = pairs()
    bias = PairBias(made.index, made.values.detach().float(), N, N)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = layer(x, bias=bias.dense(torch.bfloat16)).out.float()
        never_dense(monkeypatch)
        got = layer(x, bias=bias).out.float()
    torch.testing.assert_close(got, want, rtol=0.02, atol=0.02)


def test_the_weights_and_attend_take_a_pair_bias_as_its_dense_form():
    torch.manual_seed(0)
    layer = MultiHeadAttention(H * D, H).double().eval()
    x = torch.randn(1, N, H * D, dtype=torch.float64)
    bias = pairs(count=500)
    want = layer(x, bias=bias.dense()).out
    weights = layer(x, bias=bias, need_weights=True)
    assert weights.backend == "reference"
    torch.testing.assert_close(weights.out, want, rtol=1e-12, atol=1e-12)
    q, k, v = qkv()
    torch.testing.assert_close(attnlab.attend(q, k, v, bias=bias).out, reference(q, k, v, bias))


def test_a_pair_bias_with_a_mask_is_made_dense(monkeypatch):
    from attnlab.backends import sdpa

    monkeypatch.setattr(sdpa, "DROPOUT_BLOCKS_FROM", 0)  # else small problems are dense anyway
    torch.manual_seed(0)
    layer = MultiHeadAttention(H * D, H).double().eval()
    x = torch.randn(1, N, H * D, dtype=torch.float64)
    bias, mask = pairs(), attnlab.masks.local(5)
    got = layer(x, bias=bias, mask=mask).out
    torch.testing.assert_close(got, layer(x, bias=bias.dense(), mask=mask).out)


def test_a_copy_does_not_share_the_block_cache():
    from dataclasses import replace

    bias = PairBias(torch.tensor([1, 5]), torch.ones(1, 2), 3, 3)
    assert bias.rows(0, 2)[1].tolist() == [1, 5]
    other = replace(bias, index=torch.tensor([0, 4]))
    assert other.rows(0, 2)[1].tolist() == [0, 4]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"index": torch.tensor([3, 1])}, "strictly increasing.*got 3 then 1 at 0, 1"),
        ({"index": torch.tensor([1, 1])}, "strictly increasing"),
        ({"index": torch.tensor([1, 9])}, r"lie in \[0, 9\)"),
        ({"index": torch.tensor([1.0, 2.0])}, "1-D int64"),
        ({"index": [1, 2]}, "1-D int64 tensor of flat pairs, got list"),
        ({"queries": 3.0}, "positive ints"),
        ({"keys": 0}, "positive ints"),
        ({"values": torch.ones(1, 3)}, "expected 2 columns"),
        ({"values": torch.ones(2)}, r"float tensor \(heads or 1, P\)"),
        ({"values": torch.ones(1, 2, dtype=torch.int64)}, "float tensor"),
    ],
)
def test_bad_pair_biases_are_clear_errors(kwargs, match):
    args = {"index": torch.tensor([1, 2]), "values": torch.ones(1, 2), "queries": 3, "keys": 3}
    with pytest.raises(ValueError, match=match):
        PairBias(**{**args, **kwargs})


def test_a_pair_bias_of_the_wrong_size_is_refused_by_the_layer():
    layer = MultiHeadAttention(H * D, H)
    x = torch.randn(1, 10, H * D)
    bias = PairBias(torch.tensor([0, 5]), torch.ones(1, 2), 9, 9)
    with pytest.raises(ValueError, match=r"PairBias of \(9, 9\) scores for \(i, j\) = \(10, 10\)"):
        layer(x, bias=bias)
    bias = PairBias(torch.tensor([0, 5]), torch.ones(2, 2), 10, 10)
    with pytest.raises(ValueError, match="PairBias of 2 heads for 3 heads"):
        layer(x, bias=bias)
    q = torch.randn(1, H, 10, D)
    with pytest.raises(ValueError, match="PairBias of 2 heads for 3 heads"):
        dropout_blocks.attention_with_dropout(q, q, q, bias, 0.0, 1.0)
    with pytest.raises(TypeError):
        bias + 1.0  # not a tensor: NotImplemented, so Python's own error
