"""The reference backend refuses, before allocating, a problem whose scores and weights would not
fit in memory (issue 32), naming the shape, the bytes, the memory available and the backends
that can compute it; a problem that fits always runs.

Nothing big is allocated here: the available memory is patched to a small number and the
problems are moderate (their q, k, v a few hundred KiB; the refusal precedes the scores).
"""

from __future__ import annotations

import pytest
import torch

from attnlab import MultiHeadAttention
from attnlab.backends import Problem, ReferenceBackend, reference, run_backend, select_backend
from attnlab.functional import get_normalize, get_score, make_score

pytestmark = pytest.mark.usefixtures("single_thread")

MIB = 1 << 20
#: (1, 8, 1024, 1024) float32 scores and weights: 64 MiB, the smallest size checked
MODERATE = (1, 8, 1024, 8)


def problem(shape=MODERATE, *, score="scaled_dot", normalize="softmax", dtype=torch.float32, **kw):
    b, h, n, d = shape
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, h, n, d, dtype=dtype, generator=g) for _ in range(3))
    sc = make_score(score, head_dim=d, heads=h).to(dtype) if score == "additive" else get_score(score)  # fmt: skip
    return Problem(q, k, v, sc, get_normalize(normalize), **kw)


@pytest.fixture
def free(monkeypatch):
    """Set the memory the backend sees as available (bytes); every size is then checked."""

    def set_free(nbytes: int | None) -> None:
        monkeypatch.setattr(reference, "available_memory", lambda device: nbytes)

    monkeypatch.setattr(reference, "_MEMORY_CHECK_MIN_BYTES", 0)
    return set_free


def refusal(name: str, p: Problem) -> str:
    with pytest.raises(ValueError) as err:
        run_backend(name, p)
    text = str(err.value)
    assert "\n" not in text
    return text


def test_dense_bytes_is_scores_plus_weights():
    p = problem()
    assert reference.dense_bytes(p).bytes == 8 * 1024 * 1024 * (4 + 4)
    assert reference.dense_bytes(problem(dtype=torch.float64)).bytes == 8 * 1024**2 * 16
    assert reference.dense_bytes(problem(dtype=torch.bfloat16)).bytes == 8 * 1024**2 * (2 + 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # scores in bf16, weights in float32
        assert reference.dense_bytes(p).bytes == 8 * 1024**2 * (2 + 4)
    additive = reference.dense_bytes(problem(score="additive"))  # (b, h, i, j, a), a = d = 8
    assert additive.bytes == 8 * 1024**2 * 8 * 4 and "hidden layer of score 'additive'" in additive.what  # fmt: skip


def test_named_reference_refuses_what_does_not_fit(free):
    free(MIB)
    text = refusal("reference", problem())
    assert text.startswith("backend 'reference' cannot compute this request: ")
    assert "(b, h, i, j) = (1, 8, 1024, 1024)" in text
    assert "at least 64.0 MiB for the scores and weights (torch.float32)" in text
    assert "1.0 MiB are available on cpu" in text
    assert "backend='sdpa' (fused, memory linear in n" in text and "'chunked' (every score" in text  # fmt: skip
    assert "or 'auto', which picks one that fits." in text
    # the generic advice would send the caller back to 'reference': not here
    assert "'reference' / 'chunked'" not in text


def test_auto_with_the_weights_says_why_and_what_to_do(free):
    free(MIB)
    text = refusal("auto", problem(need_weights=True))
    assert text.startswith("backend 'reference' (auto's choice: the weights were asked for) ")
    assert "No other backend returns the weights: ask without need_weights=True" in text
    assert "Use backend='auto' to pick" not in text


def test_without_sdpa_only_chunked_is_offered(free):
    free(MIB)
    text = refusal("reference", problem(normalize="relu"))
    assert "'chunked'" in text and "'sdpa'" not in text


def test_the_layer_raises_it_too(free):
    free(MIB)
    layer = MultiHeadAttention(64, 8, backend="reference")
    with pytest.raises(ValueError, match=r"\(1, 8, 1024, 1024\) it needs at least 64\.0 MiB"):
        layer(torch.randn(1, 1024, 64))


def test_auto_without_the_weights_runs_elsewhere(free):
    free(MIB)
    assert run_backend("auto", problem())[2] == "sdpa"
    # a short problem with another score, which auto gives the reference path, goes chunked
    p = problem((1, 2, 16, 8), score="additive")
    free(1024)  # its (1, 2, 16, 16, 8) hidden layer: 16 KiB
    assert select_backend(p).name == "chunked"
    out, _, name = run_backend("auto", p)
    torch.testing.assert_close(out, ReferenceBackend()(p)[0])


def test_a_problem_that_fits_runs(free):
    p = problem((1, 2, 16, 8), need_weights=True)
    free(reference.dense_bytes(p).bytes)  # exactly enough: the estimate is a lower bound
    out, weights, name = run_backend("reference", p)
    assert name == "reference" and weights.shape == (1, 2, 16, 16)
    assert run_backend("auto", p)[2] == "reference"


def test_no_check_where_the_memory_cannot_be_read(free):
    free(None)
    assert ReferenceBackend().unsupported(problem()) is None


def test_small_problems_are_not_checked(monkeypatch):
    """Below 64 MiB the free memory is not even read (it costs ~30 us a call)."""

    def unread(device):
        raise AssertionError("available_memory read for a small problem")

    monkeypatch.setattr(reference, "available_memory", unread)
    assert ReferenceBackend().unsupported(problem((1, 2, 64, 8))) is None


def test_available_memory_on_cpu():
    got = reference.available_memory(torch.device("cpu"))
    assert got is None or got > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_the_estimate_is_a_lower_bound_on_cuda():
    dev = torch.device("cuda")
    p = problem((2, 4, 512, 16), need_weights=True)
    p.q, p.k, p.v = p.q.to(dev), p.k.to(dev), p.v.to(dev)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats(dev)
    start = torch.cuda.memory_allocated(dev)
    out, weights = ReferenceBackend()(p)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated(dev) - start >= reference.dense_bytes(p).bytes
    assert reference.available_memory(dev) > 0
