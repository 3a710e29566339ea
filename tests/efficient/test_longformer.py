"""Longformer with global tokens per call and per example (Hugging Face's
``is_index_global_attn``): the pattern travels in the mask, and the kernel equals exact
attention under that mask, with padding, causality, a KV-cache offset and gradients.

Legend: ``b`` batch, ``h`` heads, ``n`` positions, ``d`` head dim.
"""

from __future__ import annotations

import pytest
import torch

from attnlab import AttentionConfig, MultiHeadAttention, masks
from attnlab.blocks import TransformerBlock
from attnlab.efficient import make_kernel
from attnlab.efficient.longformer import LongformerPattern
from attnlab.functional import attend

B, HEADS, D, N, W = 3, 2, 4, 24, 2
F64 = torch.float64
TOL = {"atol": 1e-12, "rtol": 1e-12}
LENGTHS = [24, 17, 9]
#: different global tokens per example, all inside each sequence's length
POSITIONS = [[0, 11, 23], [3], [0, 1, 8]]


def flags() -> torch.Tensor:
    g = torch.zeros(B, N, dtype=torch.bool)
    for b, positions in enumerate(POSITIONS):
        g[b, positions] = True
    return g  # (b, n)


def reference_mask(g: torch.Tensor, lengths=LENGTHS, causal=False) -> torch.Tensor:
    """``|i - j| <= w or g[b, i] or g[b, j]``, and key padding, by broadcasting: (b, 1, n, n)."""
    pos = torch.arange(g.shape[1])
    near = (pos[:, None] - pos[None, :]).abs() <= W  # (n, n)
    allowed = near | g[:, :, None] | g[:, None, :]  # (b, n, n)
    allowed &= pos < torch.tensor(lengths)[:, None, None]  # real keys only
    if causal:
        allowed &= pos[:, None] >= pos[None, :]
    return allowed[:, None]


def rand_qkv(n=N, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, HEADS, n, D, generator=g, dtype=F64) for _ in range(3)]


def kernel(backend="auto", block=4, **options):
    return make_kernel(
        "longformer", dim=HEADS * D, heads=HEADS, window=W, block=block, backend=backend,
        **options,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ["banded", "exact", "auto"])
