"""Exact attention backends: interchangeable ways to compute :func:`attnlab.functional.attend`.

* ``reference`` (:mod:`.reference`): :func:`~attnlab.functional.attend`, every score and
  normalisation, returns the weights; ``O(i * j)`` memory, so it refuses, before allocating, a
  problem whose scores and weights would not fit in the memory available.
* ``sdpa`` (:mod:`.sdpa`): ``F.scaled_dot_product_attention`` (a fused flash kernel on CPU), for
  dot-product scores with softmax.
* ``flex`` (:mod:`.flex`): FlexAttention under ``torch.compile``, block-sparse for structured
  masks (skips fully masked blocks). Forward only on CPU (PyTorch has no CPU backward for it).
* ``chunked`` (:mod:`.chunked`): exact attention in query x key blocks with an online softmax
  (Milakov & Gimelshein 2018; Rabe & Staats 2021), ``O(i * block)`` memory, for every score and
  normalisation; blocks wholly masked are skipped, and training recomputes each query block in
  the backward pass instead of storing it.
* ``edges`` (:mod:`.edges`): attention under a graph mask (``masks.graph``) on the edge list, a
  segment softmax over each node's incoming edges, ``O(E * h)`` memory (maths in
  :mod:`.edge_ops`), for every score and normalisation.

``auto`` (:func:`select_backend`, in this file) picks the fastest backend that computes the
request exactly. The layer reaches these through :class:`attnlab.kernels.ExactKernel`, the
default attention kernel, which validates the request, zeroes dead keys and calls
:func:`run_backend`. A backend refuses, with a reason, what it cannot compute:
:meth:`Backend.refuses` for what it never computes (checked when a layer is built),
:meth:`Backend.unsupported` for one request. The request, the protocol and the registry live in
:mod:`.base`.

The choice of a backend (by name or ``auto``) lives here, at the package's entry, rather than in
a submodule: its thresholds are module attributes (``attnlab.backends._FLEX_MIN_KEYS``, ...) that
tests and benchmarks set.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

import warnings

from torch import Tensor

from ..masks import Dense, Mask
from ..masks.block_cache import uses_compiled_builder
from .base import BACKENDS, Backend, Problem

# Importing a backend's module registers it in BACKENDS (listed by name, sorted).
from .chunked import ChunkedBackend
from .edges import EdgeListBackend, edges_pay_off
from .flex import FlexBackend, FlexRecompileLimit
from .reference import ReferenceBackend
from .sdpa import SDPABackend

__all__ = [
    "Problem",
    "Backend",
    "BACKENDS",
    "ReferenceBackend",
    "SDPABackend",
    "FlexBackend",
    "ChunkedBackend",
    "EdgeListBackend",
    "select_backend",
    "get_backend",
    "run_backend",
    "check_backend_name",
]


def check_backend_name(name: str) -> str:
    """``name`` if it is ``"auto"`` or a registered backend, else a ``ValueError`` listing the
    valid choices."""
    if name != "auto" and name not in BACKENDS:
        raise ValueError(
            f"unknown backend {name!r}; valid choices: auto, {', '.join(BACKENDS.names())}"
        )
    return name


def get_backend(name: str) -> Backend:
    """The backend registered as ``name`` (an unknown name lists the valid ones)."""
    if name == "auto":
        raise ValueError("'auto' is resolved per call by select_backend()")
    return BACKENDS.get(name)()


#: below this many score elements, the reference path is as fast as blocking and returns weights
_CHUNK_THRESHOLD = 1 << 24
#: flex pays a compile and a block-mask build; worth it only for long, sparse problems
_FLEX_MIN_KEYS = 2048
_FLEX_MAX_DENSITY = 0.5

# What a block mask costs to build, in units of what one score costs the dense path (SDPA on a
# dense boolean mask, head dim 64, rendering the mask included), per mask element (B * H * i * j,
# B and H only when the mask reads them). Measured with local(256) on CPU, torch 2.13:
#   eager create_block_mask       ~16 ns/element here (1-2 threads; n = 4096: 0.3 s, n = 16384:
#                                 4.3 s); ~11 ns on issue 9's machine (~2.9 s at n = 16384)
#   compiled create_block_mask    0.7-1.9 ns/element (n = 8192: 0.05-0.12 s, n = 16384:
#                                 0.33-0.49 s), used from 2^26 elements (masks.block_cache)
#   dense-mask SDPA               ~6 ns/score here at 1 thread (n = 2048-4096, 8 heads);
#                                 ~1.1 ns on issue 9's machine (2.4 s at n = 16384, 8 heads)
# The eager build gains little from threads while SDPA gains a lot, so take the pessimistic
# ends: an eager build costs ~10 scores per element, a compiled one ~1.5.
_BUILD_COST_EAGER = 10.0
_BUILD_COST_COMPILED = 1.5
#: a build that costs at most this share of the dense path pays off in the call that makes it
#: (flex then runs at block density <= _FLEX_MAX_DENSITY on the rest)
_BUILD_SHARE = 0.5


def _build_pays_off(p: Problem, mask: Mask) -> bool:
    """Whether building ``mask``'s block mask for ``p`` is cheaper than half the dense path.

    E.g. local(256) at n = 16384, 1 sequence, 8 heads: 2.7e8 elements, built compiled at ~1.5
    scores each (0.4e9) against 0.5 * 2.1e9 dense scores: build at once, then ~0.14 s per call
    (issue 9) instead of 2.4 s. The same at n = 4096: 1.7e7 elements, eager, 1.7e8 against 0.7e8:
    not for one call; if the same mask comes again it is built then ("on_repeat").
    """
    b, h, i, j = p.shape
    elements = (b if mask.uses_batch else 1) * (h if mask.uses_heads else 1) * i * j
    per = _BUILD_COST_COMPILED if uses_compiled_builder(elements) else _BUILD_COST_EAGER
    return elements * per <= _BUILD_SHARE * b * h * i * j


def select_backend(p: Problem) -> Backend:
    """``auto``: the fastest backend that computes ``p`` exactly.

    Flex runs for long problems (``j >= 2048``) under a structured mask whose block density is
    at most 0.5, when its block mask is cached, when building it pays off in this call
    (:func:`_build_pays_off`), or when the same mask (by value) was asked for before: a loop that
    builds ``masks.local(256)`` on every call gets flex from its second call on.

    A graph mask (``masks.graph``) runs on the edge list (``edges``) when its edges cover at
    most 3% of the ``i * j`` pairs or its dense mask would pass 2^28 pairs
    (:func:`~attnlab.backends.edges.edges_pay_off`), unless the weights or a bias are asked for.

    Scores other than dot-product softmax run on ``chunked`` from 2^24 pairs, and below that
    on ``reference`` unless its scores would not fit in memory. With the weights asked for,
    ``reference`` it is, which refuses, naming the alternatives, what would not fit.
    """
    b, h, i, j = p.shape
    if p.need_weights:
        return ReferenceBackend()
    if edges_pay_off(p):
        return EdgeListBackend()
    if SDPABackend().unsupported(p) is None:
        mask = p.mask
        if isinstance(mask, Mask) and not isinstance(mask, Dense) and j >= _FLEX_MIN_KEYS:
            flex = FlexBackend()
            if flex.unsupported(p) is None:
                build = "always" if _build_pays_off(p, mask) else "on_repeat"
                block_mask = flex.block_mask(p, build=build)
                if block_mask is not None:
                    density = 1.0 - block_mask.sparsity() / 100.0
                    if density <= _FLEX_MAX_DENSITY:
                        return flex
        return SDPABackend()
    if b * h * i * j >= _CHUNK_THRESHOLD:
        return ChunkedBackend()
    reference = ReferenceBackend()  # faster on short problems, unless they do not fit
    return reference if reference.unsupported(p) is None else ChunkedBackend()


def run_backend(name: str, p: Problem) -> tuple[Tensor, Tensor | None, str]:
    """Run backend ``name`` (or ``"auto"``) on ``p``: ``(out, weights, backend_name)``.

    Backends compute on what they are given: zeroing the keys and values of padding
    (:func:`attnlab.functional.zero_dead_keys`) is the caller's (the kernel's) job.
    """
    backend = select_backend(p) if name == "auto" else get_backend(name)
    reason = backend.unsupported(p)
    if reason is not None:
        # auto refuses only what no backend computes: the weights, by the reference path, of
        # a problem whose scores do not fit in memory.
        chosen = " (auto's choice: the weights were asked for)" if name == "auto" else ""
        raise ValueError(
            f"backend {backend.name!r}{chosen} cannot compute this request: {reason}. "
            f"{backend.advice(p)}"
        )
    if not backend.takes_pair_bias:
        p = p.with_dense_bias()
    try:
        out, weights = backend(p)
    except FlexRecompileLimit as err:
        if name != "auto":
            raise
        warnings.warn(f"{err}: auto runs sdpa instead", stacklevel=2)
        backend = SDPABackend()
        out, weights = backend(p)
    return out, weights, backend.name
