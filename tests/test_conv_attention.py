"""conv_as_attention: the multi-head attention layer built from a Conv2d equals the convolution
(Cordonnier et al. 2020), exactly up to float rounding."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlab import conv_as_attention
from attnlab.attention import MultiHeadAttention


@pytest.mark.parametrize("k", [1, 3, 5])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_equals_the_convolution_float32(k: int, bias: bool, padding: str) -> None:
    torch.manual_seed(k)
    conv = nn.Conv2d(3, 5, k, padding=padding, bias=bias)
    layer = conv_as_attention(conv)
    x = torch.randn(2, 3, 9, 7)
    want = conv(x)
    got = layer(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_equals_the_convolution_float64(k: int) -> None:
    torch.manual_seed(10 + k)
    conv = nn.Conv2d(4, 2, (k, 3), padding=(k // 2, 2)).double()  # uneven padding, wider out
    x = torch.randn(3, 4, 6, 8, dtype=torch.float64)
    torch.testing.assert_close(conv_as_attention(conv)(x), conv(x), atol=1e-12, rtol=0)


def test_many_channels_few_heads() -> None:
    """c > h * o: the head width grows to carry every input channel."""
    conv = nn.Conv2d(12, 1, 1).double()
    x = torch.randn(2, 12, 5, 5, dtype=torch.float64)
    torch.testing.assert_close(conv_as_attention(conv)(x), conv(x), atol=1e-12, rtol=0)


def test_one_head_per_offset_selects_exactly_that_offset() -> None:
    conv = nn.Conv2d(1, 1, 3, padding=1)
    layer = conv_as_attention(conv)
    assert isinstance(layer.attention, MultiHeadAttention)
    assert layer.attention.heads == 9
    mask = layer.selection_mask(4, 4)  # (1, 9, 16, 16)
    assert mask.shape == (1, 9, 16, 16)
    # every query selects at most one key per head; interior queries exactly one
    assert int(mask.sum(-1).max()) == 1
    centre = 1 * 4 + 1  # pixel (1, 1) has all 9 neighbours inside the image
    assert mask[0, :, centre].sum(-1).tolist() == [1] * 9
    # head 4 is the offset (0, 0): every pixel selects itself
    assert torch.equal(mask[0, 4], torch.eye(16, dtype=torch.bool))


@pytest.mark.parametrize(
    "kwargs, name",
    [({"stride": 2}, "stride"), ({"dilation": 2}, "dilation"), ({"groups": 2}, "groups"),
     ({"padding_mode": "reflect", "padding": 1}, "padding_mode")],
)  # fmt: skip
def test_refuses_what_the_construction_does_not_cover(kwargs: dict, name: str) -> None:
    conv = nn.Conv2d(2, 2, 3, **kwargs)
    with pytest.raises(ValueError, match=f"conv.{name}="):
        conv_as_attention(conv)


def test_refuses_a_wrong_input() -> None:
    layer = conv_as_attention(nn.Conv2d(3, 2, 3))
    with pytest.raises(ValueError, match=r"expected \(batch, 3, rows, cols\)"):
        layer(torch.randn(1, 2, 5, 5))
    with pytest.raises(TypeError, match="nn.Conv2d"):
        conv_as_attention(nn.Conv1d(1, 1, 3))
