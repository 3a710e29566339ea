"""Block masks are cached by the mask's value (attnlab.masks.block_cache), and ``auto`` counts
what building one costs.

Most tests replace the builder with a stub that records what it was asked to build: the keys
and the LRU are what is under test, not FlexAttention. The ``compile`` tests run the real thing.
"""

from __future__ import annotations

import pytest
import torch

import attnlab.backends
from attnlab import masks
from attnlab.backends import FlexBackend, Problem, _build_pays_off, run_backend, select_backend
from attnlab.functional import attend, get_normalize, get_score
from attnlab.masks import block_cache
from attnlab.masks.block_cache import BlockMaskCache, tensor_key, value_key

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(autouse=True)
def fresh_cache():
    """Each test starts from an empty process-wide cache of the default size, and leaves one."""
    cache = masks.block_mask_cache()
    size = cache.maxsize
    cache.clear()
    yield cache
    cache.maxsize = size
    cache.clear()


class Built:
    """Stands in for a BlockMask: what the builder was asked for."""

    def __init__(self, batch, heads, q_len, kv_len, device, block_size):
        self.args = (batch, heads, q_len, kv_len, str(device), block_size)


@pytest.fixture
def builds(monkeypatch):
    """Replace the builder by a stub; the list of what it built."""
    made: list[Built] = []

    def stub(mask_mod, batch, heads, q_len, kv_len, *, device, block_size):
        made.append(Built(batch, heads, q_len, kv_len, device, block_size))
        return made[-1]

    monkeypatch.setattr("attnlab.masks.base.build_block_mask", stub)
    return made


def bm(mask, b=2, h=2, n=32, **kw):
    return mask.block_mask(b, h, n, n, block_size=16, **kw)


# ---- equal values share one block mask --------------------------------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda: masks.local(3),
        lambda: masks.local(3, causal=True),
        lambda: masks.causal(),
        lambda: masks.causal() & masks.padding([30, 7]),
        lambda: masks.local(2) | masks.global_tokens([0, 5]),
        lambda: masks.graph(torch.tensor([[0, 1, 2], [1, 2, 0]]), 32),
    ],
    ids=["local", "local_causal", "causal", "causal&padding", "local|global", "graph"],
)
def test_equal_masks_built_separately_share_one_block_mask(make, builds):
    first, second = make(), make()
    assert first is not second and first.cache_key() == second.cache_key()
    assert bm(second) is bm(first)
    assert len(builds) == 1
    assert masks.block_mask_cache().info().hits == 1


def test_equal_masks_share_the_real_block_mask():
    # Without the stub: the FlexAttention BlockMask object itself is shared.
    cache = masks.block_mask_cache()
    a = masks.causal() & masks.padding([30, 7])
    b = masks.causal() & masks.padding(torch.tensor([30, 7], dtype=torch.int32))
    assert bm(a) is bm(b)
    assert cache.info().builds == 1
    assert torch.equal(bm(b).to_dense(), bm(masks.causal() & masks.padding([30, 7])).to_dense())
    assert cache.info().builds == 1


def test_tensors_inside_key_by_content(builds):
    # padding lengths: a list, an int64 tensor and an int32 tensor of the same values are equal
    keys = {masks.padding(x).cache_key() for x in ([4, 9], torch.tensor([4, 9]), torch.tensor([4, 9], dtype=torch.int32))}  # fmt: skip
    assert len(keys) == 1
    # a graph's edge list beyond the listed size: by a digest of its bytes
    edges = torch.randint(0, 64, (2, 300), generator=torch.Generator().manual_seed(0))
    g1, g2 = masks.graph(edges, 64), masks.graph(edges.clone(), 64)
    assert g1.cache_key() == g2.cache_key() and isinstance(g1.cache_key()[-1][-1], str)
    other = edges.clone()
    other[0, 123] = (other[0, 123] + 1) % 64
    assert masks.graph(other, 64).cache_key() != g1.cache_key()
    assert masks.graph(edges, 64, self_loops=False).cache_key() != g1.cache_key()


