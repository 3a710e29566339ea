"""FlexAttention block masks, cached by the mask's *value* in a bounded LRU.

A mask is a value: ``masks.local(256)`` built twice is the same mask. Users write
``layer(x, mask=masks.local(256))`` in a loop, a new mask object per call, so a block mask cached
on the object is rebuilt on every call (at ``n = 16384``: 3 s, more than the 0.14 s of the
attention it serves; issue 9). Block masks are therefore cached process-wide under the key

``(mask.cache_key(), B, H, q_len, kv_len, device, block_size)``

where ``B`` / ``H`` are the batch / head counts when the mask reads them, else None (one block
pattern serves all). :meth:`Mask.cache_key` says what a mask's value is:

* built-in kinds key by their parameters; tensors inside (padding lengths, a graph's
  ``edge_index``, global token indices) by their *content*: the values themselves for small
  tensors, a BLAKE2b digest of the bytes up to :data:`MAX_HASHED_BYTES`, and beyond that no
  value key at all;
* a mask without a value key (:class:`~attnlab.masks.Dense`, a class that does not declare its
  :attr:`~attnlab.masks.Mask.key_fields`, a tensor too large to hash) keeps its block masks on
  the object itself: cached by identity, released with the object.

Large block masks are built by the compiled ``create_block_mask`` (one fused pass over the
``(i, j)`` grid instead of an eager dense mask), small ones eagerly; see :func:`build_block_mask`.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

import hashlib
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Literal, NamedTuple

import torch
from torch import Tensor

__all__ = [
    "BlockMaskCache",
    "CacheInfo",
    "block_mask_cache",
    "build_block_mask",
    "uses_compiled_builder",
    "value_key",
    "tensor_key",
    "MAX_HASHED_BYTES",
    "COMPILE_MIN_ELEMENTS",
]

#: tensors inside a mask up to this size key by a digest of their bytes (BLAKE2b reads ~1 GB/s:
#: 16 ms at the limit, per new mask object); larger ones leave the mask keyed by identity
MAX_HASHED_BYTES = 1 << 24
#: tensors up to this many elements key by their values themselves (no hashing at all)
_MAX_LISTED = 256

#: masks of at least this many elements (``B * H * i * j``) are built by the compiled
#: ``create_block_mask``. Measured on CPU (torch 2.13, local(256), 1-2 threads): eager
#: ~16 ns per element (n = 8192: 1.1-1.3 s; n = 16384: 4.3 s), compiled 0.7-1.9 ns
#: (0.05-0.12 s; 0.33-0.49 s), plus ~10 s of compilation once per mask structure and process
#: (and ~3 s once more when the size first changes; then sizes are dynamic). Below 2^26 an eager
#: build costs under ~1 s, which a one-off 10 s compilation would take ~10 builds to repay.
COMPILE_MIN_ELEMENTS = 1 << 26

Build = Literal["always", "never", "on_repeat"]


# ---- value keys ----------------------------------------------------------------------------------
def tensor_key(t: Tensor) -> Hashable | None:
    """A key equal for tensors of equal shape and values (any dtype or device).

    Small tensors (<= 256 elements) key by their values; larger ones by a BLAKE2b digest of their
    bytes (with the dtype); None beyond :data:`MAX_HASHED_BYTES` (the caller falls back to
    identity). Reads a device tensor back to the host once.
    """
    t = t.detach()
    if t.numel() <= _MAX_LISTED:
        return ("tensor", tuple(t.shape), tuple(t.reshape(-1).tolist()))
    if t.numel() * t.element_size() > MAX_HASHED_BYTES:
        return None
    raw = t.reshape(-1).contiguous().view(torch.uint8).cpu().numpy().tobytes()
    digest = hashlib.blake2b(raw, digest_size=16).hexdigest()
    return ("tensor", tuple(t.shape), str(t.dtype), digest)


def value_key(x: object) -> Hashable | None:
    """A hashable key for a mask parameter, or None if it has no cheap value key.

    Numbers, strings and None key as themselves; tensors by :func:`tensor_key`; masks by
    :meth:`~attnlab.masks.Mask.cache_key`; tuples and lists element by element.
    """
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if isinstance(x, Tensor):
        return tensor_key(x)
    cache_key = getattr(x, "cache_key", None)  # a Mask; duck-typed, as masks.base imports us
    if callable(cache_key):
        return cache_key()
    if isinstance(x, (tuple, list)):
        keys = tuple(value_key(e) for e in x)
        return None if any(k is None and e is not None for k, e in zip(keys, x)) else keys
    return None


# ---- building ------------------------------------------------------------------------------------
_compiled_create_block_mask = None
_compiled_failed = False


def uses_compiled_builder(elements: int) -> bool:
    """Whether a block mask over ``elements`` (``B * H * i * j``) is built compiled."""
    return elements >= COMPILE_MIN_ELEMENTS and not _compiled_failed


def build_block_mask(
    mask_mod: Callable,
    batch: int | None,
    heads: int | None,
    q_len: int,
    kv_len: int,
    *,
    device: torch.device | str,
    block_size: int,
):
    """``create_block_mask(mask_mod, batch, heads, q_len, kv_len)``, compiled when large.

    ``torch.compile(create_block_mask)`` is what torch 2.13 recommends instead of the deprecated
    ``create_block_mask(..., _compile=True)``: it evaluates ``mask_mod`` and reduces each block in
    one fused pass, never materialising the ``(B, H, i, j)`` boolean mask. Where compilation fails
    (e.g. no C++ compiler) it warns once and builds eagerly from then on: the block mask is the
    same either way.
    """
    global _compiled_create_block_mask, _compiled_failed
    from torch.nn.attention.flex_attention import create_block_mask

    elements = (batch or 1) * (heads or 1) * q_len * kv_len
    if uses_compiled_builder(elements):
        if _compiled_create_block_mask is None:
            _compiled_create_block_mask = torch.compile(create_block_mask)
        try:
            return _compiled_create_block_mask(
                mask_mod, batch, heads, q_len, kv_len, device=device, BLOCK_SIZE=block_size
            )
        except Exception as err:  # noqa: BLE001 - any compiler failure: the eager path is exact
            _compiled_failed = True
            warnings.warn(
                f"compiled create_block_mask failed ({type(err).__name__}: {err}); building "
                "block masks eagerly from now on",
                RuntimeWarning,
                stacklevel=2,
            )
    return create_block_mask(
        mask_mod, batch, heads, q_len, kv_len, device=device, BLOCK_SIZE=block_size
    )


# ---- the cache -----------------------------------------------------------------------------------
class CacheInfo(NamedTuple):
    """Counters of a :class:`BlockMaskCache` (as ``functools.lru_cache``'s ``cache_info``)."""

    hits: int
    misses: int
    builds: int
    size: int
    maxsize: int


class BlockMaskCache:
    """A bounded least-recently-used cache of block masks.

    Args:
        maxsize: entries kept (>= 0; 0 disables caching: every request builds). A block mask of
            ``B`` sequences, ``H`` heads and ``r = n / block`` blocks per side holds about
            ``16 B H r^2`` bytes (256 KiB for ``B = H = 1`` at ``n = 16384``).

    ``get(key, build, when=...)`` returns the cached block mask or builds it; ``when`` is
    ``"always"`` (build on a miss), ``"never"`` (only look) or ``"on_repeat"`` (build only if the
    same key was asked for ``"on_repeat"`` before: a mask that comes back is worth building, a
    one-off is not). Those keys, asked for but not built, are remembered in a second LRU of
    ``max(4 * maxsize, 16)`` keys.
    """

    def __init__(self, maxsize: int = 16) -> None:
        self._entries: OrderedDict[Hashable, object] = OrderedDict()
        self._asked: OrderedDict[Hashable, None] = OrderedDict()
        self.hits = self.misses = self.builds = 0
        self.maxsize = maxsize

    @property
    def maxsize(self) -> int:
        return self._maxsize

    @maxsize.setter
    def maxsize(self, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"BlockMaskCache: maxsize must be an int >= 0, got {value!r}")
        self._maxsize = value
        self._trim()

    def get(self, key: Hashable, build: Callable[[], object], *, when: Build = "always"):
        """The block mask cached under ``key``, else ``build()`` (see the class docstring for
        ``when``), or None when not built."""
        if when not in ("always", "never", "on_repeat"):
            raise ValueError(f"when must be 'always', 'never' or 'on_repeat', got {when!r}")
        if key in self._entries:
            self._entries.move_to_end(key)
            self.hits += 1
            return self._entries[key]
        self.misses += 1
        if when == "never":
            return None
        if when == "on_repeat" and key not in self._asked:
            self._asked[key] = None
            self._trim()
            return None
        value = build()
        self.builds += 1
        self._asked.pop(key, None)
        if self._maxsize:
            self._entries[key] = value
            self._trim()
        return value

    def _trim(self) -> None:
        while len(self._entries) > self._maxsize:
            self._entries.popitem(last=False)
        while len(self._asked) > max(4 * self._maxsize, 16):
            self._asked.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        self._entries.clear()
        self._asked.clear()
        self.hits = self.misses = self.builds = 0

    def info(self) -> CacheInfo:
        return CacheInfo(self.hits, self.misses, self.builds, len(self._entries), self._maxsize)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"BlockMaskCache({self.info()})"


_CACHE = BlockMaskCache()


def block_mask_cache() -> BlockMaskCache:
    """The process-wide cache of block masks keyed by mask value.

    ``block_mask_cache().maxsize = 64`` resizes it, ``.clear()`` empties it, ``.info()`` counts
    hits, misses and builds.
    """
    return _CACHE
