"""Causality under adversarial norms: token t never changes the outputs before t.

Under ``masks.causal()`` the output at position ``p < t`` is a function of tokens ``<= p``
only, so replacing token ``t`` (its key and value, and its query too) must leave every earlier
output unchanged, not merely "close": a kernel whose *numerics* look ahead (a stabilising shift
taken over all keys, LSH chunk boundaries set by every token, a prefix sum computed as
"inclusive sum minus own term") passes an ordinary causality test with moderate inputs and
leaks once a future token is large. So the new token is adversarial:

* ``huge_last``: the last token, 1e3 times the usual norm;
* ``large_past``: large past tokens (30x) and a moderate last one (the last token's features
  then dominate a shift taken over all keys, and the past underflows);
* ``huge_middle``: a huge token in the middle of a chunk, so that earlier queries of the same
  chunk are checked too.

Parametrised over every registered kernel (one that refuses causal masks must raise
``ValueError``) plus exact attention (``kernel=None``, each exact backend), in float32 and
float64, at the kernel (``q, k, v``) and at the layer (``MultiHeadAttention``, where a token
is its query, key and value at once). The tolerance is rounding-free: ``1e-6`` (float32) or
``1e-12`` (float64) of the outputs' scale.

Legend: ``b`` batch, ``h`` heads, ``n`` tokens, ``d`` head dim.
"""

from __future__ import annotations

import pytest
import torch

from attnlab import MultiHeadAttention, masks
from attnlab.efficient import KERNELS, make_kernel
from attnlab.functional import attend

B, N, DIM, HEADS = 2, 16, 32, 2
D = DIM // HEADS
#: small options per kernel: chunks and blocks of 4 so that token t shares a chunk with
#: earlier queries; a kernel missing here runs with its defaults
OPTIONS: dict[str, dict] = {
    "local": {"window": 3},
    "longformer": {"window": 2, "global_tokens": (0, 5)},
    "bigbird": {"block": 4, "random_blocks": 1},
    "linformer": {"k": 8, "max_len": N},
    "performer": {"features": 32, "block": 4},
    "linear": {"block": 4},
    "nystrom": {"landmarks": 4},
    "reformer": {"buckets": 4, "rounds": 2},
    "synthesizer": {"max_len": N},
    "sinkhorn": {"block": 4, "max_len": N},
}
KERNEL_NAMES = sorted(KERNELS.names())
EXACT_BACKENDS = ["auto", "reference", "sdpa", "chunked"]
#: (token t, scale of the past tokens, scale of the new token t)
CASES = {
    "huge_last": (N - 1, 1.0, 1e3),
    "large_past": (N - 1, 30.0, 1.0),
    "huge_middle": (N // 2 + 1, 1.0, 1e3),
}
DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: 1e-6, torch.float64: 1e-12}


def refuses_causal(name: str) -> bool:
    return not KERNELS.get(name).supports_causal


def assert_same_before(a: torch.Tensor, b: torch.Tensor, t: int, dim: int) -> None:
    """``a`` and ``b`` agree at positions ``< t`` along ``dim`` to ``TOL`` of their scale."""
    a, b = a.narrow(dim, 0, t), b.narrow(dim, 0, t)
    assert torch.isfinite(a).all() and torch.isfinite(b).all()
    tol = TOL[a.dtype]
    scale = float(a.abs().max())
    torch.testing.assert_close(b, a, rtol=tol, atol=tol * max(scale, 1e-30))


def perturbed_qkv(case: str, dtype: torch.dtype, seed: int = 0):
    """``(q, k, v)`` and the same with token t's ``q, k, v`` replaced, plus ``t``."""
    t, past, new = CASES[case]
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, HEADS, N, D, generator=g, dtype=torch.float64) for _ in range(3))
    q, k, v = (x * past for x in (q, k, v))
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    for x in (q2, k2, v2):
        x[:, :, t] = new * torch.randn(B, HEADS, D, generator=g, dtype=torch.float64)
    to = lambda *xs: tuple(x.to(dtype) for x in xs)  # noqa: E731
    return to(q, k, v), to(q2, k2, v2), t


