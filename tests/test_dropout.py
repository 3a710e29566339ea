"""attnlab.dropout: the law of F.dropout (keep rate, unbiased scale, gradient through the kept
elements only), reproducible from torch's seed, and F.dropout itself where it is not the fast
path."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.dropout import Dropout, dropout, dropout_mask, fast_path


@pytest.mark.parametrize("p", [0.1, 0.5, 0.6])
def test_keep_rate_and_scale_are_dropouts(p):
    torch.manual_seed(0)
    x = torch.ones(400_000, dtype=torch.float64)
    y = dropout(x, p)
    kept = y != 0
    p16 = round(p * 2**16) / 2**16
    # binomial: 5 standard deviations of the kept fraction
    assert abs(kept.double().mean().item() - (1 - p16)) < 5 * math.sqrt(p * (1 - p) / x.numel())
    assert torch.equal(y[kept], torch.full_like(y[kept], 1 / (1 - p16)))
    assert y.mean().item() == pytest.approx(1.0, abs=0.01)  # unbiased


def test_every_16_bit_piece_is_uniform():
    """The four 16-bit pieces of each 64-bit draw (the top one included) each drop at rate p."""
    torch.manual_seed(1)
    keep, _ = dropout_mask((200_000, 4), 0.5)
    rates = 1 - keep.double().mean(0)  # per piece
    assert torch.all((rates - 0.5).abs() < 5 * math.sqrt(0.25 / 200_000)), rates


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_a_mask_in_a_number_type_is_the_boolean_mask_of_the_same_draws(dtype):
    torch.manual_seed(7)
    want, scale = dropout_mask((6, 5, 33), 0.4)
    torch.manual_seed(7)
    got, got_scale = dropout_mask((6, 5, 33), 0.4, dtype=dtype)
    assert got.dtype == dtype and got_scale == scale
    assert torch.equal(got, want.to(dtype))
    # written into a strided view of a larger tensor, the rest untouched
    store = torch.full((6, 9, 33), 7.0, dtype=dtype)
    torch.manual_seed(7)
    view = dropout_mask((6, 5, 33), 0.4, out=store[:, 2:7])[0]
    assert view.data_ptr() == store[:, 2:7].data_ptr()
    assert torch.equal(store[:, 2:7], want.to(dtype))
    assert (store[:, :2] == 7).all() and (store[:, 7:] == 7).all()
    with pytest.raises(ValueError, match=r"out: expected shape \(6, 5, 33\), got \(6, 9, 33\)"):
        dropout_mask((6, 5, 33), 0.4, out=store)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eager_dropout_keeps_its_mask_in_the_inputs_dtype(dtype):
    """What autograd saves for the backward pass is the 0 / 1 mask in x's dtype (a product
    of one dtype each way, not the boolean mask of F.dropout's mixed product)."""
    saved = []

    def pack(t):
        saved.append(t)
        return t

    x = torch.randn(40, 33, dtype=dtype, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = dropout(x, 0.3)
    assert [(t.dtype, t.shape) for t in saved] == [(dtype, x.shape)]
    assert set(saved[0].unique().tolist()) == {0.0, 1.0}
    assert torch.equal(saved[0] != 0, y != 0)


def test_mask_dtype_and_out_must_agree():
    with pytest.raises(ValueError, match="dtype: torch.float32 disagrees with out's dtype"):
        dropout_mask((2, 3), 0.5, dtype=torch.float32, out=torch.empty(2, 3, dtype=torch.bfloat16))


def test_bfloat16_output_is_the_exact_product_rounded():
    """x * keep * scale in bfloat16 is the float64 product rounded to bfloat16: the scale is
    not rounded to bfloat16 first, which would bias every kept value the same way (F.dropout's
    own op computes it so too: this guards the change, it does not tell the two apart)."""
    torch.manual_seed(8)
    x = torch.randn(4096, dtype=torch.bfloat16)
    torch.manual_seed(9)
    y = dropout(x, 0.1)
    torch.manual_seed(9)
    keep, scale = dropout_mask(x.shape, 0.1)
    assert torch.equal(y, (x.double() * keep * scale).to(torch.bfloat16))


def test_gradient_flows_through_the_kept_elements_only():
    torch.manual_seed(2)
    x = torch.randn(64, 33, dtype=torch.float64, requires_grad=True)
    y = dropout(x, 0.3)
    g = torch.randn_like(y)
    y.backward(g)
    kept = y.detach() != 0
    scale = 1 / (1 - round(0.3 * 2**16) / 2**16)
    torch.testing.assert_close(x.grad, g * kept * scale, rtol=0, atol=0)
    torch.testing.assert_close(y.detach(), x.detach() * kept * scale, rtol=0, atol=0)


def test_the_same_seed_gives_the_same_mask_and_a_generator_is_honoured():
    x = torch.randn(5, 7, 11)
    torch.manual_seed(3)
    a = dropout(x, 0.5)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.5), a)
    g1, g2 = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    assert torch.equal(dropout(x, 0.5, generator=g1), dropout(x, 0.5, generator=g2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_keeps_the_dtype_and_shape(dtype):
    x = torch.randn(3, 0, 4, dtype=dtype)
    assert dropout(x, 0.5).shape == x.shape
    x = torch.randn(3, 5, 4, dtype=dtype, requires_grad=True)
    y = dropout(x, 0.5)
    assert y.dtype == dtype and y.shape == x.shape
    y.sum().backward()
    assert x.grad.dtype == dtype


def test_degenerate_probabilities_are_exact():
    x = torch.randn(10, 10)
    assert dropout(x, 0.0) is x
    assert dropout(x, 0.7, training=False) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    assert torch.equal(dropout(x, 1e-9), x)  # rounds to 0 in 2^-16 steps: nothing dropped


def test_bad_probability_is_a_clear_error():
    with pytest.raises(ValueError, match=r"p: a dropout probability in \[0, 1\], got 1.5"):
        dropout(torch.ones(3), 1.5)
    with pytest.raises(ValueError, match=r"p: a drop probability in \[0, 1\), got -0.1"):
        dropout_mask((3,), -0.1)
    with pytest.raises(ValueError, match="inplace"):
        Dropout(0.1, inplace=True)


def test_module_is_a_drop_in_for_nn_dropout():
    layer = Dropout(0.25)
    assert isinstance(layer, torch.nn.Dropout) and layer.p == 0.25
    assert layer.state_dict() == {}
    x = torch.randn(6, 8)
    assert torch.equal(layer.eval()(x), x)
    torch.manual_seed(5)
    y = layer.train()(x)
    assert ((y == 0) | torch.isclose(y, x / (1 - 0.25))).all()


def test_elsewhere_it_is_f_dropout(monkeypatch):
    """Off the fast path (CUDA, torch.compile) the call is F.dropout's, draw for draw."""
    monkeypatch.setattr("attnlab.dropout.fast_path", lambda x: False)
    x = torch.randn(20, 20)
    torch.manual_seed(6)
    want = F.dropout(x, 0.4, training=True)
    torch.manual_seed(6)
    assert torch.equal(dropout(x, 0.4), want)


def test_fast_path_is_the_cpu():
    assert fast_path(torch.ones(1))
    assert not fast_path(torch.ones(1, device="meta"))


@pytest.mark.compile
def test_compiled_dropout_sites_draw_their_own_masks_and_backward_uses_them():
    """Under torch.compile (dynamic sizes) two dropouts of the same tensor are independent
    (the compiler must not merge them), the gradient is that of the masks the forward drew,
    and the seed reproduces them."""
    lin = torch.nn.Linear(16, 16)
    scale = 1 / (1 - round(0.4 * 2**16) / 2**16)

    def f(x):
        h = torch.tanh(lin(x))
        return dropout(h, 0.4) + 3 * dropout(h, 0.4), h

    compiled = torch.compile(f, dynamic=True)
    for shape in [(8, 40, 16), (4, 13, 16)]:
        x = torch.randn(*shape)
        torch.manual_seed(11)
        out, h = compiled(x)
        r = torch.randn_like(out)
        got = torch.autograd.grad((out * r).sum(), lin.weight)[0]
        ratio = (out / (h * scale)).detach().round()  # k1 + 3 k2, each mask 0 or 1
        k1, k2 = (ratio == 1) | (ratio == 4), (ratio == 3) | (ratio == 4)
        assert torch.equal(ratio, k1.to(ratio.dtype) + 3 * k2.to(ratio.dtype))
        want = torch.autograd.grad(torch.tanh(lin(x)), lin.weight, r * scale * (k1 + 3.0 * k2))[0]
        torch.testing.assert_close(got, want)
        both = (k1 & k2).double().mean().item()
        assert abs(both - 0.36) < 0.06, both  # independent: 0.6 * 0.6, not 0.6
        torch.manual_seed(11)
        assert torch.equal(compiled(x)[0], out)
