"""``masks.padding`` under ``torch.compile``: built inside a compiled forward without graph
breaks (no reads of the lengths' values while tracing), with eager checks and errors unchanged."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

from attnlab import masks
from attnlab.attention import MultiHeadAttention

LENGTHS = [8, 5, 0]


def _compile_fullgraph(fn):
    """``fn`` compiled whole (any graph break raises); the eager backend: Dynamo is what's tested."""
    torch._dynamo.reset()
    counters.clear()
    return torch.compile(fn, backend="eager", fullgraph=True)


@pytest.mark.compile
def test_padding_rendered_densely_compiles_without_graph_breaks():
    def render(lengths: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        dense = masks.padding(lengths).dense(lengths.shape[0], 1, x.shape[1], x.shape[1])
        return x.masked_fill(~dense[:, 0], 0.0)  # (b, i, j)

    x = torch.randn(3, 8, 8, generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor(LENGTHS)
    out = _compile_fullgraph(render)(lengths, x)
    assert not counters["graph_break"]
    assert torch.equal(out, render(lengths, x))


@pytest.mark.compile
@pytest.mark.parametrize("lengths", [[8, 5, 1], [8, 8, 8]], ids=["padded", "unpadded"])
def test_attention_with_a_padding_mask_compiles_without_graph_breaks(lengths):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()

    def attend(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return mha(x, mask=masks.padding(lengths)).out

    x = torch.randn(3, 8, 16)
    lengths = torch.tensor(lengths)
    with torch.no_grad():
        out = _compile_fullgraph(attend)(x, lengths)
        ref = attend(x, lengths)
    assert not counters["graph_break"]
    torch.testing.assert_close(out, ref)


def test_eager_padding_still_checks_and_reads_its_lengths():
    mask = masks.padding(LENGTHS)
    assert (mask.max_length, mask.min_length) == (8, 0)
    with pytest.raises(ValueError, match=r"lengths must be >= 0, got \[3, -1\]"):
        masks.padding([3, -1])
    with pytest.raises(ValueError, match="1-D integer tensor"):
        masks.padding(torch.tensor([[3]]))
    with pytest.raises(ValueError, match=r"a length \(8\) exceeds the key length 6"):
        mask.dense(3, 1, 6, 6)
    with pytest.raises(ValueError, match="lengths has 3 entries but the batch has 2"):
        mask.dense(2, 1, 8, 8)
    assert mask.live_keys(3, 8) is not None and masks.padding([4, 4]).live_keys(2, 4) is None
