"""masks.grid_local: 2-D neighbourhoods on a row-major grid, with global prefix tokens."""

from __future__ import annotations

import pytest
import torch

from attnlab import MultiHeadAttention, masks


def brute(h: int, w: int, r: int, prefix: int, metric: str) -> torch.Tensor:
    n = prefix + h * w
    out = torch.ones(n, n, dtype=torch.bool)
    for i in range(prefix, n):
        for j in range(prefix, n):
            (ri, ci), (rj, cj) = divmod(i - prefix, w), divmod(j - prefix, w)
            dr, dc = abs(ri - rj), abs(ci - cj)
            out[i, j] = (dr + dc <= r) if metric == "manhattan" else max(dr, dc) <= r
    return out


@pytest.mark.parametrize("metric", ["chebyshev", "manhattan"])
@pytest.mark.parametrize("h, w, r, prefix", [(3, 4, 1, 0), (4, 3, 2, 1), (2, 5, 0, 2)])
def test_equals_the_definition(h: int, w: int, r: int, prefix: int, metric: str) -> None:
    m = masks.grid_local(h, w, r, prefix=prefix, metric=metric)
    n = prefix + h * w
    assert torch.equal(m.dense(1, 1, n, n)[0, 0], brute(h, w, r, prefix, metric))


def test_degenerate_cases() -> None:
    n = 12
    assert masks.grid_local(3, 4, 3).dense(1, 1, n, n).all()  # radius >= max(h, w) - 1: full
    assert torch.equal(masks.grid_local(3, 4, 0).dense(1, 1, n, n)[0, 0], torch.eye(n).bool())


def test_window_at_least_the_grid_is_full_attention() -> None:
    torch.manual_seed(0)
    layer = MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 1 + 9, 8, dtype=torch.float64)
    full = layer(x).out
    local = layer(x, mask=masks.grid_local(3, 3, 2, prefix=1)).out
    torch.testing.assert_close(local, full, atol=1e-12, rtol=0)
    # a 3x3 window on a 3x3 grid is not full for the corners: the outputs differ there
    near = layer(x, mask=masks.grid_local(3, 3, 1, prefix=1)).out
    assert not torch.allclose(near[:, 1], full[:, 1])


def test_errors() -> None:
    with pytest.raises(ValueError, match="radius must be an int >= 0"):
        masks.grid_local(3, 3, -1)
    with pytest.raises(ValueError, match="metric must be"):
        masks.grid_local(3, 3, 1, metric="euclid")
    with pytest.raises(ValueError, match=r"built for 0 \+ 3 x 3 = 9 tokens, got 10"):
        masks.grid_local(3, 3, 1).dense(1, 1, 10, 10)
