"""The lab's own GAT layer (``--model.variant=original``) on the inputs ``attnlab.graph``'s
layers take (issue 32): an empty graph gives an empty output, features of another dtype than
the layer's are one clear error."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.tasks.graph.layers import OriginalGATConv


@pytest.mark.parametrize("concat", [True, False])
def test_an_empty_graph_gives_an_empty_output(concat):
    layer = OriginalGATConv(8, 4, heads=3, concat=concat, input_dropout=0.5).train()
    x = torch.zeros(0, 8, requires_grad=True)
    out = layer(x, torch.zeros(2, 0, dtype=torch.long))
    assert out.shape == (0, 12 if concat else 4)
    out.sum().backward()
    assert x.grad.shape == (0, 8)


def test_features_in_another_dtype_are_named():
    layer = OriginalGATConv(8, 4, heads=2)
    x = torch.randn(5, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"x has dtype torch.float64 but OriginalGATConv's "
                       r"parameters are torch.float32; convert the input \(x.float\(\)\) or "
                       r"the layer \(layer.double\(\)\)"):  # fmt: skip
        layer(x, torch.tensor([[0, 1], [1, 2]]))
    assert layer.double()(x, torch.tensor([[0, 1], [1, 2]])).dtype == torch.float64
