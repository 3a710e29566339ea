"""Masks: each constructor against its definition written as loops, composition, renderings
(dense, tiles, block masks) and the errors that name what was wrong."""

from __future__ import annotations

import pytest
import torch

from attnlab import masks

pytestmark = pytest.mark.usefixtures("single_thread")


def loops(fn, b: int, n: int, m: int | None = None) -> torch.Tensor:
    """``fn(b, i, j) -> bool`` written out over every position: shape ``(b, 1, n, m)``."""
    m = n if m is None else m
    out = torch.zeros(b, 1, n, m, dtype=torch.bool)
    for bi in range(b):
        for i in range(n):
            for j in range(m):
                out[bi, 0, i, j] = bool(fn(bi, i, j))
    return out


def dense(mask, b: int, n: int, m: int | None = None, h: int = 1) -> torch.Tensor:
    m = n if m is None else m
    return mask.dense(b, h, n, m).expand(b, h, n, m)


B, N = 2, 7


def test_causal():
    assert torch.equal(dense(masks.causal(), B, N), loops(lambda b, i, j: j <= i, B, N))


@pytest.mark.parametrize("window", [0, 1, 3, 20])
def test_local(window):
    got = dense(masks.local(window), B, N)
    assert torch.equal(got, loops(lambda b, i, j: abs(i - j) <= window, B, N))
    got = dense(masks.local(window, causal=True), B, N)
    assert torch.equal(got, loops(lambda b, i, j: 0 <= i - j <= window, B, N))


def test_local_window_covering_everything_is_full():
    assert dense(masks.local(N - 1), B, N).all()
    assert torch.equal(dense(masks.local(N - 1, causal=True), B, N), dense(masks.causal(), B, N))


def test_padding():
    lengths = [3, 7]
    got = dense(masks.padding(torch.tensor(lengths)), B, N)
    assert torch.equal(got, loops(lambda b, i, j: j < lengths[b], B, N))
    # A list works as well as a tensor.
    assert torch.equal(dense(masks.padding(lengths), B, N), got)


def test_graph_follows_message_passing_direction():
    # Edge (src, dst) lets dst attend to src (PyG).
    edges = torch.tensor([[0, 1, 2], [1, 2, 0]])
    allowed = {(1, 0), (2, 1), (0, 2)}  # (query, key)
    got = dense(masks.graph(edges, 4, self_loops=False), 1, 4)
    assert torch.equal(got, loops(lambda b, i, j: (i, j) in allowed, 1, 4))
    got = dense(masks.graph(edges, 4), 1, 4)
    assert torch.equal(got, loops(lambda b, i, j: (i, j) in allowed or i == j, 1, 4))


def test_global_tokens():
    idx = [0, 4]
    got = dense(masks.global_tokens(idx), B, N)
    assert torch.equal(got, loops(lambda b, i, j: i in idx or j in idx, B, N))


def test_composition_and_or():
    lengths = [5, 2]
    a, c = masks.local(1), masks.padding(lengths)
    want_and = loops(lambda b, i, j: abs(i - j) <= 1 and j < lengths[b], B, N)
    want_or = loops(lambda b, i, j: abs(i - j) <= 1 or j < lengths[b], B, N)
    assert torch.equal(dense(a & c, B, N), want_and)
    assert torch.equal(dense(a | c, B, N), want_or)
    t = torch.rand(N, N) < 0.5
    want = loops(lambda b, i, j: j <= i and bool(t[i, j]), B, N)
    assert torch.equal(dense(masks.causal() & t, B, N), want)
    assert torch.equal(dense(t & masks.causal(), B, N), want)
    assert torch.equal(dense(masks.causal() | t, B, N), dense(t | masks.causal(), B, N))


@pytest.mark.parametrize("shape", [(N, N), (1, 1, N, N), (B, 1, N, N), (B, 3, N, N), (1, 3, 1, N)])
def test_from_tensor_broadcasts(shape):
    t = torch.rand(shape) < 0.5
    got = masks.from_tensor(t).dense(B, 3, N, N)
    assert torch.equal(got.expand(B, 3, N, N), t.expand(B, 3, N, N))


def test_q_offset_selects_later_rows(mask_kind, make_mask):
    # Incremental decoding: queries N-3.. of a length-N problem are rows N-3.. of the full mask.
    mask = make_mask(mask_kind, B, 2, N)
    if mask is None or mask_kind in ("tensor", "graph"):
        pytest.skip("needs a mask that defines rows beyond the query count")
    mask = masks.from_tensor(mask)
    full = mask.dense(B, 2, N, N).expand(B, 2, N, N)
    part = mask.dense(B, 2, 3, N, q_offset=N - 3).expand(B, 2, 3, N)
    assert torch.equal(part, full[:, :, N - 3 :])


