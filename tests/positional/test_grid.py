"""The 2-D positional encodings of image grids (GRID_POSITIONAL)."""

from __future__ import annotations

import pytest
import torch

from attnlab import MultiHeadAttention
from attnlab.positional import GRID_POSITIONAL, GridLearned, GridRelativeBias, GridSinusoidal
from attnlab.positional.sinusoidal import sinusoidal_table

H, W, P = 3, 4, 1  # grid and CLS tokens


def make(name: str):
    torch.manual_seed(0)
    cls = GRID_POSITIONAL.get(name)
    if cls is GridRelativeBias:
        return cls(4, height=H, width=W, prefix=P)
    return cls(16, height=H, width=W, prefix=P)


def test_registry() -> None:
    assert GRID_POSITIONAL.names() == ["learned2d", "relative2d", "sinusoidal2d"]


def test_sinusoidal_is_row_then_column() -> None:
    pe = GridSinusoidal(8, height=H, width=W, prefix=P)
    out = pe(torch.zeros(2, P + H * W, 8, dtype=torch.float64))
    assert out[:, :P].abs().max() == 0  # CLS: no position
    cell = out[0, P + 2 * W + 3]  # row 2, column 3
    torch.testing.assert_close(cell[:4], sinusoidal_table(H, 4)[2])
    torch.testing.assert_close(cell[4:], sinusoidal_table(W, 4)[3])


def test_learned_is_row_plus_column_and_trains() -> None:
    pe = GridLearned(8, height=H, width=W, prefix=P)
    out = pe(torch.zeros(1, P + H * W, 8))
    torch.testing.assert_close(out[0, P + 1 * W + 2], pe.rows[1] + pe.cols[2])
    torch.testing.assert_close(out[0, 0], pe.extra[0])
    out.square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in pe.parameters())


def test_relative_bias_depends_on_the_offset_only() -> None:
    pe = GridRelativeBias(2, height=H, width=W, prefix=P)
    with torch.no_grad():
        pe.table.normal_()
        pe.to_prefix.fill_(1.5)
        pe.from_prefix.fill_(-2.0)
    b = pe.score_bias(P + H * W, P + H * W)[0]  # (h, n, n)
    at = lambda r, c: P + r * W + c  # noqa: E731
    # (0, 0) -> (1, 2) and (1, 1) -> (2, 3): the same offset (+1, +2)
    torch.testing.assert_close(b[:, at(0, 0), at(1, 2)], b[:, at(1, 1), at(2, 3)])
    torch.testing.assert_close(b[:, at(0, 0), at(1, 2)], pe.table[:, H - 1 + 1, W - 1 + 2])
    assert (b[:, P:, 0] == 1.5).all() and (b[:, 0, :] == -2.0).all()


def test_relative_bias_in_a_layer_gets_gradients() -> None:
    pe = GridRelativeBias(2, height=H, width=W, prefix=P)
    layer = MultiHeadAttention(8, 2)
    layer(torch.randn(2, P + H * W, 8), positional=pe).out.sum().backward()
    assert all(p.grad is not None for p in pe.parameters())


@pytest.mark.parametrize("name", ["sinusoidal2d", "learned2d", "relative2d"])
def test_wrong_number_of_tokens_is_refused(name: str) -> None:
    pe = make(name)
    with pytest.raises(ValueError, match=r"built for 1 \+ 3 x 4 = 13 tokens, got 12"):
        if pe.acts_on == "input":
            pe(torch.zeros(1, 12, 16))
        else:
            pe.score_bias(12, 12)


def test_bad_grid_is_refused() -> None:
    with pytest.raises(ValueError, match="height must be an int >= 1"):
        GridSinusoidal(8, height=0, width=3)
    with pytest.raises(ValueError, match="dim must be a positive even int"):
        GridSinusoidal(7, height=2, width=3)