# ---- different values, shapes, devices never collide ------------------------------------------------
def test_different_parameters_do_not_collide(builds):
    kinds = [
        masks.local(3),
        masks.local(4),
        masks.local(3, causal=True),
        masks.causal(),
        masks.causal() & masks.padding([30, 7]),
        masks.causal() & masks.padding([30, 8]),
        masks.padding([30, 7]) & masks.causal(),  # the same value, written the other way round
        masks.causal() | masks.padding([30, 7]),
        masks.global_tokens([0]),
        masks.global_tokens([1]),
        masks.graph(torch.tensor([[0], [1]]), 32),
        masks.graph(torch.tensor([[1], [0]]), 32),
    ]
    got = [bm(m) for m in kinds]
    assert len({id(x) for x in got}) == len(kinds) == len(builds)


def test_different_shapes_devices_and_blocks_do_not_collide(builds):
    pad, loc = masks.padding([20, 7]), masks.local(3)
    got = [
        loc.block_mask(1, 1, 32, 32, block_size=16),
        loc.block_mask(1, 1, 48, 48, block_size=16),  # queries and keys
        loc.block_mask(1, 1, 32, 48, block_size=16),  # keys only
        loc.block_mask(1, 1, 32, 32, block_size=32),  # block size
        loc.block_mask(1, 1, 32, 32, block_size=16, device="meta"),  # device
        pad.block_mask(2, 1, 32, 32, block_size=16),
        masks.padding([20, 7, 3]).block_mask(3, 1, 32, 32, block_size=16),  # batch (read)
    ]
    assert len({id(x) for x in got}) == len(got) == len(builds)
    assert builds[4].args[4] == "meta"
    # what the mask does not read is no part of the key: one pattern serves every head / batch
    assert loc.block_mask(4, 8, 32, 32, block_size=16) is got[0]
    assert pad.block_mask(2, 8, 32, 32, block_size=16) is got[5]
    assert loc.block_mask(1, 1, 32, 32, block_size=16, device=torch.device("cpu")) is got[0]
    assert len(builds) == len(got)


# ---- the LRU -----------------------------------------------------------------------------------------
def test_the_cache_is_a_bounded_lru(builds, fresh_cache):
    fresh_cache.maxsize = 2
    a, b, c = (bm(masks.local(w)) for w in (1, 2, 3))  # c evicts a
    assert len(fresh_cache) == 2 and len(builds) == 3
    assert bm(masks.local(3)) is c and bm(masks.local(2)) is b
    assert bm(masks.local(1)) is not a and len(builds) == 4  # rebuilt; evicts the LRU, local(3)
    assert bm(masks.local(2)) is b
    fresh_cache.maxsize = 1  # shrinking evicts the least recently used
    assert len(fresh_cache) == 1 and bm(masks.local(2)) is b
    info = fresh_cache.info()
    assert (info.size, info.maxsize, info.builds) == (1, 1, 4)
    fresh_cache.clear()
    assert len(fresh_cache) == 0 and fresh_cache.info() == (0, 0, 0, 0, 1)
    assert bm(masks.local(2)) is not b


def test_maxsize_zero_builds_every_time_and_bad_sizes_are_refused(builds, fresh_cache):
    fresh_cache.maxsize = 0
    assert bm(masks.local(3)) is not bm(masks.local(3)) and len(builds) == 2
    for bad in (-1, 1.5, "8", True):
        with pytest.raises(ValueError, match=r"maxsize must be an int >= 0, got"):
            fresh_cache.maxsize = bad
    with pytest.raises(ValueError, match=r"maxsize must be an int >= 0, got -3"):
        BlockMaskCache(maxsize=-3)