def test_evaluate_on_tiles_equals_dense(mask_kind, make_mask):
    # The chunked backend evaluates masks tile by tile; tiles must agree with the dense mask.
    b, h, n = 2, 3, 11
    mask = make_mask(mask_kind, b, h, n)
    if mask is None:
        pytest.skip("no mask")
    mask = masks.from_tensor(mask)
    full = mask.dense(b, h, n, n).expand(b, h, n, n)
    for qs, qe, ks, ke in [(0, 4, 0, 4), (4, 11, 2, 9), (8, 11, 8, 11)]:
        tile = mask.evaluate(b, h, torch.arange(qs, qe), torch.arange(ks, ke))
        assert torch.equal(tile.expand(b, h, qe - qs, ke - ks), full[:, :, qs:qe, ks:ke])


def test_block_mask_covers_every_allowed_pair(mask_kind, make_mask):
    # FlexAttention skips empty blocks and, in full blocks, the mask itself: every block must
    # agree with the dense mask in every sequence and every head (a per-head tensor included).
    b, h, n, bs = 2, 3, 40, 16  # 40 is not a multiple of the block size
    mask = make_mask(mask_kind, b, h, n)
    if mask is None:
        pytest.skip("no mask")
    mask = masks.from_tensor(mask)
    full = mask.dense(b, h, n, n).expand(b, h, n, n)
    bm = mask.block_mask(b, h, n, n, block_size=bs)
    nb = -(-n // bs)
    padded = torch.zeros(b, h, nb * bs, nb * bs, dtype=torch.bool)
    padded[:, :, :n, :n] = full
    per_block = padded.view(b, h, nb, bs, nb, bs)
    any_allowed = per_block.any(dim=(3, 5))  # (b, h, qblock, kblock)
    listed = bm.to_dense().bool().expand(b, h, nb, nb)  # partial or full blocks
    assert torch.equal(listed, any_allowed)
    if bm.full_kv_num_blocks is not None:
        # Blocks declared full must be full (only in-range positions count).
        valid = torch.zeros(nb * bs, nb * bs, dtype=torch.bool)
        valid[:n, :n] = True
        all_allowed = (per_block | ~valid.view(nb, bs, nb, bs)).all(dim=(3, 5))
        full_blocks = torch.zeros(bm.full_kv_num_blocks.shape[:2] + (nb, nb), dtype=torch.bool)
        for bi in range(full_blocks.shape[0]):
            for hi in range(full_blocks.shape[1]):
                for qi in range(nb):
                    k = int(bm.full_kv_num_blocks[bi, hi, qi])
                    full_blocks[bi, hi, qi, bm.full_kv_indices[bi, hi, qi, :k]] = True
        assert not (full_blocks.expand(b, h, nb, nb) & ~all_allowed).any()


def test_block_mask_is_cached_per_shape():
    mask = masks.causal()
    assert mask.block_mask(1, 1, 32, 32, block_size=16) is mask.block_mask(
        1, 1, 32, 32, block_size=16
    )
    assert mask.block_mask(1, 1, 48, 48, block_size=16) is not mask.block_mask(
        1, 1, 32, 32, block_size=16
    )


# ---- structure ------------------------------------------------------------------------------------
def test_constructors_build_the_public_classes():
    assert isinstance(masks.causal(), masks.Causal)
    assert isinstance(masks.local(2), masks.Local) and masks.local(2).window == 2
    assert isinstance(masks.padding([2]), masks.Padding)
    assert isinstance(masks.graph(torch.tensor([[0], [1]]), 2), masks.Graph)
    assert isinstance(masks.global_tokens([0]), masks.GlobalTokens)
    assert isinstance(masks.from_tensor(torch.ones(2, 2, dtype=torch.bool)), masks.Dense)
    assert isinstance(masks.causal() & masks.local(1), masks.And)
    assert isinstance(masks.causal() | masks.local(1), masks.Or)
    # The private names of earlier versions still name the same classes.
    assert masks._Causal is masks.Causal and masks._Dense is masks.Dense
    assert masks._Padding is masks.Padding and masks._And is masks.And


def test_conjuncts_flatten_conjunctions_only():
    c, p, w = masks.causal(), masks.padding([3, 4]), masks.local(2)
    assert (c & p & w).conjuncts() == (c, p, w)
    assert (c & (p & w)).conjuncts() == (c, p, w)
    either = p | w
    assert (c & either).conjuncts() == (c, either)  # a disjunction is one term
    assert c.conjuncts() == (c,)


def test_live_keys():
    # Keys some query may attend to; None where no key is known to be dead.
    b, n = 2, 5
    lengths = [5, 3]
    want = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool).view(2, 1, 1, 5)
    assert torch.equal(masks.padding(lengths).live_keys(b, n).expand(2, 1, 1, 5), want)
    assert masks.causal().live_keys(b, n) is None and masks.local(1).live_keys(b, n) is None
    assert masks.padding([5, 5]).live_keys(b, n) is None  # no padding: nothing to zero
    assert torch.equal((masks.causal() & masks.padding(lengths)).live_keys(b, n), want)
    assert (masks.causal() | masks.padding(lengths)).live_keys(b, n) is None
    dense = torch.ones(b, 1, n, n, dtype=torch.bool).tril()
    dense[1, :, :, 3:] = False  # two dead keys in the second sequence
    assert torch.equal(masks.from_tensor(dense).live_keys(b, n), want)
    assert torch.equal(masks.live_keys(want, b, n), want) and masks.live_keys(None, b, n) is None