def perturbed_x(case: str, dtype: torch.dtype, seed: int = 0):
    """Layer inputs ``x (b, n, dim)`` and the same with token t replaced, plus ``t``."""
    t, past, new = CASES[case]
    g = torch.Generator().manual_seed(seed)
    x = past * torch.randn(B, N, DIM, generator=g, dtype=torch.float64)
    y = x.clone()
    y[:, t] = new * torch.randn(B, DIM, generator=g, dtype=torch.float64)
    return x.to(dtype), y.to(dtype), t


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_kernel_outputs_before_t_ignore_token_t(name, case, dtype):
    torch.manual_seed(0)
    kernel = make_kernel(name, dim=DIM, heads=HEADS, **OPTIONS.get(name, {}))
    kernel = kernel.to(dtype).eval()
    if refuses_causal(name):
        q, k, v = perturbed_qkv(case, dtype)[0]
        with pytest.raises(ValueError, match="cannot apply a causal mask"):
            kernel(q, k, v, mask=masks.causal())
        return
    for seed in range(3):  # a leak may need the right draw (an LSH bucket that moves)
        (q, k, v), (q2, k2, v2), t = perturbed_qkv(case, dtype, seed)
        with torch.no_grad():
            a = kernel(q, k, v, mask=masks.causal())
            b = kernel(q2, k2, v2, mask=masks.causal())
        assert_same_before(a, b, t, dim=2)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_layer_outputs_before_t_ignore_token_t(name, case, dtype):
    torch.manual_seed(0)
    mha = MultiHeadAttention(DIM, HEADS, kernel=name, **OPTIONS.get(name, {}))
    mha = mha.to(dtype).eval()
    x, y, t = perturbed_x(case, dtype)
    if refuses_causal(name):
        with pytest.raises(ValueError, match="cannot apply a causal mask"):
            mha(x, mask=masks.causal())
        return
    with torch.no_grad():
        for mask in (masks.causal(), masks.causal() & masks.padding([N, N - 2])):
            assert_same_before(mha(x, mask=mask).out, mha(y, mask=mask).out, t, dim=1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("backend", EXACT_BACKENDS)
def test_exact_attention_outputs_before_t_ignore_token_t(backend, case, dtype):
    (q, k, v), (q2, k2, v2), t = perturbed_qkv(case, dtype)
    a = attend(q, k, v, mask=masks.causal()).out
    b = attend(q2, k2, v2, mask=masks.causal()).out
    assert_same_before(a, b, t, dim=2)
    torch.manual_seed(0)
    mha = MultiHeadAttention(DIM, HEADS, backend=backend).to(dtype).eval()  # kernel=None
    x, y, t = perturbed_x(case, dtype)
    with torch.no_grad():
        for mask in (masks.causal(), masks.causal() & masks.padding([N, N - 2])):
            assert_same_before(mha(x, mask=mask).out, mha(y, mask=mask).out, t, dim=1)


def test_every_registered_kernel_is_checked():
    """A kernel registered later is covered (with its defaults) and needs no edit here; the
    options above name only registered kernels."""
    assert set(OPTIONS) <= set(KERNEL_NAMES)


# ---- the causal paths of Performer and Reformer against their definitions ---------------------
def favor_log_features(kernel, t: torch.Tensor) -> torch.Tensor:
    """``W x - |x|^2 / 2`` with ``x = t / d^(1/4)`` (the Performer docstring), ``(b, h, n, m)``."""
    x = t * t.shape[-1] ** -0.25
    return x @ kernel.projection.to(t.dtype).T - 0.5 * (x * x).sum(-1, keepdim=True)


def naive_causal_favor(kernel, q, k, v, lengths, q_offset=0):
    """o_t = sum_{j <= p} phi(q_t).phi(k_j) v_j / sum_{j <= p} phi(q_t).phi(k_j), p = q_offset + t,
    over real keys, in log space (no shift to get wrong)."""
    lq, lk = favor_log_features(kernel, q), favor_log_features(kernel, k)
    s = (lq.unsqueeze(-2) + lk.unsqueeze(-3)).logsumexp(-1)  # (b, h, i, j) log phi_q . phi_k
    pos = torch.arange(q.shape[2]).view(-1, 1) + q_offset  # (i, 1)
    keys = torch.arange(k.shape[2])  # (j,)
    allowed = (keys <= pos) & (keys < lengths.view(-1, 1, 1))  # (b, i, j)
    s = s.masked_fill(~allowed.unsqueeze(1), -torch.inf)
    return torch.softmax(s, -1) @ v


def test_causal_performer_equals_its_definition():
    """100 tokens in chunks of 3: 34 chunks, so the rescaled state is carried across groups;
    with padding, and decoding from an offset (keys before it form the initial state)."""
    g = torch.Generator().manual_seed(0)
    n = 100
    q, k, v = (torch.randn(2, HEADS, n, D, generator=g, dtype=torch.float64) for _ in range(3))
    k[:, :, ::7] *= 4  # keys of very different norms: the running max moves many times
    kernel = make_kernel("performer", dim=DIM, heads=HEADS, features=16, block=3, seed=0)
    kernel = kernel.double().eval()
    lengths = torch.tensor([n, n - 9])
    mask = masks.causal() & masks.padding(lengths)
    expected = naive_causal_favor(kernel, q, k, v, lengths)
    out = kernel(q, k, v, mask=mask)
    torch.testing.assert_close(out[0], expected[0], atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(out[1, :, : n - 9], expected[1, :, : n - 9], atol=1e-12, rtol=1e-12)
    tail = kernel(q[:, :, 40:], k, v, mask=mask, q_offset=40)  # queries 40.. over a "cache"
    torch.testing.assert_close(tail[0], expected[0, :, 40:], atol=1e-12, rtol=1e-12)


def test_causal_performer_keeps_large_past_keys_in_float32():
    """Past keys of 10x the usual norm and a moderate last key: a shift taken over all keys
    (the last one's) underflowed the past in float32 (error 0.5 of the output's scale); the
    running max keeps float32 within 1e-4 of the float64 definition."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, 40, D, generator=g, dtype=torch.float64) for _ in range(3))
    q, k = q * 0.5, k * 10
    k[:, :, -1] = torch.randn(1, HEADS, D, generator=g, dtype=torch.float64)
    kernel = make_kernel("performer", dim=DIM, heads=HEADS, features=64, block=4, seed=0).eval()
    expected = naive_causal_favor(kernel.double(), q, k, v, torch.tensor([40]))
    out = kernel.float()(q.float(), k.float(), v.float(), mask=masks.causal()).double()
    scale = float(expected.abs().max())
    torch.testing.assert_close(out, expected, atol=1e-4 * scale, rtol=0)


def loop_causal_reformer(kernel, q, v, lengths, chunk):
    """Causal Reformer by its definition, one query at a time: in each round, query i attends
    to the real keys j <= i of its bucket whose rank in the bucket (counted over real tokens,
    by position) falls in i's chunk or the one before (chunk = rank // c), itself only when
    nothing else (score SELF_SCORE); rounds are weighted by their log-sum-exp."""
    from attnlab.efficient.reformer import SELF_SCORE

    b, h, n, d = q.shape
    kn = torch.nn.functional.normalize(q, dim=-1)
    buckets = kernel.hash(kn)  # (b, h, R, n)
    out = torch.zeros_like(v)
    for bi in range(b):
        real = int(lengths[bi])
        for hi in range(h):
            for i in range(real):
                outs, lses = [], []
                for bk in buckets[bi, hi].tolist():
                    rank = [sum(bk[x] == bk[j] for x in range(j)) for j in range(real)]
                    keys = [
                        j for j in range(i + 1)
                        if bk[j] == bk[i] and rank[j] // chunk in (rank[i] // chunk, rank[i] // chunk - 1)
                    ]  # fmt: skip
                    s = torch.stack([
                        torch.tensor(SELF_SCORE, dtype=q.dtype) if j == i
                        else q[bi, hi, i] @ kn[bi, hi, j] / d**0.5
                        for j in keys
                    ])  # fmt: skip
                    lses.append(s.logsumexp(0))
                    outs.append(torch.softmax(s, 0) @ v[bi, hi, keys])
                w = torch.softmax(torch.stack(lses), 0)
                out[bi, hi, i] = (w.unsqueeze(-1) * torch.stack(outs)).sum(0)
    return out


@pytest.mark.parametrize(
    "opts", [{"buckets": 4, "rounds": 2, "block": 2}, {"buckets": 2, "rounds": 3}, {"buckets": 8}]
)
def test_causal_reformer_equals_its_loop_definition(opts):
    g = torch.Generator().manual_seed(1)
    n = 13
    q, v = (torch.randn(2, HEADS, n, D, generator=g, dtype=torch.float64).requires_grad_()
            for _ in range(2))  # fmt: skip
    kernel = make_kernel("reformer", dim=DIM, heads=HEADS, **opts).double()
    lengths = torch.tensor([n, n - 4])
    chunk = opts.get("block") or -(-n // opts["buckets"])
    expected = loop_causal_reformer(kernel, q, v, lengths, chunk)
    out = kernel(q, q, v, mask=masks.causal() & masks.padding(lengths))
    torch.testing.assert_close(out[0], expected[0], atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(out[1, :, : n - 4], expected[1, :, : n - 4], atol=1e-12, rtol=1e-12)
    real = torch.ones_like(out)  # and the gradients, through chunks that look back
    real[1, :, n - 4 :] = 0
    up = torch.randn(out.shape, generator=g, dtype=out.dtype) * real
    for got, want in zip(torch.autograd.grad((out * up).sum(), (q, v)),
                         torch.autograd.grad((expected * up).sum(), (q, v))):  # fmt: skip
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize(
    ("name", "opts"), [("reformer", {"buckets": 4, "block": 3}), ("performer", {"block": 3})]
)
def test_causal_prefix_does_not_depend_on_what_follows(name, opts):
    """With a fixed block, running a prefix alone gives the full sequence's outputs there."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, HEADS, N, D, generator=g, dtype=torch.float64) for _ in range(3))
    kernel = make_kernel(name, dim=DIM, heads=HEADS, **opts).double().eval()
    full = kernel(q, k, v, mask=masks.causal())
    for m in (5, 11):
        part = kernel(q[:, :, :m], k[:, :, :m], v[:, :, :m], mask=masks.causal())
        torch.testing.assert_close(part, full[:, :, :m], atol=1e-12, rtol=1e-12)