def test_build_on_repeat_and_never(builds):
    assert bm(masks.local(3), build="never") is None
    assert bm(masks.local(3), build="on_repeat") is None  # only looking is not asking
    assert len(builds) == 0
    made = bm(masks.local(3), build="on_repeat")  # asked for before: the loop case
    assert made is not None and len(builds) == 1
    assert bm(masks.local(3), build="never") is made
    assert bm(masks.local(4), build="on_repeat") is None and len(builds) == 1
    with pytest.raises(ValueError, match="when must be 'always', 'never' or 'on_repeat', got 'x'"):
        bm(masks.local(3), build="x")


# ---- masks without a value key: by identity ----------------------------------------------------------
def test_dense_masks_are_cached_by_identity(builds):
    t = torch.ones(32, 32, dtype=torch.bool).tril()
    a, b = masks.from_tensor(t), masks.from_tensor(t.clone())
    assert a.cache_key() is None
    assert bm(a) is bm(a)
    assert bm(b) is not bm(a)
    assert len(builds) == 2 and len(masks.block_mask_cache()) == 0  # not in the shared LRU
    # a conjunction with a dense term has no value key either
    assert (masks.causal() & t).cache_key() is None


def test_subclass_without_its_own_key_fields_is_cached_by_identity(builds):
    class Shifted(masks.Local):  # a parameter the parent's key does not know
        def __init__(self, window, shift):
            super().__init__(window)
            self.shift = shift

        def mask_mod(self, b, h, q_idx, kv_idx):
            return super().mask_mod(b, h, q_idx - self.shift, kv_idx)

    a, b = Shifted(3, 0), Shifted(3, 5)
    assert a.cache_key() is None
    assert bm(a) is not bm(b) and bm(a) is bm(a)


def test_tensors_too_large_to_hash_fall_back_to_identity(builds, monkeypatch):
    monkeypatch.setattr(block_cache, "MAX_HASHED_BYTES", 1024)
    edges = torch.randint(0, 64, (2, 300))  # 4800 bytes
    g1, g2 = masks.graph(edges, 64), masks.graph(edges, 64)
    assert tensor_key(edges) is None and g1.cache_key() is None
    assert bm(g1, n=64) is not bm(g2, n=64) and bm(g1, n=64) is bm(g1, n=64)


def test_value_keys():
    assert value_key(3) == 3 and value_key((1, "a", None)) == (1, "a", None)
    assert value_key(object()) is None and value_key([1, object()]) is None
    small = torch.tensor([[1, 2], [3, 4]])
    assert tensor_key(small) == tensor_key(small.double()) != tensor_key(small.view(4))
    big = torch.arange(1000)
    assert tensor_key(big) == tensor_key(big.clone()) != tensor_key(big.int())  # dtype in digest


# ---- auto counts the cost of building ------------------------------------------------------------------
def shape_only(b, h, n, d=64):
    """A problem of this shape without its memory (auto's cost rule reads shapes only)."""
    x = torch.zeros(()).expand(b, h, n, d)
    return Problem(x, x, x, get_score("scaled_dot"), get_normalize("softmax"))


def test_build_cost_rule_on_the_issue_example():
    # local(256) at n = 16384, 8 heads: the compiled build pays off in its first call.
    loc = masks.local(256)
    assert _build_pays_off(shape_only(1, 8, 16384), loc)
    assert not _build_pays_off(shape_only(1, 8, 4096), loc)  # eager: only when the mask repeats
    assert not _build_pays_off(shape_only(1, 1, 16384), loc)  # one head: little to save
    # a mask that reads the batch builds B patterns: the same shapes cost b times more
    pad = masks.causal() & masks.padding([16384] * 4)
    assert _build_pays_off(shape_only(4, 8, 16384), pad)
    assert not _build_pays_off(shape_only(4, 2, 16384), pad)


def pick(mask, n=1024):
    q, k, v = (torch.randn(1, 2, n, 16) for _ in range(3))
    p = Problem(q, k, v, get_score("scaled_dot"), get_normalize("softmax"), mask=mask)
    with torch.no_grad():
        return select_backend(p).name