@pytest.mark.parametrize("form", ["flags", "positions"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_per_example_global_tokens_equal_exact_attention(backend, form, causal):
    lf = kernel(backend)
    tokens = flags() if form == "flags" else POSITIONS
    mask = lf.pattern(tokens) & masks.padding(LENGTHS)
    if causal:
        mask = masks.causal() & mask
    q, k, v = (t.requires_grad_() for t in rand_qkv())
    got = lf(q, k, v, mask=mask)
    want = attend(q, k, v, mask=reference_mask(flags(), causal=causal)).out
    real = torch.arange(N) < torch.tensor(LENGTHS)[:, None]  # (b, n) real queries
    torch.testing.assert_close(got * real[:, None, :, None], want * real[:, None, :, None], **TOL)
    # Exact attention under the same mask object is the reference too.
    torch.testing.assert_close(attend(q, k, v, mask=mask).out * real[:, None, :, None],
                               want * real[:, None, :, None], **TOL)  # fmt: skip
    weight = torch.randn(got.shape, dtype=F64, generator=torch.Generator().manual_seed(1))
    weight = weight * real[:, None, :, None]
    grads = torch.autograd.grad((got * weight).sum(), (q, k, v))
    wants = torch.autograd.grad((want * weight).sum(), (q, k, v))
    for a, b in zip(grads, wants):
        torch.testing.assert_close(a, b, **TOL)


def test_each_example_keeps_its_own_global_tokens():
    """Not the union over the batch: position 0 is global in examples 0 and 2, not in example
    1, whose query 0 sees its window and its own global key 3, not every key."""
    lf = kernel("banded")
    q, k, v = rand_qkv()
    per_example = lf(q, k, v, mask=lf.pattern(flags()))
    want = attend(q, k, v, mask=reference_mask(flags(), lengths=[N] * B)).out
    torch.testing.assert_close(per_example, want, **TOL)
    union = lf(q, k, v, mask=lf.pattern(flags().any(0, keepdim=True).expand(B, N)))
    full = attend(q, k, v).out  # a global query attends to every key
    torch.testing.assert_close(union[1, :, 0], full[1, :, 0], **TOL)
    torch.testing.assert_close(per_example[0, :, 0], full[0, :, 0], **TOL)
    assert not torch.allclose(per_example[1, :, 0], full[1, :, 0])


def test_the_constructor_global_tokens_keep_working_and_a_call_pattern_replaces_them():
    lf = kernel("banded", global_tokens=(0, 5))
    q, k, v = rand_qkv()
    shared = torch.zeros(B, N, dtype=torch.bool)
    shared[:, [0, 5]] = True
    real = (torch.arange(N) < torch.tensor(LENGTHS)[:, None])[:, None, :, None]
    got = lf(q, k, v, mask=masks.padding(LENGTHS))
    want = attend(q, k, v, mask=reference_mask(shared)).out
    torch.testing.assert_close(got * real, want * real, **TOL)
    assert lf.pattern().cache_key() == LongformerPattern(W, [5, 0]).cache_key()
    # The call's pattern is the whole pattern: positions 0 and 5 are not global here.
    got = lf(q, k, v, mask=lf.pattern(flags()))
    want = attend(q, k, v, mask=reference_mask(flags(), lengths=[N] * B)).out
    torch.testing.assert_close(got, want, **TOL)


def test_decoding_from_a_cache_offset():
    """The last 8 queries over all keys (a KV cache of 16) give the full run's last rows."""
    lf = kernel("banded")
    q, k, v = rand_qkv()
    mask = masks.causal() & lf.pattern(flags()) & masks.padding([N] * B)
    full = lf(q, k, v, mask=mask)
    tail = lf(q[:, :, 16:], k, v, mask=mask, q_offset=16)
    torch.testing.assert_close(tail, full[:, :, 16:], **TOL)


def test_through_the_layer_and_the_block_equal_exact_attention():
    """The mask passes through MultiHeadAttention and TransformerBlock unchanged; the
    longformer layer equals the exact layer with the same weights under the same mask."""
    torch.manual_seed(0)
    dim = HEADS * D
    opts = {"window": W, "global_tokens": (), "block": 4, "backend": "banded"}
    sparse = MultiHeadAttention(dim, HEADS, kernel="longformer", **opts).double().eval()
    exact = MultiHeadAttention(dim, HEADS, backend="reference").double().eval()
    exact.load_state_dict(sparse.state_dict())
    x = torch.randn(B, N, dim, dtype=F64)
    real = (torch.arange(N) < torch.tensor(LENGTHS)[:, None])[..., None]  # (b, n, 1)
    mask = sparse.kernel.pattern(POSITIONS) & masks.padding(LENGTHS)
    torch.testing.assert_close(sparse(x, mask=mask).out * real, exact(x, mask=mask).out * real,
                               **TOL)  # fmt: skip
    config = AttentionConfig(
        kernel="longformer", backend="banded",
        kernel_options={k: v for k, v in opts.items() if k != "backend"},
    )  # fmt: skip
    block = TransformerBlock(dim, HEADS, attention=config).double().eval()
    ref = TransformerBlock(dim, HEADS, attention=AttentionConfig(backend="reference"))
    ref = ref.double().eval()
    ref.load_state_dict(block.state_dict())
    pattern = LongformerPattern(W, flags())  # the same pattern, built without the kernel
    got = block(x, mask=pattern & masks.padding(LENGTHS)).out
    want = ref(x, mask=pattern & masks.padding(LENGTHS)).out
    torch.testing.assert_close(got * real, want * real, **TOL)


@pytest.mark.compile
def test_the_flex_backend_reads_per_example_global_tokens():
    q, k, v = (t.float() for t in rand_qkv(n=32))
    g = torch.zeros(B, 32, dtype=torch.bool)
    g[0, 3], g[2, [0, 30]] = True, True
    mask = LongformerPattern(W, g)
    with torch.no_grad():
        got = kernel("flex")(q, k, v, mask=mask)
        want = kernel("reference")(q, k, v, mask=mask)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (torch.zeros(2, N, dtype=torch.bool), "given for 2 sequences, but the batch has 3"),
        (
            torch.zeros(B, N - 1, dtype=torch.bool),
            r"needs 24 keys per sequence, got shape \(3, 23\)",
        ),
        ([[0], [1], [24]], "position 24 is past the 24 keys"),
        (torch.zeros(B, N, dtype=torch.long), "could be 0/1 flags or positions"),
        ([[0], [-1], [2]], "positions >= 0"),
        ([[0.5], [1], [2]], "expected positions"),
    ],
)
def test_bad_global_tokens_are_refused_with_the_reason(tokens, message):
    q, k, v = rand_qkv()
    with pytest.raises(ValueError, match=message):
        lf = kernel()
        lf(q, k, v, mask=lf.pattern(tokens))


def test_the_constructor_takes_shared_positions_only():
    with pytest.raises(ValueError, match="per-example global tokens per call, in the mask"):
        kernel(global_tokens=[[0], [1]])
    with pytest.raises(ValueError, match="positions >= 0"):
        kernel(global_tokens=(-1,))
