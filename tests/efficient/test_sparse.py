"""The gathered-keys kernel behind local, Longformer and BigBird attention: reduced precision."""

from __future__ import annotations

import pytest
import torch

from attnlab import masks
from attnlab.backends.sdpa import CPU_LOWP_FLOAT32_MAX_WORK
from attnlab.efficient._sparse import band_index, gathered_attention


def _inputs(i: int, d: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 2, i, d, generator=g).to(dtype) for _ in range(3))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_small_bf16_tiles_run_in_float32(causal):
    # CPU's bf16 flash kernel is slow on small tiles, so they run in float32: exactly the
    # float32 result on the bf16 inputs, rounded once.
    i, block, w = 40, 16, 8
    q, k, v = _inputs(i, 16, torch.bfloat16)
    index = band_index(-(-i // block), block, before=w, after=w, q_offset=0, kv_len=i)
    mask = masks.causal() if causal else None
    got = gathered_attention(q, k, v, index, block=block, mask=mask)
    want = gathered_attention(q.float(), k.float(), v.float(), index, block=block, mask=mask)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, want.bfloat16())
    # Under autocast, float32 inputs stay float32 on those tiles (autocast would cast down).
    with torch.autocast("cpu", dtype=torch.bfloat16):
        auto = gathered_attention(q.float(), k.float(), v.float(), index, block=block, mask=mask)
    assert torch.equal(auto, want)


def test_large_tiles_keep_the_bf16_kernel():
    # Past the bound (gathered keys x head dim > CPU_LOWP_FLOAT32_MAX_WORK) bf16 is as fast and
    # half the memory: autocast's bf16 kernel runs.
    d, block = 64, 160
    assert block * d > CPU_LOWP_FLOAT32_MAX_WORK
    q, k, v = _inputs(block, d, torch.float32)
    index = band_index(1, block, before=0, after=0, q_offset=0, kv_len=block)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = gathered_attention(q, k, v, index, block=block, mask=None)
    assert out.dtype == torch.bfloat16
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out.float(), want, atol=3e-2, rtol=3e-2)