def test_auto_builds_a_mask_that_comes_again(monkeypatch, fresh_cache):
    monkeypatch.setattr(attnlab.backends, "_FLEX_MIN_KEYS", 128)
    # the loop as users write it: a new, equal mask per call (local(16) at n = 1024: 22 of 64
    # blocks of 128 x 128)
    assert pick(masks.local(16)) == "sdpa"  # building would cost more than it saves, once
    assert fresh_cache.info().builds == 0
    assert pick(masks.local(16)) == "flex"  # it came again: built, cached
    assert pick(masks.local(16)) == "flex" and fresh_cache.info().builds == 1
    assert pick(masks.local(16), n=1536) == "sdpa"  # another shape is another block mask
    # too dense for flex even when cached
    assert pick(masks.causal()) == pick(masks.causal()) == "sdpa"
    # a build that pays off at once
    monkeypatch.setattr(attnlab.backends, "_BUILD_COST_EAGER", 0.1)
    assert pick(masks.local(8)) == "flex"


# ---- the real thing: outputs unchanged ------------------------------------------------------------
@pytest.mark.compile
def test_flex_on_a_shared_block_mask_equals_the_reference(fresh_cache):
    # The shape and kind of a tests/test_backends.py flex case (FLEX_SHAPE): no new compilation.
    b, h, n, d = 2, 2, 320, 16
    q, k, v = (torch.randn(b, h, n, d) for _ in range(3))

    def run(mask):
        p = Problem(q, k, v, get_score("scaled_dot"), get_normalize("softmax"), mask=mask)
        with torch.no_grad():
            out, _, ran = run_backend("flex", p)
        assert ran == "flex"
        return out

    def reference(mask):
        return attend(q.double(), k.double(), v.double(), mask=mask).out.float()

    first = run(masks.causal() & masks.padding([315, 0]))
    again = masks.causal() & masks.padding(torch.tensor([315, 0]))  # equal, built separately
    second = run(again)
    assert fresh_cache.info().builds == 1
    assert torch.equal(first, second)
    torch.testing.assert_close(second, reference(again), atol=2e-6, rtol=1e-5)
    other = masks.causal() & masks.padding([100, 7])  # no collision with the cached one
    torch.testing.assert_close(run(other), reference(other), atol=2e-6, rtol=1e-5)
    assert fresh_cache.info().builds == 2


@pytest.mark.compile  # compiles create_block_mask once (~5 s on CPU)
def test_compiled_builder_equals_the_eager_one(monkeypatch):
    mask = masks.causal() & masks.padding([200, 77])
    eager = mask.block_mask(2, 2, 200, 200, block_size=64)
    masks.block_mask_cache().clear()
    monkeypatch.setattr(block_cache, "COMPILE_MIN_ELEMENTS", 0)
    assert block_cache.uses_compiled_builder(1)
    compiled = mask.block_mask(2, 2, 200, 200, block_size=64)
    assert compiled is not eager
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices"):
        e, c = getattr(eager, name), getattr(compiled, name)
        assert torch.equal(e, c), name


def test_flex_backend_block_mask_passes_build_through(builds):
    q = torch.zeros(1, 1, 32, 8)
    p = Problem(q, q, q, get_score("scaled_dot"), get_normalize("softmax"), mask=masks.local(2))
    assert FlexBackend().block_mask(p, build="never") is None
    assert FlexBackend().block_mask(p) is FlexBackend().block_mask(p, build="never")
    assert len(builds) == 1


def test_bigbird_patterns_key_by_value(builds):
    from attnlab.efficient.bigbird import BigBirdMask, random_blocks

    def pattern(seed):
        table = random_blocks(8, count=2, window=1, globals_=1, seed=seed)
        return BigBirdMask(block=4, window=1, globals_=1, random=table)

    assert pattern(0).cache_key() == pattern(0).cache_key() != pattern(1).cache_key()
    assert bm(pattern(0)) is bm(pattern(0)) and len(builds) == 1
