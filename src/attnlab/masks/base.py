"""The mask protocol: :class:`Mask` and its composition (:class:`And`, :class:`Or`), a plain
tensor as a mask (:class:`Dense`), and the checks every entry point shares.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import ClassVar

import torch
from torch import Tensor

from .block_cache import BlockMaskCache, Build, block_mask_cache, build_block_mask, value_key

__all__ = [
    "Mask",
    "Binary",
    "And",
    "Or",
    "Dense",
    "from_tensor",
    "live_keys",
    "check_mask",
    "check_mask_tensor",
    "check_pair_shape",
]


class Mask:
    """A boolean attention mask defined by :meth:`mask_mod` (True = may attend).

    Subclasses implement :meth:`mask_mod` with tensor operations only, so that the same code
    runs on broadcast index grids (dense rendering) and under ``vmap`` (FlexAttention).
    """

    #: whether :meth:`mask_mod` reads its ``b`` argument (e.g. per-sequence lengths)
    uses_batch: bool = False
    #: whether :meth:`mask_mod` reads its ``h`` argument (e.g. a per-head dense tensor)
    uses_heads: bool = False
    #: the attributes :meth:`mask_mod` depends on, which make up :meth:`cache_key`; None (the
    #: default, and for a subclass that does not declare its own) means no value key
    key_fields: ClassVar[tuple[str, ...] | None] = None

    def mask_mod(self, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        raise NotImplementedError

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        """Raise ``ValueError`` if the mask cannot describe this problem size."""

    # ---- structure ----------------------------------------------------------------------------
    def conjuncts(self) -> tuple[Mask, ...]:
        """The terms of ``a & b & ...``, flattened; a mask that is no conjunction is one term."""
        return (self,)

    def live_keys(self, batch: int, kv_len: int) -> Tensor | None:
        """Keys that some query may attend to, boolean broadcastable to ``(b, h, 1, j)``.

        ``None`` means no key is known to be dead. Kernels zero the keys and values of dead keys
        (padding) before attending, so that a NaN there cannot reach a real output through
        ``0 * NaN``. Only :class:`Padding` and :class:`Dense` know dead keys; a conjunction
        knows those of its terms.
        """
        return None

    # ---- renderings -------------------------------------------------------------------------
    def evaluate(self, batch: int, heads: int, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        """The mask at the given query / key positions, broadcastable to ``(b, h, i, j)``.

        ``q_idx`` and ``kv_idx`` are 1-D position vectors (e.g. a block ``arange(s, e)``).
        """
        device = q_idx.device
        b = torch.arange(batch, device=device).view(-1, 1, 1, 1)  # (b, 1, 1, 1)
        h = torch.arange(heads, device=device).view(1, -1, 1, 1)  # (1, h, 1, 1)
        m = self.mask_mod(b, h, q_idx.view(1, 1, -1, 1), kv_idx.view(1, 1, 1, -1))
        m = torch.as_tensor(m, device=device)
        while m.dim() < 4:
            m = m.unsqueeze(0)
        return m.to(torch.bool)

    def dense(
        self,
        batch: int,
        heads: int,
        q_len: int,
        kv_len: int,
        *,
        q_offset: int = 0,
        device: torch.device | str | None = None,
    ) -> Tensor:
        """Dense boolean mask broadcastable to ``(batch, heads, q_len, kv_len)``.

        ``q_offset`` shifts query positions (incremental decoding: the new queries come after
        ``q_offset`` cached keys).
        """
        self.check(batch, q_len + q_offset, kv_len)
        q_idx = torch.arange(q_offset, q_offset + q_len, device=device)
        kv_idx = torch.arange(kv_len, device=device)
        return self.evaluate(batch, heads, q_idx, kv_idx)

    def block_mask(
        self,
        batch: int,
        heads: int,
        q_len: int,
        kv_len: int,
        *,
        device: torch.device | str = "cpu",
        block_size: int = 128,
        build: Build = "always",
    ):
        """A FlexAttention ``BlockMask`` for this problem size, cached by the mask's value.

        Masks with a value key (:meth:`cache_key`) share the process-wide LRU
        (:func:`~attnlab.masks.block_mask_cache`): ``local(3)`` built twice gets one block mask.
        Masks without one cache on the object (by identity). ``build`` says what a miss does:
        ``"always"`` builds, ``"never"`` returns None, ``"on_repeat"`` builds only when the same
        block mask was asked for before (:class:`~attnlab.masks.BlockMaskCache`). Large block
        masks are built compiled (:func:`~attnlab.masks.block_cache.build_block_mask`).
        """
        self.check(batch, q_len, kv_len)
        b = batch if self.uses_batch else None
        h = heads if self.uses_heads else None  # else the block sparsity of head 0 serves all
        value = self.cache_key()
        shape = (b, h, q_len, kv_len, str(torch.device(device)), block_size)
        if value is None:
            cache = self.__dict__.get("_block_masks")
            if cache is None:
                cache = self.__dict__["_block_masks"] = BlockMaskCache(maxsize=8)
            key: Hashable = shape
        else:
            cache, key = block_mask_cache(), (value, *shape)

        def create():
            # A plain 4-argument function: FlexAttention tells mask_mod from score_mod by
            # counting positional arguments, and a bound method's code counts ``self`` too.
            def mask_mod(b, h, q_idx, kv_idx):
                return self.mask_mod(b, h, q_idx, kv_idx)

            return build_block_mask(
                mask_mod, b, h, q_len, kv_len, device=device, block_size=block_size
            )

        return cache.get(key, create, when=build)

    # ---- value --------------------------------------------------------------------------------
    def cache_key(self) -> Hashable | None:
        """The mask's value as a hashable key (equal masks, equal keys), or None.

        ``(type(self), *values of key_fields)``, each value by
        :func:`~attnlab.masks.block_cache.value_key` (tensors by content). None, so that block
        masks are cached on the object (by identity), when the class does not declare
        :attr:`key_fields` itself (a subclass may add parameters its parent's key would miss)
        or a field has no cheap value key (a tensor over
        :data:`~attnlab.masks.block_cache.MAX_HASHED_BYTES`). Computed once per object: masks
        are values, not to be modified after they are built.
        """
        if "_cache_key" not in self.__dict__:
            fields = type(self).__dict__.get("key_fields")
            key = None
            if fields is not None:
                values = tuple(value_key(getattr(self, f)) for f in fields)
                if not any(
                    v is None and getattr(self, f) is not None for v, f in zip(values, fields)
                ):
                    key = (type(self), *values)
            self.__dict__["_cache_key"] = key
        return self.__dict__["_cache_key"]

    # ---- composition ------------------------------------------------------------------------
    def __and__(self, other: Mask | Tensor) -> Mask:
        return And(self, from_tensor(other))

    def __or__(self, other: Mask | Tensor) -> Mask:
        return Or(self, from_tensor(other))

    __rand__ = __and__
    __ror__ = __or__


class Binary(Mask):
    """Two masks combined element-wise (base of :class:`And` and :class:`Or`)."""

    symbol = "?"

    def __init__(self, left: Mask, right: Mask) -> None:
        self.left, self.right = left, right
        self.uses_batch = left.uses_batch or right.uses_batch
        self.uses_heads = left.uses_heads or right.uses_heads

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        self.left.check(batch, q_len, kv_len)
        self.right.check(batch, q_len, kv_len)

    def __repr__(self) -> str:
        return f"({self.left!r} {self.symbol} {self.right!r})"


class And(Binary):
    """``left & right``: allowed where both allow."""

    symbol = "&"
    key_fields = ("left", "right")

    def mask_mod(self, b, h, q_idx, kv_idx):
        return self.left.mask_mod(b, h, q_idx, kv_idx) & self.right.mask_mod(b, h, q_idx, kv_idx)

    def conjuncts(self) -> tuple[Mask, ...]:
        return self.left.conjuncts() + self.right.conjuncts()

    def live_keys(self, batch: int, kv_len: int) -> Tensor | None:
        left, right = self.left.live_keys(batch, kv_len), self.right.live_keys(batch, kv_len)
        if left is None or right is None:
            return right if left is None else left
        return left & right


class Or(Binary):
    """``left | right``: allowed where either allows."""

    symbol = "|"
    key_fields = ("left", "right")

    def mask_mod(self, b, h, q_idx, kv_idx):
        return self.left.mask_mod(b, h, q_idx, kv_idx) | self.right.mask_mod(b, h, q_idx, kv_idx)

    def live_keys(self, batch: int, kv_len: int) -> Tensor | None:
        left, right = self.left.live_keys(batch, kv_len), self.right.live_keys(batch, kv_len)
        return None if left is None or right is None else left | right


class Dense(Mask):
    """A plain boolean tensor, broadcastable to ``(b, h, i, j)``, seen as a mask object.

    No value key: its block masks are cached by identity, on the object. Hashing an ``(i, j)``
    tensor costs a pass over it on every new mask, as much as rebuilding, and the tensor may be
    changed in place after the mask is built.
    """

    key_fields = None

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor
        self.uses_batch = tensor.dim() == 4 and tensor.shape[0] > 1
        self.uses_heads = tensor.dim() == 4 and tensor.shape[1] > 1

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        check_mask_tensor(self.tensor, batch, None, q_len, kv_len)

    def mask_mod(self, b, h, q_idx, kv_idx):
        t = self._as_4d()
        t = t.to(q_idx.device)
        # Broadcast dimensions of size 1 index at 0.
        idx = [x if n > 1 else torch.zeros_like(x) for x, n in zip((b, h, q_idx, kv_idx), t.shape)]
        return t[idx[0], idx[1], idx[2], idx[3]]

    def evaluate(self, batch: int, heads: int, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        t = self._as_4d()
        if t.shape[2] > 1:
            t = t.index_select(2, q_idx.to(t.device))
        if t.shape[3] > 1:
            t = t.index_select(3, kv_idx.to(t.device))
        return t

    def live_keys(self, batch: int, kv_len: int) -> Tensor | None:
        t = self._as_4d()
        return t if t.shape[2] == 1 else t.any(2, keepdim=True)  # (b, h, 1, j)

    def _as_4d(self) -> Tensor:
        t = self.tensor
        while t.dim() < 4:
            t = t.unsqueeze(0)
        return t

    def __repr__(self) -> str:
        return f"tensor_mask(shape={tuple(self.tensor.shape)})"


def from_tensor(mask: Mask | Tensor) -> Mask:
    """Wrap a plain boolean tensor (True = may attend) as a :class:`Mask`."""
    if isinstance(mask, Mask):
        return mask
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a Mask or a boolean tensor, got {type(mask).__name__}")
    check_mask_tensor(mask)
    return Dense(mask)


def live_keys(mask: Mask | Tensor | None, batch: int, kv_len: int) -> Tensor | None:
    """:meth:`Mask.live_keys` of ``mask`` (a Mask, a boolean tensor or None)."""
    if mask is None:
        return None
    return from_tensor(mask).live_keys(batch, kv_len)


def check_mask(
    mask: Mask | Tensor | None,
    batch: int,
    heads: int | None,
    q_len: int,
    kv_len: int,
    *,
    q_offset: int = 0,
) -> None:
    """Validate ``mask`` (None, a boolean tensor or a :class:`Mask`) for a problem of
    ``batch`` sequences, ``q_len`` queries from position ``q_offset`` and ``kv_len`` keys."""
    if mask is None:
        return
    if isinstance(mask, Tensor):
        check_mask_tensor(mask, batch, heads, q_len, kv_len)
    elif isinstance(mask, Mask):
        mask.check(batch, q_len + q_offset, kv_len)
    else:
        raise ValueError(
            f"mask must be a boolean tensor or an attnlab.masks.Mask, got {type(mask).__name__}"
        )


def check_mask_tensor(
    mask: Tensor,
    batch: int | None = None,
    heads: int | None = None,
    q_len: int | None = None,
    kv_len: int | None = None,
) -> None:
    """Validate a dense mask: boolean, 2-D ``(i, j)`` or 4-D ``(b, h, i, j)`` with each size
    either 1 or the expected one. Raises ``ValueError`` naming what was given.

    One 2-D shape is refused although it may broadcast: a first size equal to the batch size
    ``b > 1``. Torch's ``key_padding_mask`` and Hugging Face's ``attention_mask`` are ``(b, j)``,
    and with ``b == i`` such a tensor would silently be read as ``(i, j)``. Write key padding as
    :func:`padding` (lengths) or as a ``(b, 1, 1, j)`` tensor; an ``(i, j)`` mask whose ``i``
    equals the batch size as ``(1, 1, i, j)``.
    """
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}; "
            "pass an additive float score bias as bias= (MultiHeadAttention's forward, "
            "attend) instead"
        )
    check_pair_shape(mask, "mask", batch, heads, q_len, kv_len)


def check_pair_shape(
    t: Tensor,
    name: str,
    batch: int | None = None,
    heads: int | None = None,
    q_len: int | None = None,
    kv_len: int | None = None,
) -> None:
    """Check that ``t`` (a mask or a score bias) is ``(i, j)`` or ``(b, h, i, j)``, each size 1
    or the expected one (None: any), and not the ambiguous ``(b, j)`` form (see
    :func:`check_mask_tensor`). ``name`` is used in the message."""
    if t.dim() not in (2, 4):
        raise ValueError(
            f"{name} must have shape (i, j) or (b, h, i, j) (sizes of 1 broadcast), got "
            f"{tuple(t.shape)}; for a per-sequence (b, i, j) {name} use {name}[:, None]"
        )
    if t.dim() == 2 and batch is not None and batch > 1 and t.shape[0] == batch:
        raise ValueError(
            f"{name} of shape {tuple(t.shape)} is ambiguous: its first size equals the batch "
            f"size {batch}, so it may be a (batch, keys) padding {name} (torch/Hugging Face "
            "style) as well as (queries, keys). For key padding pass masks.padding(lengths) or "
            f"{name}[:, None, None, :] (shape (b, 1, 1, j)); for a (queries, keys) {name} pass "
            f"{name}[None, None] (shape (1, 1, i, j))"
        )
    expected = (batch, heads, q_len, kv_len)[4 - t.dim() :]
    for got, want in zip(t.shape, expected):
        if want is not None and got not in (1, want):
            raise ValueError(
                f"{name} of shape {tuple(t.shape)} does not broadcast to "
                f"(b, h, i, j) = ({batch}, {heads}, {q_len}, {kv_len})"
            )
