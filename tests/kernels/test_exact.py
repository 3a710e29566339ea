"""The kernel protocol: the exact maths as a kernel (ExactKernel), refusals at construction with
a reason, the one call a layer makes (run_kernel), and plain kernel modules."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlab import MultiHeadAttention, masks
from attnlab.functional import NORMALIZATIONS, SCORES, attend, get_normalize, make_score
from attnlab.kernels import AttentionKernel, ExactKernel, KernelOutput, run_kernel

pytestmark = pytest.mark.usefixtures("single_thread")

F64 = torch.float64
B, H, N, D = 2, 2, 9, 4


def qkv(n=N, m=N):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(B, H, t, D, dtype=F64, generator=g) for t in (n, m, m)]


@pytest.mark.parametrize("normalize", NORMALIZATIONS.names())
@pytest.mark.parametrize("score", SCORES.names())
@pytest.mark.parametrize("backend", ["auto", "reference", "chunked", "sdpa"])
def test_exact_kernel_equals_attend(backend, score, normalize):
    sc = make_score(score, head_dim=D, heads=H)
    sc = sc.to(F64) if isinstance(sc, nn.Module) else sc
    if backend == "sdpa" and (score == "additive" or normalize != "softmax"):
        with pytest.raises(ValueError, match="backend 'sdpa' computes dot-product scores"):
            ExactKernel(dim=H * D, heads=H, score=sc, normalize=normalize, backend=backend)
        return
    kernel = ExactKernel(dim=H * D, heads=H, score=sc, normalize=normalize, backend=backend)
    q, k, v = qkv()
    mask = masks.causal() & masks.padding([N, 5])
    bias = torch.randn(1, H, N, N, dtype=F64)
    want = attend(q, k, v, score=sc, normalize=normalize, mask=mask, bias=bias)
    res = kernel.attention(q, k, v, mask=mask, bias=bias, need_weights=backend == "reference")
    assert isinstance(res, KernelOutput) and res.ran != "exact"
    torch.testing.assert_close(res.out, want.out, atol=1e-12, rtol=0)
    if backend == "reference":
        torch.testing.assert_close(res.weights, want.weights, atol=1e-12, rtol=0)
    torch.testing.assert_close(kernel(q, k, v, mask=mask), attend(q, k, v, score=sc, normalize=normalize, mask=mask).out, atol=1e-12, rtol=0)  # fmt: skip


def test_exact_kernel_owns_a_score_it_builds_and_not_one_it_is_given():
    own = ExactKernel(dim=8, heads=2, score="additive")
    assert {n for n, _ in own.named_parameters()} == {"score.w_q", "score.w_k", "score.w"}
    given = make_score("additive", head_dim=4, heads=2)
    borrowed = ExactKernel(dim=8, heads=2, score=given)
    assert borrowed.score is given and not list(borrowed.parameters())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(backend="cuda"), "unknown backend 'cuda'; valid choices: auto, chunked"),
        (dict(score="cosine"), "unknown score 'cosine'"),
        (dict(normalize="max"), "unknown normalization 'max'"),
        (dict(backend="flex", normalize="relu"), "backend 'flex' computes dot-product.*chunked"),
        (dict(dropout=1.0), r"dropout must be in \[0, 1\)"),
    ],
)
def test_exact_kernel_refuses_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ExactKernel(dim=8, heads=2, **kwargs)


def test_exact_kernel_dropout_follows_the_training_mode():
    kernel = ExactKernel(dim=8, heads=2, backend="reference", dropout=0.5)
    q, k, v = qkv()
    plain = attend(q, k, v).out
    assert torch.equal(kernel.eval()(q, k, v), plain)
    assert not torch.allclose(kernel.train()(q, k, v), plain)


def test_exact_kernel_names_the_backend_that_ran():
    kernel = ExactKernel(dim=8, heads=2)
    q, k, v = (t.float() for t in qkv())
    assert kernel.attention(q, k, v).ran == "sdpa"
    assert kernel.attention(q, k, v, need_weights=True).ran == "reference"


def test_exact_kernel_checks_mask_and_bias_shapes():
    kernel = ExactKernel(dim=8, heads=2)
    q, k, v = qkv(m=6)
    with pytest.raises(ValueError, match="does not broadcast"):
        kernel(q, k, v, mask=torch.ones(N, N, dtype=torch.bool))
    with pytest.raises(ValueError, match="lengths has 3 entries but the batch has 2"):
        kernel(q, k, v, mask=masks.padding([1, 2, 3]))
    with pytest.raises(ValueError, match="bias of shape"):
        kernel.attention(q, k, v, bias=torch.zeros(N, N, dtype=F64))
    with pytest.raises(ValueError, match="built for 2 heads of size 4"):
        kernel(q[:, :1], k, v)


class PlainKernel(nn.Module):
    """A kernel module that is no AttentionKernel: name and forward only."""

    name = "plain"

    def forward(self, q, k, v, *, mask=None, q_offset=0):
        return attend(q, k, v, mask=mask, q_offset=q_offset).out


def test_run_kernel_serves_plain_modules_and_refuses_what_they_cannot_do():
    q, k, v = qkv()
    res = run_kernel(PlainKernel(), q, k, v, mask=masks.causal())
    assert res.ran == "plain" and res.weights is None
    torch.testing.assert_close(res.out, attend(q, k, v, mask=masks.causal()).out)
    with pytest.raises(ValueError, match="kernel 'plain' cannot return attention weights"):
        run_kernel(PlainKernel(), q, k, v, need_weights=True)
    with pytest.raises(ValueError, match="kernel 'plain' cannot add a score bias"):
        run_kernel(PlainKernel(), q, k, v, bias=torch.zeros(N, N, dtype=F64))


def test_a_layer_with_a_plain_kernel_module():
    mha = MultiHeadAttention(8, 2, kernel=PlainKernel()).double()
    ref = MultiHeadAttention(8, 2).double()
    ref.load_state_dict(mha.state_dict())
    x = torch.randn(2, 5, 8, dtype=F64)
    res = mha(x, mask=masks.causal())
    assert res.backend == "plain" and not isinstance(mha.kernel, AttentionKernel)
    torch.testing.assert_close(res.out, ref(x, mask=masks.causal()).out, atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(kernel="linear", score="dot"), "leave score and normalize at their defaults"),
        (dict(kernel="linear", normalize="relu"), "leave score and normalize"),
        (dict(kernel="linear", dropout=0.1), "efficient kernels never form attention weights"),
        (dict(kernel="linear", backend="sdpa"), "kernel 'linear' has no backend choice.*local"),
        (dict(kernel=PlainKernel(), backend="sdpa"), "kernel 'plain' has no backend choice"),
        (dict(kernel=PlainKernel(), window=3), "kernel options go to a kernel built by name"),
        (dict(kernel="local", backend="cuda"), "backend must be 'auto', 'banded', 'exact'"),
        (dict(backend="sdpa", score="additive"), "backend 'sdpa' computes dot-product"),
    ],
)
def test_layer_refusals_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(8, 2, **kwargs)


def test_a_sparse_kernel_takes_the_layer_backend():
    # backend= means how the attention is computed, for exact and sparse kernels alike.
    mha = MultiHeadAttention(8, 2, kernel="local", window=2, backend="banded")
    assert mha.kernel.backend == "banded"
    assert MultiHeadAttention(8, 2, kernel="local", window=2).kernel.backend == "auto"


def test_exact_kernel_is_an_attention_kernel():
    kernel = ExactKernel(dim=8, heads=2, normalize=get_normalize("sigmoid"))
    assert isinstance(kernel, AttentionKernel) and kernel.supports_causal
    assert kernel.supports_structured and kernel.normalize.name == "sigmoid"
    assert "backend=auto" in repr(kernel)


def test_unsupported_says_why_or_none():
    from attnlab.efficient import make_kernel
    from attnlab.kernels import split_mask

    linformer = make_kernel("linformer", dim=8, heads=2, k=4, max_len=8)
    causal = split_mask(masks.causal(), batch=1, q_len=4, kv_len=4)
    local = split_mask(masks.local(1), batch=1, q_len=4, kv_len=4)
    padding = split_mask(masks.padding([3]), batch=1, q_len=4, kv_len=4)
    assert "linformer cannot apply a causal mask" in linformer.unsupported(causal)
    assert "linformer cannot apply the mask local(1" in linformer.unsupported(local)
    assert linformer.unsupported(padding) is None and linformer.unsupported() is None
    assert "cannot add a score bias" in linformer.unsupported(bias=True)
    assert "does not return attention weights" in linformer.unsupported(need_weights=True)
    exact = ExactKernel(dim=8, heads=2)
    assert exact.unsupported(local, bias=True, need_weights=True) is None
