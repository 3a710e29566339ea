"""The graph layers on degenerate and mistyped input (issue 32, "no silent wrong answer"): an
empty graph gives PyG's empty output, features of another dtype than the layer's a message that
names the argument, both dtypes and the fix, and a float64 layer computes in float64."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.graph import GATConv, GATv2Conv, GCNConv, edge_aggregate, edge_softmax

LAYERS = [GATConv, GATv2Conv]
NO_EDGES = torch.zeros(2, 0, dtype=torch.long)


def build(cls, **kw):
    torch.manual_seed(0)
    return cls(8, 16, heads=2, **kw)


# ---- empty graphs ----------------------------------------------------------------------------
@pytest.mark.parametrize("cls", LAYERS)
@pytest.mark.parametrize(
    "kw, width",
    [({}, 32), ({"concat": False}, 16), ({"add_self_loops": False}, 32), ({"edge_dim": 3}, 32)],
)
@pytest.mark.parametrize("n", [0, 3])  # no nodes at all; nodes but no edges
def test_attention_on_a_graph_without_edges(cls, kw, width, n):
    layer = build(cls, **kw)
    x = torch.randn(n, 8, requires_grad=True)
    ea = torch.zeros(0, 3) if "edge_dim" in kw else None
    out, (used, alpha) = layer(x, NO_EDGES, ea, return_attention_weights=True)
    loops = n if layer.add_self_loops else 0
    assert out.shape == (n, width)
    assert used.shape == (2, loops) and alpha.shape == (loops, 2)
    if loops == 0:  # every node without an incoming edge: zero output plus the bias
        torch.testing.assert_close(out, layer.bias.expand(n, width).detach())
    out.sum().backward()  # the backward pass runs too
    assert x.grad.shape == (n, 8)
    assert all(p.grad is not None for p in layer.parameters())


@pytest.mark.parametrize("kw", [{}, {"add_self_loops": False}, {"normalize": False}])
@pytest.mark.parametrize("weights", [False, True])
def test_gcn_on_an_empty_graph(kw, weights):
    layer = GCNConv(8, 16, **kw)
    x = torch.zeros(0, 8, requires_grad=True)
    out = layer(x, NO_EDGES, torch.zeros(0) if weights else None)
    assert out.shape == (0, 16)
    out.sum().backward()
    assert x.grad.shape == (0, 8)


def test_edge_kernel_on_no_edges():
    s, dst = torch.zeros(0, 2, requires_grad=True), torch.zeros(0, dtype=torch.long)
    w = edge_softmax(s, dst, 3)
    out = edge_aggregate(torch.randn(3, 2, 4), w, dst, dst, 3)
    assert w.shape == (0, 2) and out.shape == (3, 2, 4) and not out.any()
    assert edge_aggregate(torch.zeros(0, 2, 4), w, dst, dst, 0).shape == (0, 2, 4)


@pytest.mark.parametrize("cls", LAYERS)
def test_empty_graph_like_pyg(cls):
    pyg = pytest.importorskip("torch_geometric.nn", reason="torch-geometric is not installed")
    peer = getattr(pyg, cls.__name__)(8, 16, heads=2)
    ours = cls.from_pyg(peer)
    x = torch.zeros(0, 8)
    theirs, (_, a_theirs) = peer(x, NO_EDGES, return_attention_weights=True)
    mine, (_, a_mine) = ours(x, NO_EDGES, return_attention_weights=True)
    assert mine.shape == theirs.shape and a_mine.shape == a_theirs.shape


# ---- dtypes ----------------------------------------------------------------------------------
def graph():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 8, generator=gen)
    ei = torch.tensor([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 2]])
    return x, ei


@pytest.mark.parametrize("cls", [*LAYERS, GCNConv])
@pytest.mark.parametrize("layer_dtype, x_dtype", [(torch.float32, torch.float64), (torch.float64, torch.float32)])  # fmt: skip
def test_features_of_another_dtype_are_named(cls, layer_dtype, x_dtype):
    layer = (cls(8, 16) if cls is GCNConv else build(cls)).to(layer_dtype)
    x, ei = graph()
    with pytest.raises(ValueError) as err:
        layer(x.to(x_dtype), ei)
    msg = str(err.value)
    assert "\n" not in msg
    assert f"x has dtype {x_dtype}" in msg and f"{cls.__name__}'s parameters are {layer_dtype}" in msg  # fmt: skip
    fix_x = "x.double()" if layer_dtype == torch.float64 else "x.float()"
    fix_layer = "layer.double()" if x_dtype == torch.float64 else "layer.float()"
    assert fix_x in msg and fix_layer in msg


@pytest.mark.parametrize("cls", LAYERS)
def test_edge_attr_of_another_dtype_is_named(cls):
    layer = build(cls, edge_dim=3)
    x, ei = graph()
    with pytest.raises(ValueError, match=r"edge_attr has dtype torch\.float64 but .*float32; .*edge_attr\.float\(\)"):  # fmt: skip
        layer(x, ei, torch.zeros(ei.shape[1], 3, dtype=torch.float64))


def test_gcn_edge_weight_is_used_in_the_layer_dtype():
    """Edge weights are data: float32 weights into a float64 layer are normalised in float64."""
    layer = GCNConv(8, 4).double()
    x, ei = graph()
    w = torch.rand(ei.shape[1])
    torch.testing.assert_close(
        layer(x.double(), ei, w), layer(x.double(), ei, w.double()), rtol=0, atol=0
    )


def adjacency(n, ei):
    """``(i, j)`` True where ``j`` sends to ``i``, one self loop per node (what the layers add)."""
    adj = torch.eye(n, dtype=torch.bool)
    adj[ei[1], ei[0]] = True
    return adj


def dense_gat(layer: GATConv, x, ei):
    """GAT in float64 the dense way: scores on the adjacency, softmax over each row."""
    n, H, C = x.shape[0], layer.heads, layer.out_channels
    h = (x @ layer.lin.weight.t()).view(n, H, C)
    a_src, a_dst = (h * layer.att_src).sum(-1), (h * layer.att_dst).sum(-1)  # (n, H)
    e = F.leaky_relu(a_dst.t()[:, :, None] + a_src.t()[:, None, :], layer.negative_slope)
    alpha = e.masked_fill(~adjacency(n, ei), float("-inf")).softmax(-1)  # (H, i, j)
    return torch.einsum("hij,jhc->ihc", alpha, h).reshape(n, H * C) + layer.bias


def dense_gatv2(layer: GATv2Conv, x, ei):
    n, H, C = x.shape[0], layer.heads, layer.out_channels
    xl, xr = layer.lin_l(x).view(n, H, C), layer.lin_r(x).view(n, H, C)
    z = F.leaky_relu(xr[:, None] + xl[None, :], layer.negative_slope)  # (i, j, H, C)
    e = (z * layer.att).sum(-1).permute(2, 0, 1)  # (H, i, j)
    alpha = e.masked_fill(~adjacency(n, ei), float("-inf")).softmax(-1)
    return torch.einsum("hij,jhc->ihc", alpha, xl).reshape(n, H * C) + layer.bias


def dense_gcn(layer: GCNConv, x, ei):
    a = adjacency(x.shape[0], ei).double()
    d = a.sum(1).rsqrt()
    return (d[:, None] * a * d[None, :]) @ (x @ layer.lin.weight.t()) + layer.bias


@pytest.mark.parametrize("cls, dense", [(GATConv, dense_gat), (GATv2Conv, dense_gatv2), (GCNConv, dense_gcn)])  # fmt: skip
def test_float64_layers_compute_in_float64(cls, dense):
    torch.manual_seed(0)
    layer = (cls(8, 16) if cls is GCNConv else cls(8, 16, heads=2)).double()
    for name, p in layer.named_parameters():
        if "bias" in name:
            torch.nn.init.normal_(p)  # zero at init: make it count
    x, ei = graph()
    out = layer(x.double(), ei)
    assert out.dtype == torch.float64
    # 1e-12 holds only in float64 throughout (float32 anywhere would leave ~1e-7)
    torch.testing.assert_close(out, dense(layer, x.double(), ei), rtol=1e-12, atol=1e-12)