# ---- errors name what was wrong -----------------------------------------------------------------
def test_local_rejects_negative_window():
    with pytest.raises(ValueError, match="window"):
        masks.local(-1)


@pytest.mark.parametrize(
    "lengths, match",
    [
        (torch.tensor([1.0, 2.0]), "integer"),
        (torch.tensor([[1, 2]]), "1-D"),
        (torch.tensor([True, False]), "integer"),
        (torch.tensor([-1, 2]), ">= 0"),
    ],
)
def test_padding_rejects_bad_lengths(lengths, match):
    with pytest.raises(ValueError, match=match):
        masks.padding(lengths)


def test_padding_checks_batch_and_length():
    with pytest.raises(ValueError, match="lengths has 3 entries but the batch has 2"):
        masks.padding([1, 2, 3]).dense(2, 1, 4, 4)
    with pytest.raises(ValueError, match="exceeds the key length 4"):
        masks.padding([1, 5]).dense(2, 1, 4, 4)


@pytest.mark.parametrize(
    "edges, match",
    [
        (torch.tensor([0, 1]), r"shape \(2, num_edges\)"),
        (torch.tensor([[0.0], [1.0]]), "integer"),
        (torch.tensor([[0], [4]]), r"outside \[0, 4\)"),
        (torch.tensor([[-1], [0]]), r"outside \[0, 4\)"),
    ],
)
def test_graph_rejects_bad_edges(edges, match):
    with pytest.raises(ValueError, match=match):
        masks.graph(edges, 4)


def test_graph_checks_node_count():
    g = masks.graph(torch.tensor([[0], [1]]), 4)
    with pytest.raises(ValueError, match="graph: the mask is for 4 nodes"):
        g.dense(1, 1, 5, 5)


def test_global_tokens_rejects_negative():
    with pytest.raises(ValueError, match="global_tokens"):
        masks.global_tokens([-1])


@pytest.mark.parametrize(
    "tensor, match",
    [
        (torch.ones(4, 4), "boolean"),
        (torch.ones(2, 4, 4, dtype=torch.bool), r"shape \(i, j\) or \(b, h, i, j\)"),
        (torch.ones(4, dtype=torch.bool), r"shape \(i, j\) or \(b, h, i, j\)"),
        (torch.ones(3, 4, dtype=torch.bool), "does not broadcast"),
        (torch.ones(3, 1, 4, 4, dtype=torch.bool), "does not broadcast"),
    ],
)
def test_check_mask_tensor(tensor, match):
    with pytest.raises(ValueError, match=match):
        masks.check_mask_tensor(tensor, 2, 2, 4, 4)


def test_a_batch_by_keys_mask_is_refused_as_ambiguous():
    # Issue 9: torch/HF key padding masks are (batch, keys); with batch == queries they used to
    # be read as (queries, keys) without a word. A 2-D mask whose first size is the batch size
    # (> 1) is refused, whatever the other sizes, and the message says what to write instead.
    pad = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0]], dtype=torch.bool)
    for q_len in (4, 7):
        with pytest.raises(
            ValueError, match=r"ambiguous.*masks\.padding\(lengths\).*\(b, 1, 1, j\)"
        ):
            masks.check_mask_tensor(pad, 4, None, q_len, 4)
    with pytest.raises(ValueError, match="ambiguous"):
        (masks.causal() & pad).dense(4, 1, 4, 4)
    masks.check_mask_tensor(pad, 1, None, 4, 4)  # batch 1: (i, j) is the only reading
    masks.check_mask_tensor(pad[:1], 4, None, 4, 4)  # (1, j): the same row for all: fine
    masks.check_mask_tensor(pad[:, None, None, :], 4, None, 4, 4)  # the key-padding form
    masks.check_mask_tensor(pad[None, None], 4, None, 4, 4)  # the (i, j) form


def test_from_tensor_rejects_non_tensors():
    with pytest.raises(TypeError, match="list"):
        masks.from_tensor([[True]])
    with pytest.raises(ValueError, match="boolean"):
        masks.from_tensor(torch.ones(2, 2))


def test_global_tokens_refuses_per_example_flags_instead_of_flattening_them():
    flags = torch.tensor([[True, False, False], [False, True, False]])  # (b, n)
    with pytest.raises(ValueError, match=r"global_tokens: .*shape \(2, 3\).*pattern"):
        masks.global_tokens(flags)


def test_global_tokens_reads_boolean_flags_as_positions():
    flags = torch.tensor([True, False, False, True])
    by_flags = masks.global_tokens(flags).dense(1, 1, 4, 4)
    by_index = masks.global_tokens([0, 3]).dense(1, 1, 4, 4)
    assert torch.equal(by_flags, by_index)
