"""The contract every efficient attention kernel implements, and how masks reach it.

A kernel replaces the exact attention maths of :class:`~attnlab.MultiHeadAttention` on already
projected queries, keys and values::

    out = kernel(q, k, v, mask=mask, q_offset=offset)      # (b, h, i, e)

Approximate kernels cannot honour every mask: a Linformer's sequence projection mixes all keys,
so it cannot be causal; a Performer can be causal (prefix sums) but has no attention matrix to
cut a local window from. :func:`split_mask` splits a mask into the three parts kernels reason
about (key padding, causality, anything else) and :class:`AttentionKernel` rejects, with a
message that says what to use instead, any part a kernel cannot apply. No mask is ever ignored.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from ..masks import Mask, _And, _Causal, _Dense, _Padding, check_mask_tensor, from_tensor

__all__ = [
    "AttentionKernel",
    "MaskParts",
    "split_mask",
    "is_causal",
    "padding_lengths",
    "key_valid_rows",
    "masked_softmax",
]


class MaskParts(NamedTuple):
    """A mask split into what approximate kernels can reason about.

    ``mask`` is the whole mask again (as a :class:`Mask`, or None), for kernels that render it.
    """

    key_valid: Tensor | None  # (b, 1, 1, j) bool, True = a real key; None = every key is real
    causal: bool  # query at position p may attend only to keys j <= p
    rest: Mask | None  # every other constraint (local windows, graphs, dense patterns, ...)
    mask: Mask | None  # the conjunction of all of the above


def _conjuncts(mask: Mask) -> list[Mask]:
    """The terms of ``a & b & ...`` (a mask that is no conjunction is one term)."""
    if isinstance(mask, _And):
        return _conjuncts(mask.left) + _conjuncts(mask.right)
    return [mask]


def _split_dense(t: Tensor, i: int, j: int, q_offset: int):
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

    Conjunctions are taken apart term by term: ``masks.causal()`` sets ``causal``;
    ``masks.padding(lengths)`` and dense tensors that are the same for every query row become
    ``key_valid``; a dense tensor equal to ``tril & key_valid`` counts as both. Anything else
    (``local``, ``graph``, ``global_tokens``, disjunctions, other dense patterns) is ``rest``.

    Args:
        mask: None, a boolean tensor broadcastable to ``(b, h, i, j)``, or a Mask.
        batch, q_len, kv_len: the problem's ``b``, ``i`` and ``j``.
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
    for term in _conjuncts(mask):
        if isinstance(term, _Causal):
            causal = True
            continue
        if isinstance(term, _Padding):
            lengths = term.lengths.to(torch.long)
            valid = torch.arange(kv_len, device=lengths.device) < lengths.view(-1, 1)
            key_valid = _and(key_valid, valid.view(-1, 1, 1, kv_len))
            continue
        if isinstance(term, _Dense):
            found = _split_dense(term.tensor, q_len, kv_len, q_offset)
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


def is_causal(mask: Tensor | Mask | None, *, q_offset: int = 0) -> bool:
    """Whether ``mask`` includes the causal constraint (``masks.causal()`` as a term of a
    conjunction, or a dense ``tril`` pattern)."""
    if mask is None:
        return False
    for term in _conjuncts(from_tensor(mask)):
        if isinstance(term, _Causal):
            return True
        if isinstance(term, _Dense) and term.tensor.dim() >= 2:
            i, j = term.tensor.shape[-2:]
            found = _split_dense(term.tensor, i, j, q_offset)
            if found is not None and found[1]:
                return True
    return False


def padding_lengths(key_valid: Tensor | None) -> Tensor | None:
    """Per-sequence lengths ``(b,)`` if ``key_valid (b, 1, 1, j)`` is a prefix mask, else None."""
    if key_valid is None:
        return None
    kv = key_valid.reshape(key_valid.shape[0], -1)
    lengths = kv.sum(-1)
    prefix = torch.arange(kv.shape[-1], device=kv.device) < lengths.view(-1, 1)
    return lengths if bool((prefix == kv).all()) else None


def key_valid_rows(parts: MaskParts, batch: int, kv_len: int, device: torch.device) -> Tensor:
    """``parts.key_valid`` as ``(b, j)`` bool, True = a real key (all True without padding)."""
    if parts.key_valid is None:
        return torch.ones(batch, kv_len, dtype=torch.bool, device=device)
    return parts.key_valid[:, 0, 0]  # (b, 1, 1, j) -> (b, j)


def masked_softmax(scores: Tensor, allowed: Tensor | None, dim: int = -1) -> Tensor:
    """Softmax in (at least) float32 over allowed entries; rows with none allowed are zeros."""
    s = scores.to(torch.promote_types(scores.dtype, torch.float32))
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(s - m)
    return e / e.sum(dim, keepdim=True).clamp_min(torch.finfo(e.dtype).tiny)


class AttentionKernel(nn.Module):
    """Base class of the efficient kernels.

    Subclasses set :attr:`name`, declare what masks they honour (:attr:`supports_causal`,
    :attr:`supports_structured`), say why they cannot do the rest (:attr:`causal_reason`) and
    implement :meth:`attend`. :meth:`forward` validates shapes, splits the mask, rejects what the
    kernel cannot apply, and zeros the output of queries that may attend to no key.

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
    #: which of q, k, v the kernel reads (MultiHeadAttention's unused projections get no signal)
    reads: str = "qkv"

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
        b, _, i, _ = q.shape
        j = k.shape[2]
        parts = split_mask(mask, batch=b, q_len=i, kv_len=j, q_offset=q_offset, device=q.device)
        self.check_mask(parts)
        out = self.attend(q, k, v, parts, q_offset=q_offset)
        if parts.key_valid is not None:  # a sequence with no real key: zeros, not noise
            out = out.masked_fill(~parts.key_valid.any(-1, keepdim=True), 0.0)
        return out

    def check_mask(self, parts: MaskParts) -> None:
        """Raise ``ValueError`` if the kernel cannot apply every part of the mask."""
        if parts.causal and not self.supports_causal:
            raise ValueError(
                f"{self.name} cannot apply a causal mask: {self.causal_reason}; use "
                "kernel='linear', 'performer' or 'local' for causal attention"
            )
        if parts.rest is not None and not self.supports_structured:
            allowed = "key padding (masks.padding)" + (
                " and causality (masks.causal)" if self.supports_causal else ""
            )
            raise ValueError(
                f"{self.name} cannot apply the mask {parts.rest!r}: it only honours {allowed}. "
                "Use kernel='local', 'longformer', 'bigbird' or 'synthesizer', or exact "
                "attention (kernel=None), for arbitrary masks"
            )

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        """The kernel's maths on validated inputs; ``parts`` holds only what it can apply."""
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
