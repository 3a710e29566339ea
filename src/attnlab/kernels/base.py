"""The one protocol for attention maths: a kernel maps projected ``q, k, v`` and a mask to the
attention output.

:class:`~attnlab.MultiHeadAttention` owns projections and heads and holds exactly one kernel
(as x-transformers' ``Attention`` holds one ``Attend``): the exact maths
(:class:`~attnlab.kernels.ExactKernel`, the default, with its backends and ``auto`` inside) or
an efficient approximation (:mod:`attnlab.efficient`). It makes one call::

    out, weights, ran = run_kernel(kernel, q, k, v, mask=mask, bias=bias, q_offset=offset,
                                   need_weights=need_weights)

Kernels refuse, with a reason, what they cannot compute: a score / normalisation / backend
combination when the layer is built, a mask, a score bias or the weights on the call that asks
for them. No mask is ever ignored. Approximate kernels cannot honour every mask: a Linformer's
sequence projection mixes all keys, so it cannot be causal; a Performer can be causal (prefix
sums) but has no attention matrix to cut a local window from. :func:`split_mask` splits a mask
into the three parts kernels reason about (key padding, causality, anything else) and
:class:`AttentionKernel` rejects, with a message that says what to use instead, any part a
kernel cannot apply.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim.
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple, Protocol

import torch
from torch import Tensor, nn

from ..masks import Causal, Dense, Mask, Padding, check_mask_tensor, from_tensor
from ..numerics import zero_dead_keys
from .cache import KVCache

__all__ = [
    "AttentionKernel",
    "KernelModule",
    "KernelOutput",
    "MaskParts",
    "split_mask",
    "split_dense",
    "run_kernel",
]


class KernelOutput(NamedTuple):
    out: Tensor  # (b, h, i, e)
    weights: Tensor | None  # (b, h, i, j), when asked for and the kernel forms them
    ran: str  # what computed it: an efficient kernel's name, or the exact backend that ran


class KernelModule(Protocol):
    """The least a kernel module must be: a ``name`` and
    ``forward(q, k, v, *, mask=None, q_offset=0) -> (b, h, i, e)``. Subclass
    :class:`AttentionKernel` for mask checks, padding handling and the richer
    :meth:`AttentionKernel.attention` call."""

    name: str

    def __call__(
        self, q: Tensor, k: Tensor, v: Tensor, *, mask: Tensor | Mask | None, q_offset: int
    ) -> Tensor: ...


class MaskParts(NamedTuple):
    """A mask split into what approximate kernels can reason about.

    ``mask`` is the whole mask again (as a :class:`Mask`, or None), for kernels that render it.
    """

    key_valid: Tensor | None  # (b, 1, 1, j) bool, True = a real key; None = every key is real
    causal: bool  # query at position p may attend only to keys j <= p
    rest: Mask | None  # every other constraint (local windows, graphs, dense patterns, ...)
    mask: Mask | None  # the conjunction of all of the above


def split_dense(t: Tensor, i: int, j: int, q_offset: int):
    """A dense ``(.., i, j)`` mask as ``(key_valid, causal)`` if it is one, else None."""
    while t.dim() < 4:
        t = t.unsqueeze(0)
    if t.shape[1] != 1 and not bool((t == t[:, :1]).all()):
        return None  # differs per head
    t = t[:, :1]  # (b, 1, i or 1, j)
    if t.shape[2] == 1 or bool((t == t[:, :, -1:]).all()):
        return t[:, :, -1:].expand(-1, -1, -1, j), False  # every row the same: key padding
    rows = torch.arange(q_offset, q_offset + i, device=t.device).view(-1, 1)
    tri = rows >= torch.arange(j, device=t.device)  # (i, j) causal
    last = t[:, :, -1:]  # the last query sees every earlier key: its row is the key padding
    if rows[-1, 0] >= j - 1 and bool((t == (tri & last)).all()):
        return last.expand(-1, -1, -1, j), True
    return None


def split_mask(
    mask: Tensor | Mask | None,
    *,
    batch: int,
    q_len: int,
    kv_len: int,
    q_offset: int = 0,
    device: torch.device | str | None = None,
) -> MaskParts:
    """Split ``mask`` (True = may attend) into key padding, causality and the rest.

    Conjunctions are taken apart term by term (:meth:`Mask.conjuncts`): ``masks.causal()`` sets
    ``causal``; ``masks.padding(lengths)`` and dense tensors that are the same for every query
    row become ``key_valid``; a dense tensor equal to ``tril & key_valid`` counts as both.
    Anything else (``local``, ``graph``, ``global_tokens``, disjunctions, other dense patterns)
    is ``rest``.

    Args:
        mask: None, a boolean tensor broadcastable to ``(b, h, i, j)``, or a Mask.
        batch: the problem's batch size ``b``.
        q_len: its number of queries ``i``.
        kv_len: its number of keys ``j``.
        q_offset: position of the first query (incremental decoding).
        device: where ``key_valid`` should live (default: where the mask's tensors are).
    """
    if mask is None:
        return MaskParts(None, False, None, None)
    if isinstance(mask, Tensor):
        check_mask_tensor(mask, batch, None, q_len, kv_len)
    mask = from_tensor(mask)
    mask.check(batch, q_len + q_offset, kv_len)
    key_valid, causal, rest = None, False, []
    for term in mask.conjuncts():
        if isinstance(term, Causal):
            causal = True
            continue
        if isinstance(term, Padding):
            live = term.live_keys(batch, kv_len)  # None: no sequence is padded
            key_valid = key_valid if live is None else _and(key_valid, live)
            continue
        if isinstance(term, Dense):
            found = split_dense(term.tensor, q_len, kv_len, q_offset)
            if found is not None:
                key_valid = _and(key_valid, found[0])
                causal = causal or found[1]
                continue
        rest.append(term)
    if key_valid is not None:
        key_valid = key_valid.expand(batch, 1, 1, kv_len).to(device or key_valid.device)
    other = None
    for term in rest:
        other = term if other is None else other & term
    return MaskParts(key_valid, causal, other, mask)


def _and(a: Tensor | None, b: Tensor) -> Tensor:
    return b if a is None else a & b


class AttentionKernel(nn.Module):
    """Base class of attention kernels (the exact one and the efficient approximations).

    Subclasses set :attr:`name`, declare what masks they honour (:attr:`supports_causal`,
    :attr:`supports_structured`), say why they cannot do the rest (:attr:`causal_reason`,
    :attr:`bias_reason`, :attr:`weights_reason`) and implement :meth:`attend`.
    :meth:`attention` validates shapes, splits the mask, rejects what the kernel cannot apply
    (:meth:`unsupported` says why), zeroes the keys and values of padding (a NaN there must not reach a real output) and the
    output of queries that may attend to no key.

    Args:
        dim: model width (``heads * d``).
        heads: number of heads ``h``.

    Shapes:
        - q: ``(b, h, i, d)``; k: ``(b, h, j, d)``; v: ``(b, h, j, e)``
        - mask: None, a boolean tensor broadcastable to ``(b, h, i, j)`` (True = may attend),
          or a :class:`~attnlab.masks.Mask`
        - out: ``(b, h, i, e)``
    """

    name: ClassVar[str] = "?"
    #: honours ``masks.causal()`` (alone or with padding)
    supports_causal: ClassVar[bool] = False
    #: honours any mask (local windows, graphs, dense patterns), not only padding and causality
    supports_structured: ClassVar[bool] = False
    #: why :attr:`supports_causal` is False, completing "<name> cannot apply a causal mask: "
    causal_reason: ClassVar[str] = "it has no attention matrix in which to hide future keys"
    #: why the kernel cannot add a score bias (None: it can)
    bias_reason: ClassVar[str | None] = "it never forms the scores to add a bias to"
    #: why the kernel cannot return attention weights (None: it can)
    weights_reason: ClassVar[str | None] = "it never forms the attention weights"
    #: which of q, k, v the kernel reads (MultiHeadAttention's unused projections get no signal)
    reads: str = "qkv"
    #: :meth:`attend` zeroes padded keys and key-less queries itself (the exact kernel)
    handles_padding: ClassVar[bool] = False

    def __init__(self, *, dim: int, heads: int) -> None:
        super().__init__()
        if not isinstance(heads, int) or heads <= 0 or dim % heads:
            raise ValueError(f"heads must be a positive divisor of dim={dim}, got {heads!r}")
        self.dim, self.heads, self.head_dim = dim, heads, dim // heads

    def forward(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        mask: Tensor | Mask | None = None,
        q_offset: int = 0,
    ) -> Tensor:
        """Attention of ``q`` over ``k, v`` under ``mask``; see the class docstring for shapes."""
        return self.attention(q, k, v, mask=mask, q_offset=q_offset).out

    def attention(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        mask: Tensor | Mask | None = None,
        bias: Tensor | None = None,
        q_offset: int = 0,
        need_weights: bool = False,
    ) -> KernelOutput:
        """:meth:`forward` with what only some kernels can do: an additive score ``bias``
        (broadcastable to ``(b, h, i, j)``) and the attention weights (``need_weights``).
        Returns ``KernelOutput(out, weights, ran)``.

        The one path of every kernel: check the shapes, split the mask (:meth:`mask_parts`),
        refuse what the kernel cannot do (:meth:`unsupported`), zero the keys and values of
        padding, call :meth:`attend`, zero the output of queries with no key. A kernel with
        ``handles_padding`` (the exact one, whose backends do both) skips the zeroing.
        """
        self.check_inputs(q, k, v)
        parts = self.mask_parts(mask, q, k, q_offset)
        reason = self.unsupported(parts, bias=bias is not None, need_weights=need_weights)
        if reason is not None:
            raise ValueError(reason)
        extra: dict[str, Any] = {}  # only what the kernel said it can do (unsupported above)
        if bias is not None:
            extra["bias"] = bias
        if need_weights:
            extra["need_weights"] = True
        if self.handles_padding:
            return _as_output(self.attend(q, k, v, parts, q_offset=q_offset, **extra), self.name)
        k, v = zero_dead_keys(k, v, parts.key_valid)
        out, weights, ran = _as_output(
            self.attend(q, k, v, parts, q_offset=q_offset, **extra), self.name
        )
        if parts.key_valid is not None:  # a sequence with no real key: zeros, not noise
            out = out.masked_fill(~parts.key_valid.any(-1, keepdim=True), 0.0)
        return KernelOutput(out, weights, ran)

    def mask_parts(
        self, mask: Tensor | Mask | None, q: Tensor, k: Tensor, q_offset: int
    ) -> MaskParts:
        """``mask`` checked and split into what the kernel reasons about
        (:func:`split_mask`)."""
        return split_mask(mask, batch=q.shape[0], q_len=q.shape[2], kv_len=k.shape[2],
                          q_offset=q_offset, device=q.device)  # fmt: skip

    # ---- incremental decoding -------------------------------------------------------------
    def new_cache(self) -> Any:
        """An empty cache for causal self-attention decoded a few positions at a time: a
        :class:`~attnlab.kernels.cache.KVCache` (keys and values grow with the length);
        a kernel with an RNN form returns its constant-size state instead."""
        return KVCache()

    def step(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        cache: Any,
        *,
        mask: Tensor | Mask | None = None,
        bias: Tensor | None = None,
        need_weights: bool = False,
    ) -> KernelOutput:
        """Causal self-attention of the new positions ``q, k, v`` after the ``cache.length``
        earlier ones; ``cache`` (from :meth:`new_cache`) is updated in place."""
        if not isinstance(cache, KVCache):
            raise ValueError(
                f"cache: kernel {self.name!r} decodes with a KVCache (its new_cache()), got a "
                f"{type(cache).__name__}; a RecurrentCache needs kernel='linear' (an RNN form)"
            )
        offset = cache.length
        k, v = cache.append(k, v)
        return self.attention(q, k, v, mask=mask, bias=bias, q_offset=offset,
                              need_weights=need_weights)  # fmt: skip

    # ---- checks -------------------------------------------------------------------------------
    def check_inputs(self, q: Tensor, k: Tensor, v: Tensor) -> None:
        if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
            raise ValueError(
                f"{self.name}: expected q, k, v of shape (b, h, n, d); got "
                f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
            )
        if q.shape[1] != self.heads or q.shape[-1] != self.head_dim:
            raise ValueError(
                f"{self.name}: built for {self.heads} heads of size {self.head_dim}, got q of "
                f"shape {tuple(q.shape)}"
            )

    def unsupported(
        self, parts: MaskParts | None = None, *, bias: bool = False, need_weights: bool = False
    ) -> str | None:
        """Why the kernel cannot compute a request with these mask ``parts``, a score ``bias``
        or the weights (a sentence naming the kernel and what to use instead), or None."""
        if need_weights and self.weights_reason is not None:
            return (
                f"kernel {self.name!r} does not return attention weights: "
                f"{self.weights_reason}; use exact attention (kernel=None) to see them"
            )
        if bias and self.bias_reason is not None:
            return (
                f"kernel {self.name!r} cannot add a score bias: {self.bias_reason}. A bias= "
                "tensor and score-biasing positional encodings (relative, ALiBi) need exact "
                "attention (kernel=None)"
            )
        if parts is not None and parts.causal and not self.supports_causal:
            return (
                f"{self.name} cannot apply a causal mask: {self.causal_reason}; use "
                "kernel='linear', 'performer' or 'local' for causal attention"
            )
        if parts is not None and parts.rest is not None and not self.supports_structured:
            allowed = "key padding (masks.padding)" + (
                " and causality (masks.causal)" if self.supports_causal else ""
            )
            return (
                f"{self.name} cannot apply the mask {parts.rest!r}: it only honours {allowed}. "
                "Use kernel='local', 'longformer', 'bigbird' or 'synthesizer', or exact "
                "attention (kernel=None), for arbitrary masks"
            )
        return None

    def check_mask(self, parts: MaskParts) -> None:
        """Raise ``ValueError`` if the kernel cannot apply every part of the mask."""
        reason = self.unsupported(parts)
        if reason is not None:
            raise ValueError(reason)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor | KernelOutput:
        """The kernel's maths on validated inputs; ``parts`` holds only what it can apply, and
        the keys and values of padding are already zero (unless ``handles_padding``).

        Returns the output ``(b, h, i, e)``, or a :class:`KernelOutput` for a kernel with more
        to say (the weights, the backend that ran). A kernel that can add a score bias or
        return the weights (``bias_reason`` / ``weights_reason`` None) also takes ``bias=``
        and ``need_weights=``; they are passed only when asked for."""
        raise NotImplementedError

    def check_self_attention(
        self, n: int, kv_len: int, q_offset: int, *, why: str, advice: str | None = None
    ) -> None:
        """Raise ``ValueError`` unless the ``kv_len`` keys are the ``n`` queries' own positions
        (as many keys as queries, no KV cache), for kernels that need that; ``why`` says why."""
        if kv_len != n or q_offset:
            raise ValueError(
                f"{why}: it needs as many keys as queries and no KV cache; got {n} queries, "
                f"{kv_len} keys, q_offset={q_offset}" + (f". {advice}" if advice else "")
            )

    def check_length(self, n: int, max_len: int, what: str = "sequence") -> None:
        if n > max_len:
            raise ValueError(
                f"{self.name} was built for max_len={max_len} and got a {what} of {n}; "
                f"build it with max_len >= {n} (its parameters are sized by max_len)"
            )


def _as_output(result: Tensor | KernelOutput, name: str) -> KernelOutput:
    return result if isinstance(result, KernelOutput) else KernelOutput(result, None, name)


def run_kernel(
    kernel: AttentionKernel | KernelModule,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    mask: Tensor | Mask | None = None,
    bias: Tensor | None = None,
    q_offset: int = 0,
    need_weights: bool = False,
    cache: Any = None,
) -> KernelOutput:
    """The one call a layer makes: ``kernel``'s :meth:`AttentionKernel.attention` (with a
    self-attention ``cache``, :meth:`AttentionKernel.step`), or, for a plain kernel module
    (:class:`KernelModule`), its forward, refusing a bias or weights."""
    if isinstance(kernel, AttentionKernel):
        if cache is not None:
            return kernel.step(q, k, v, cache, mask=mask, bias=bias, need_weights=need_weights)
        return kernel.attention(
            q, k, v, mask=mask, bias=bias, q_offset=q_offset, need_weights=need_weights
        )
    if cache is not None:
        q_offset = cache.length
        k, v = cache.append(k, v)
    name = getattr(kernel, "name", type(kernel).__name__)
    if need_weights or bias is not None:
        what = "return attention weights" if need_weights else "add a score bias"
        raise ValueError(
            f"kernel {name!r} cannot {what}: it is a plain module (subclass "
            "attnlab.kernels.AttentionKernel to declare what it can do); use exact attention "
            "(kernel=None)"
        )
    return KernelOutput(kernel(q, k, v, mask=mask, q_offset=q_offset), None, name)
