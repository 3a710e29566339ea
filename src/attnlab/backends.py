"""Exact attention backends: interchangeable ways to compute :func:`attnlab.functional.attend`.

* ``reference``: :func:`~attnlab.functional.attend`, every score and normalisation, returns the
  weights; ``O(i * j)`` memory.
* ``sdpa``: ``F.scaled_dot_product_attention`` (a fused flash kernel on CPU), for dot-product
  scores with softmax.
* ``flex``: FlexAttention under ``torch.compile``, block-sparse for structured masks (skips
  fully masked blocks). Forward only on CPU (PyTorch has no CPU backward for it).
* ``chunked``: exact attention in query x key blocks with an online softmax (Milakov &
  Gimelshein 2018; Rabe & Staats 2021), ``O(i * block)`` memory, for every score and
  normalisation; blocks wholly masked are skipped, and training recomputes each query block in
  the backward pass instead of storing it.

``auto`` (:func:`select_backend`) picks the fastest backend that computes the request exactly.
The layer reaches these through :class:`attnlab.kernels.ExactKernel`, the default attention
kernel, which validates the request, zeroes dead keys and calls :func:`run_backend`. A backend
refuses, with a reason, what it cannot compute: :meth:`Backend.refuses` for what it never
computes (checked when a layer is built), :meth:`Backend.unsupported` for one request.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from .functional import Normalization, Score, attend, key_counts
from .masks import Causal, Dense, Mask
from .masks.block_cache import Build, uses_compiled_builder
from .numerics import at_least_float32, safe_max
from .registry import Registry

__all__ = [
    "Problem",
    "Backend",
    "BACKENDS",
    "ReferenceBackend",
    "SDPABackend",
    "FlexBackend",
    "ChunkedBackend",
    "select_backend",
    "get_backend",
    "run_backend",
    "check_backend_name",
]


@dataclass
class Problem:
    """One attention request, on already projected ``q, k, v`` of shape ``(b, h, n, d)``."""

    q: Tensor
    k: Tensor
    v: Tensor
    score: Score
    normalize: Normalization
    mask: Mask | Tensor | None = None
    bias: Tensor | None = None
    dropout: float = 0.0  # effective probability: 0 unless training
    need_weights: bool = False
    q_offset: int = 0

    @property
    def shape(self) -> tuple[int, int, int, int]:
        b, h, i, _ = self.q.shape
        return b, h, i, self.k.shape[2]

    @property
    def needs_grad(self) -> bool:
        return torch.is_grad_enabled() and any(
            t.requires_grad for t in (self.q, self.k, self.v, self.bias) if t is not None
        )

    def dense_mask(self) -> Tensor | None:
        if self.mask is None or isinstance(self.mask, Tensor):
            return self.mask
        b, h, i, j = self.shape
        return self.mask.dense(b, h, i, j, q_offset=self.q_offset, device=self.q.device)

    def mask_object(self) -> Mask | None:
        """The mask as a :class:`~attnlab.masks.Mask` (a tensor wrapped as ``Dense``)."""
        if self.mask is None or isinstance(self.mask, Mask):
            return self.mask
        return Dense(self.mask)


class Backend:
    """A way to compute a :class:`Problem` exactly.

    :meth:`refuses` says why it can never compute a score with a normalisation (checked once,
    when a layer is built; phrased to follow "backend NAME"); :meth:`unsupported` why it cannot
    compute one request (it includes :meth:`refuses`). Both return None when it can.
    """

    name: str = "?"

    def refuses(self, score: Score, normalize: Normalization) -> str | None:
        return None

    def unsupported(self, p: Problem) -> str | None:
        reason = self.refuses(p.score, p.normalize)
        return None if reason is None else f"it {reason}"

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        raise NotImplementedError


BACKENDS: Registry = Registry("backend")


def _zero_empty_rows(out: Tensor, mask: Tensor | None) -> Tensor:
    """Queries that may attend to no key get zeros (kernels differ: NaN, mean of values, ...)."""
    if mask is None:
        return out
    return out.masked_fill(~mask.any(-1, keepdim=True), 0.0)


@BACKENDS.register("reference")
class ReferenceBackend(Backend):
    name = "reference"

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        out, w = attend(
            p.q, p.k, p.v, score=p.score, normalize=p.normalize, mask=p.mask, bias=p.bias,
            dropout=p.dropout, training=p.dropout > 0, q_offset=p.q_offset,
        )  # fmt: skip
        return out, (w if p.need_weights else None)


@BACKENDS.register("sdpa")
class SDPABackend(Backend):
    name = "sdpa"

    def refuses(self, score: Score, normalize: Normalization) -> str | None:
        if score.fused_scale(1) is None or normalize.name != "softmax":
            return (
                "computes dot-product scores with softmax only; got "
                f"score={score.name!r}, normalize={normalize.name!r}"
            )
        return None

    def unsupported(self, p: Problem) -> str | None:
        reason = super().unsupported(p)
        if reason is None and p.need_weights:
            reason = "it does not return attention weights (need_weights=True)"
        return reason

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        _, _, i, j = p.shape
        scale = p.score.fused_scale(p.q.shape[-1])
        if isinstance(p.mask, Causal) and p.bias is None and p.q_offset == 0 and i == j:
            # is_causal lets the flash kernel skip the upper triangle's blocks.
            out = F.scaled_dot_product_attention(
                p.q, p.k, p.v, dropout_p=p.dropout, is_causal=True, scale=scale
            )
            return out, None
        mask = p.dense_mask()
        attn_mask = mask
        if p.bias is not None:
            bias = p.bias.to(p.q.dtype)
            attn_mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
        out = F.scaled_dot_product_attention(
            p.q, p.k, p.v, attn_mask=attn_mask, dropout_p=p.dropout, scale=scale
        )
        return _zero_empty_rows(out, mask), None


_compiled_flex = None


def _flex_attention():
    """``flex_attention`` compiled once per process (FlexAttention runs on CPU only compiled)."""
    global _compiled_flex
    if _compiled_flex is None:
        from torch.nn.attention.flex_attention import flex_attention

        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex


#: dtypes PyTorch's CPU FlexAttention kernel accepts (float64 fails inside inductor)
_FLEX_CPU_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@BACKENDS.register("flex")
class FlexBackend(Backend):
    name = "flex"
    block_size = 128

    def refuses(self, score: Score, normalize: Normalization) -> str | None:
        return SDPABackend().refuses(score, normalize)

    def unsupported(self, p: Problem) -> str | None:
        reason = SDPABackend().unsupported(p)
        if reason:
            return reason
        if p.dropout > 0:
            return "FlexAttention has no attention dropout"
        if p.bias is not None:
            return "score bias tensors are not routed to flex; use backend='sdpa'"
        if p.q_offset:
            return "incremental decoding (q_offset > 0) is not supported"
        if p.q.device.type == "cpu" and p.needs_grad:
            return "PyTorch's FlexAttention has no backward pass on CPU (use torch.no_grad())"
        if p.q.shape[-1] != p.v.shape[-1]:
            return "value head dim differs from query head dim"
        if p.q.device.type == "cpu" and p.q.dtype not in _FLEX_CPU_DTYPES:
            return f"FlexAttention on CPU supports float32, float16 and bfloat16, not {p.q.dtype}"
        return None

    def block_mask(self, p: Problem, *, build: Build = "always"):
        """The block mask of ``p``'s mask (None without a mask), cached by the mask's value;
        ``build`` as in :meth:`attnlab.masks.Mask.block_mask` (None when not built)."""
        mask = p.mask_object()
        if mask is None:
            return None
        b, h, i, j = p.shape
        return mask.block_mask(
            b, h, i, j, device=p.q.device, block_size=self.block_size, build=build
        )

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        # FlexAttention already returns zeros for queries with no allowed key (its row sum is
        # zero), so no dense O(i * j) clean-up is needed here; tests/test_backends.py checks it.
        scale = p.score.fused_scale(p.q.shape[-1])
        out = _flex_attention()(p.q, p.k, p.v, block_mask=self.block_mask(p), scale=scale)
        return out, None


@BACKENDS.register("chunked")
class ChunkedBackend(Backend):
    """Exact attention in blocks: memory ``O(i * block)`` instead of ``O(i * j)``.

    Args:
        block: query and key block length; default: the largest power of two whose score
            block (``b * h * block^2`` pairs times the score's ``pair_cost``) fits ``budget``
            elements, between 16 and 1024.
        budget: elements per score block when ``block`` is not given.
        tile: deprecated name of ``block``.
    """

    name = "chunked"

    def __init__(
        self, block: int | None = None, budget: int = 1 << 22, *, tile: int | None = None
    ) -> None:
        if tile is not None:
            warnings.warn(
                "ChunkedBackend(tile=...) is deprecated; use block=...",
                DeprecationWarning,
                stacklevel=2,
            )
            block = tile if block is None else block
        if block is not None and (not isinstance(block, int) or block <= 0):
            raise ValueError(f"block must be a positive int or None, got {block!r}")
        self.block, self.budget = block, budget

    @property
    def tile(self) -> int | None:
        """Deprecated name of :attr:`block`."""
        return self.block

    def unsupported(self, p: Problem) -> str | None:
        if p.need_weights:
            return "it does not materialise the attention weights (need_weights=True)"
        return None

    def block_for(self, p: Problem) -> int:
        """The block length for ``p``: :attr:`block`, or the largest that fits the budget."""
        if self.block:
            return self.block
        b, h, _, _ = p.shape
        side = math.isqrt(max(1, self.budget // max(1, b * h * p.score.pair_cost)))
        return max(16, min(1024, 1 << (side.bit_length() - 1)))

    def tile_size(self, p: Problem) -> int:
        """Deprecated name of :meth:`block_for`."""
        warnings.warn(
            "ChunkedBackend.tile_size is deprecated; use block_for", DeprecationWarning, 2
        )
        return self.block_for(p)

    @staticmethod
    def _slice(t: Tensor | None, qs: int, qe: int, ks: int, ke: int) -> Tensor | None:
        if t is None:
            return None
        while t.dim() < 4:
            t = t.unsqueeze(0)
        t = t if t.shape[2] == 1 else t[:, :, qs:qe]
        return t if t.shape[3] == 1 else t[:, :, :, ks:ke]

    def _query_block(self, p: Problem, qs: int, qe: int, q: Tensor, k: Tensor, v: Tensor):
        _, _, _, j = p.shape
        mask = p.mask_object()
        dev, t = q.device, self.block_for(p)
        q_idx = torch.arange(qs + p.q_offset, qe + p.q_offset, device=dev)
        blocks = []
        for ks in range(0, j, t):
            ke = min(ks + t, j)
            m = None if mask is None else mask.evaluate(*p.shape[:2], q_idx, torch.arange(ks, ke, device=dev))  # fmt: skip
            if m is not None and not bool(m.any()):
                continue  # a wholly masked block contributes nothing
            blocks.append((ks, ke, m))
        b, h = q.shape[:2]
        wide = torch.promote_types(v.dtype, torch.float32)
        acc = q.new_zeros(b, h, qe - qs, v.shape[-1], dtype=wide)
        softmax = not p.normalize.elementwise
        if softmax:
            run_max = q.new_full((b, h, qe - qs, 1), float("-inf"), dtype=wide)
            run_sum = q.new_zeros(b, h, qe - qs, 1, dtype=wide)
        else:
            counts = key_counts(None, j, acc)
            if mask is not None:
                counts = sum(m.sum(-1, keepdim=True).to(acc.dtype) for _, _, m in blocks)
                counts = counts if isinstance(counts, Tensor) else acc.new_zeros(1, 1, 1, 1)
        for ks, ke, m in blocks:
            s = p.score(q, k[:, :, ks:ke])  # (b, h, iq, jk)
            bias = self._slice(p.bias, qs, qe, ks, ke)
            s = at_least_float32(s if bias is None else s + bias)
            vt = v[:, :, ks:ke].to(wide)
            if softmax:
                if m is not None:
                    s = s.masked_fill(~m, float("-inf"))
                new_max = torch.maximum(run_max, safe_max(s))  # 0 while nothing is allowed
                e = torch.exp(s - new_max)  # (b, h, iq, jk)
                rescale = torch.exp(run_max - new_max)
                run_sum = run_sum * rescale + e.sum(-1, keepdim=True)
                e = F.dropout(e, p.dropout) if p.dropout > 0 else e
                acc = acc * rescale + e @ vt
                run_max = new_max
            else:
                w = p.normalize.weights(s, counts)
                w = w if m is None else w.masked_fill(~m, 0.0)
                w = F.dropout(w, p.dropout) if p.dropout > 0 else w
                acc = acc + w @ vt
        if softmax:
            acc = acc / run_sum.clamp_min(torch.finfo(acc.dtype).tiny)
        return acc.to(v.dtype)

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        b, h, i, j = p.shape
        mask = p.mask_object()
        if mask is not None:
            # Blocks evaluate the mask piecewise, never via dense(): validate its size once here.
            mask.check(b, i + p.q_offset, j)
        if p.q.numel() == 0 or j == 0:  # an empty batch (or no head): nothing to attend
            return p.q.new_zeros(b, h, i, p.v.shape[-1]), None
        t = self.block_for(p)
        outs = []
        for qs in range(0, i, t):
            qe = min(qs + t, i)
            qt = p.q[:, :, qs:qe]
            if p.needs_grad:
                # Recompute the block in backward: keeps training memory O(i * block) too.
                o = checkpoint(self._query_block, p, qs, qe, qt, p.k, p.v, use_reentrant=False)
            else:
                o = self._query_block(p, qs, qe, qt, p.k, p.v)
            outs.append(o)
        return torch.cat(outs, dim=2), None


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
    """
    b, h, i, j = p.shape
    if p.need_weights:
        return ReferenceBackend()
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
    return ReferenceBackend()


def run_backend(name: str, p: Problem) -> tuple[Tensor, Tensor | None, str]:
    """Run backend ``name`` (or ``"auto"``) on ``p``: ``(out, weights, backend_name)``.

    Backends compute on what they are given: zeroing the keys and values of padding
    (:func:`attnlab.functional.zero_dead_keys`) is the caller's (the kernel's) job.
    """
    backend = select_backend(p) if name == "auto" else get_backend(name)
    reason = backend.unsupported(p)
    if reason is not None:
        raise ValueError(
            f"backend {backend.name!r} cannot compute this request: {reason}. "
            "Use backend='auto' to pick one that can, or 'reference' / 'chunked', which "
            "compute every score and normalization."
        )
    out, weights = backend(p)
    return out, weights, backend.name
