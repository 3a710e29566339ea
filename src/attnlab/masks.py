"""Attention masks: one convention, two renderings.

Convention (as ``torch.nn.attention.flex_attention``): a mask is a pure function
``mask_mod(b, h, q_idx, kv_idx) -> bool`` with **True = may attend**. Every mask here can be
rendered as

* a dense boolean tensor broadcastable to ``(b, h, i, j)`` (:meth:`Mask.dense`), for the
  reference, SDPA and chunked backends; and
* a FlexAttention ``BlockMask`` (:meth:`Mask.block_mask`, cached per shape), for the
  block-sparse flex backend.

Masks compose with ``&`` and ``|``. Plain boolean tensors are accepted wherever a mask is, with
the same meaning (see :func:`check_mask_tensor` for the shapes, and the one shape refused because
it could be misread).

Every mask is an instance of a public class (:class:`Causal`, :class:`Local`, :class:`Padding`,
:class:`Graph`, :class:`GlobalTokens`, :class:`Dense`, :class:`And`, :class:`Or`), built by the
lower-case constructors below; kernels read a mask's structure through these classes and
:meth:`Mask.conjuncts` (the terms of ``a & b & ...``), never through private names.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = [
    "Mask",
    "Causal",
    "Local",
    "Padding",
    "Graph",
    "GlobalTokens",
    "Dense",
    "And",
    "Or",
    "causal",
    "local",
    "padding",
    "graph",
    "global_tokens",
    "from_tensor",
    "check_mask",
    "check_mask_tensor",
    "check_pair_shape",
    "live_keys",
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
    ):
        """A FlexAttention ``BlockMask`` for this problem size, cached on the mask object."""
        from torch.nn.attention.flex_attention import create_block_mask

        self.check(batch, q_len, kv_len)
        b = batch if self.uses_batch else None
        h = heads if self.uses_heads else None  # else the block sparsity of head 0 serves all
        key = (b, h, q_len, kv_len, str(device), block_size)
        cache = self.__dict__.setdefault("_block_masks", {})
        if key not in cache:
            # A plain 4-argument function: FlexAttention tells mask_mod from score_mod by
            # counting positional arguments, and a bound method's code counts ``self`` too.
            def mask_mod(b, h, q_idx, kv_idx):
                return self.mask_mod(b, h, q_idx, kv_idx)

            cache[key] = create_block_mask(
                mask_mod, b, h, q_len, kv_len, device=device, BLOCK_SIZE=block_size
            )
        return cache[key]

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

    def mask_mod(self, b, h, q_idx, kv_idx):
        return self.left.mask_mod(b, h, q_idx, kv_idx) | self.right.mask_mod(b, h, q_idx, kv_idx)

    def live_keys(self, batch: int, kv_len: int) -> Tensor | None:
        left, right = self.left.live_keys(batch, kv_len), self.right.live_keys(batch, kv_len)
        return None if left is None or right is None else left | right


class Causal(Mask):
    """Query ``i`` may attend to keys ``j <= i``; built by :func:`causal`."""

    def mask_mod(self, b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def __repr__(self) -> str:
        return "causal()"


class Local(Mask):
    """Keys within ``window`` positions of the query (the radius); built by :func:`local`."""

    def __init__(self, window: int, causal: bool = False) -> None:
        if not isinstance(window, int) or window < 0:
            raise ValueError(f"local: window must be an int >= 0, got {window!r}")
        self.window, self.causal = window, causal

    def mask_mod(self, b, h, q_idx, kv_idx):
        d = q_idx - kv_idx
        if self.causal:
            return (d >= 0) & (d <= self.window)
        return (d <= self.window) & (d >= -self.window)

    def __repr__(self) -> str:
        return f"local({self.window}, causal={self.causal})"


class Padding(Mask):
    """Key padding: sequence ``b`` has ``lengths[b]`` real keys; built by :func:`padding`."""

    uses_batch = True

    def __init__(self, lengths: Tensor | Sequence[int]) -> None:
        lengths = torch.as_tensor(lengths)
        if lengths.dim() != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
            raise ValueError(
                "padding: lengths must be a 1-D integer tensor of shape (batch,), got "
                f"dtype {lengths.dtype} and shape {tuple(lengths.shape)}"
            )
        if (lengths < 0).any():
            raise ValueError(f"padding: lengths must be >= 0, got {lengths.tolist()}")
        self.lengths = lengths
        # Read once here: check() runs on every call, and reading a GPU tensor syncs.
        self.max_length = int(lengths.max()) if lengths.numel() else 0

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        if self.lengths.numel() != batch:
            raise ValueError(
                f"padding: lengths has {self.lengths.numel()} entries but the batch has {batch}"
            )
        if self.max_length > kv_len:
            raise ValueError(
                f"padding: a length ({self.max_length}) exceeds the key length {kv_len}"
            )

    def mask_mod(self, b, h, q_idx, kv_idx):
        return kv_idx < self.lengths.to(kv_idx.device)[b]

    def live_keys(self, batch: int, kv_len: int) -> Tensor | None:
        lengths = self.lengths.view(-1, 1, 1, 1)  # (b, 1, 1, 1)
        return torch.arange(kv_len, device=lengths.device) < lengths  # (b, 1, 1, j)

    def __repr__(self) -> str:
        return f"padding({self.lengths.tolist()})"


class Graph(Mask):
    """Attention along the edges of a graph; built by :func:`graph`."""

    def __init__(self, edge_index: Tensor, num_nodes: int, self_loops: bool = True) -> None:
        edge_index = torch.as_tensor(edge_index)
        if edge_index.dim() != 2 or edge_index.shape[0] != 2 or edge_index.dtype.is_floating_point:
            raise ValueError(
                "graph: edge_index must be an integer tensor of shape (2, num_edges), got "
                f"dtype {edge_index.dtype} and shape {tuple(edge_index.shape)}"
            )
        if edge_index.numel() and (edge_index.min() < 0 or edge_index.max() >= num_nodes):
            raise ValueError(
                f"graph: edge_index holds node ids outside [0, {num_nodes}); "
                f"got range [{int(edge_index.min())}, {int(edge_index.max())}]"
            )
        adj = torch.zeros(num_nodes, num_nodes, dtype=torch.bool, device=edge_index.device)
        # Message passing convention (PyG): edge (src, dst) lets node dst attend to node src.
        adj[edge_index[1], edge_index[0]] = True
        if self_loops:
            adj.fill_diagonal_(True)
        self.adjacency = adj  # (i, j): query node i may attend to key node j
        self.num_nodes = num_nodes

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        if q_len != self.num_nodes or kv_len != self.num_nodes:
            raise ValueError(
                f"graph: the mask is for {self.num_nodes} nodes, but the attention has "
                f"{q_len} queries and {kv_len} keys"
            )

    def mask_mod(self, b, h, q_idx, kv_idx):
        return self.adjacency.to(q_idx.device)[q_idx, kv_idx]

    def __repr__(self) -> str:
        return f"graph(num_nodes={self.num_nodes}, edges={int(self.adjacency.sum())})"


class GlobalTokens(Mask):
    """Tokens that attend everywhere and are attended from everywhere; see
    :func:`global_tokens`."""

    def __init__(self, indices: Sequence[int] | Tensor) -> None:
        idx = torch.as_tensor(indices, dtype=torch.long).flatten()
        if (idx < 0).any():
            raise ValueError(f"global_tokens: indices must be >= 0, got {idx.tolist()}")
        self.indices = idx

    def mask_mod(self, b, h, q_idx, kv_idx):
        idx = self.indices.to(q_idx.device)
        q_global = (q_idx.unsqueeze(-1) == idx).any(-1)
        kv_global = (kv_idx.unsqueeze(-1) == idx).any(-1)
        return q_global | kv_global

    def __repr__(self) -> str:
        return f"global_tokens({self.indices.tolist()})"


class Dense(Mask):
    """A plain boolean tensor, broadcastable to ``(b, h, i, j)``, seen as a mask object."""

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


# The private names of earlier versions, for code that imported them.
_Binary, _And, _Or, _Causal, _Local = Binary, And, Or, Causal, Local
_Padding, _Graph, _Global, _Dense = Padding, Graph, GlobalTokens, Dense


# ---- public constructors ---------------------------------------------------------------------
def causal() -> Mask:
    """Query ``i`` may attend to keys ``j <= i`` (autoregressive decoding)."""
    return Causal()


def local(window: int, causal: bool = False) -> Mask:
    """Truncated (local) self-attention: query ``i`` sees keys with ``|i - j| <= window``.

    ``window`` is the radius (keys on each side), not the width: a query sees ``2 window + 1``
    keys, or ``window + 1`` with ``causal=True`` (only ``0 <= i - j <= window``). This is the
    restricted self-attention used for long inputs such as 10 ms speech frames, where context
    far away matters little. A window ``>= n - 1`` is full attention.
    """
    return Local(window, causal)


def padding(lengths: Tensor | Sequence[int]) -> Mask:
    """Key padding: in sequence ``b`` only keys ``j < lengths[b]`` may be attended to.

    The form to use for a batch of sequences of different lengths (rather than a ``(b, n)``
    boolean tensor, which :func:`check_mask_tensor` refuses as ambiguous).
    """
    return Padding(torch.as_tensor(lengths))


def graph(edge_index: Tensor, num_nodes: int, *, self_loops: bool = True) -> Mask:
    """Attention only along the edges of a graph (GAT-style).

    Args:
        edge_index: ``(2, num_edges)`` integer tensor; edge ``(src, dst)`` lets node ``dst``
            attend to node ``src`` (the PyG message-passing convention). Give both directions
            for an undirected graph.
        num_nodes: number of nodes; queries and keys are the nodes.
        self_loops: whether every node may attend to itself (default True).
    """
    return Graph(edge_index, num_nodes, self_loops)


def global_tokens(indices: Sequence[int] | Tensor) -> Mask:
    """Tokens at ``indices`` attend everywhere and are attended to from everywhere.

    Combine with ``local`` for Longformer-style attention: ``local(w) | global_tokens([0])``.
    """
    return GlobalTokens(indices)


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
