"""Attention masks: one convention, two renderings.

Convention (as ``torch.nn.attention.flex_attention``): a mask is a pure function
``mask_mod(b, h, q_idx, kv_idx) -> bool`` with **True = may attend**. Every mask here can be
rendered as

* a dense boolean tensor broadcastable to ``(b, h, i, j)`` (:meth:`Mask.dense`), for the
  reference, SDPA and chunked backends; and
* a FlexAttention ``BlockMask`` (:meth:`Mask.block_mask`, cached per shape), for the
  block-sparse flex backend.

Masks compose with ``&`` and ``|``. Plain boolean tensors are accepted wherever a mask is, with
the same meaning.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = [
    "Mask",
    "causal",
    "local",
    "padding",
    "graph",
    "global_tokens",
    "from_tensor",
    "check_mask_tensor",
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

    # ---- renderings -------------------------------------------------------------------------
    def evaluate(self, batch: int, heads: int, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        """The mask at the given query / key positions, broadcastable to ``(b, h, i, j)``.

        ``q_idx`` and ``kv_idx`` are 1-D position vectors (e.g. a chunk ``arange(s, e)``).
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
        return _And(self, from_tensor(other))

    def __or__(self, other: Mask | Tensor) -> Mask:
        return _Or(self, from_tensor(other))

    __rand__ = __and__
    __ror__ = __or__


class _Binary(Mask):
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


class _And(_Binary):
    symbol = "&"

    def mask_mod(self, b, h, q_idx, kv_idx):
        return self.left.mask_mod(b, h, q_idx, kv_idx) & self.right.mask_mod(b, h, q_idx, kv_idx)


class _Or(_Binary):
    symbol = "|"

    def mask_mod(self, b, h, q_idx, kv_idx):
        return self.left.mask_mod(b, h, q_idx, kv_idx) | self.right.mask_mod(b, h, q_idx, kv_idx)


class _Causal(Mask):
    def mask_mod(self, b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def __repr__(self) -> str:
        return "causal()"


class _Local(Mask):
    def __init__(self, window: int, causal: bool) -> None:
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


class _Padding(Mask):
    uses_batch = True

    def __init__(self, lengths: Tensor) -> None:
        lengths = torch.as_tensor(lengths)
        if lengths.dim() != 1 or lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
            raise ValueError(
                "padding: lengths must be a 1-D integer tensor of shape (batch,), got "
                f"dtype {lengths.dtype} and shape {tuple(lengths.shape)}"
            )
        if (lengths < 0).any():
            raise ValueError(f"padding: lengths must be >= 0, got {lengths.tolist()}")
        self.lengths = lengths

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        if self.lengths.numel() != batch:
            raise ValueError(
                f"padding: lengths has {self.lengths.numel()} entries but the batch has {batch}"
            )
        if self.lengths.numel() and int(self.lengths.max()) > kv_len:
            raise ValueError(
                f"padding: a length ({int(self.lengths.max())}) exceeds the key length {kv_len}"
            )

    def mask_mod(self, b, h, q_idx, kv_idx):
        return kv_idx < self.lengths.to(kv_idx.device)[b]

    def __repr__(self) -> str:
        return f"padding({self.lengths.tolist()})"


class _Graph(Mask):
    def __init__(self, edge_index: Tensor, num_nodes: int, self_loops: bool) -> None:
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


class _Global(Mask):
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


class _Dense(Mask):
    """A plain boolean tensor, broadcastable to ``(b, h, i, j)``, seen as a mask object."""

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor
        self.uses_batch = tensor.dim() == 4 and tensor.shape[0] > 1
        self.uses_heads = tensor.dim() == 4 and tensor.shape[1] > 1

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        check_mask_tensor(self.tensor, batch, None, q_len, kv_len)

    def mask_mod(self, b, h, q_idx, kv_idx):
        t = self.tensor
        while t.dim() < 4:
            t = t.unsqueeze(0)
        t = t.to(q_idx.device)
        # Broadcast dimensions of size 1 index at 0.
        idx = [x if n > 1 else torch.zeros_like(x) for x, n in zip((b, h, q_idx, kv_idx), t.shape)]
        return t[idx[0], idx[1], idx[2], idx[3]]

    def evaluate(self, batch: int, heads: int, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        t = self.tensor
        while t.dim() < 4:
            t = t.unsqueeze(0)
        if t.shape[2] > 1:
            t = t.index_select(2, q_idx.to(t.device))
        if t.shape[3] > 1:
            t = t.index_select(3, kv_idx.to(t.device))
        return t

    def __repr__(self) -> str:
        return f"tensor_mask(shape={tuple(self.tensor.shape)})"


# ---- public constructors ---------------------------------------------------------------------
def causal() -> Mask:
    """Query ``i`` may attend to keys ``j <= i`` (autoregressive decoding)."""
    return _Causal()


def local(window: int, causal: bool = False) -> Mask:
    """Truncated (local) self-attention: query ``i`` sees keys with ``|i - j| <= window``.

    With ``causal=True`` only ``0 <= i - j <= window``. This is the restricted self-attention
    used for long inputs such as 10 ms speech frames, where context far away matters little.
    A window ``>= n - 1`` is full attention.
    """
    return _Local(window, causal)


def padding(lengths: Tensor | Sequence[int]) -> Mask:
    """Key padding: in sequence ``b`` only keys ``j < lengths[b]`` may be attended to."""
    return _Padding(torch.as_tensor(lengths))


def graph(edge_index: Tensor, num_nodes: int, *, self_loops: bool = True) -> Mask:
    """Attention only along the edges of a graph (GAT-style).

    Args:
        edge_index: ``(2, num_edges)`` integer tensor; edge ``(src, dst)`` lets node ``dst``
            attend to node ``src`` (the PyG message-passing convention). Give both directions
            for an undirected graph.
        num_nodes: number of nodes; queries and keys are the nodes.
        self_loops: whether every node may attend to itself (default True).
    """
    return _Graph(edge_index, num_nodes, self_loops)


def global_tokens(indices: Sequence[int] | Tensor) -> Mask:
    """Tokens at ``indices`` attend everywhere and are attended to from everywhere.

    Combine with ``local`` for Longformer-style attention: ``local(w) | global_tokens([0])``.
    """
    return _Global(indices)


def from_tensor(mask: Mask | Tensor) -> Mask:
    """Wrap a plain boolean tensor (True = may attend) as a :class:`Mask`."""
    if isinstance(mask, Mask):
        return mask
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a Mask or a boolean tensor, got {type(mask).__name__}")
    check_mask_tensor(mask)
    return _Dense(mask)


def check_mask_tensor(
    mask: Tensor,
    batch: int | None = None,
    heads: int | None = None,
    q_len: int | None = None,
    kv_len: int | None = None,
) -> None:
    """Validate a dense mask: boolean, 2-D ``(i, j)`` or 4-D ``(b, h, i, j)`` with each size
    either 1 or the expected one. Raises ``ValueError`` naming what was given."""
    if mask.dtype != torch.bool:
        raise ValueError(
            f"mask must be a boolean tensor (True = may attend), got dtype {mask.dtype}; "
            "pass additive float scores as bias= instead"
        )
    if mask.dim() not in (2, 4):
        raise ValueError(
            "mask must have shape (i, j) or (b, h, i, j) (sizes of 1 broadcast), got "
            f"{tuple(mask.shape)}; for a per-sequence (b, i, j) mask use mask[:, None]"
        )
    expected = (batch, heads, q_len, kv_len)[4 - mask.dim() :]
    for got, want in zip(mask.shape, expected):
        if want is not None and got not in (1, want):
            raise ValueError(
                f"mask of shape {tuple(mask.shape)} does not broadcast to "
                f"(b, h, i, j) = ({batch}, {heads}, {q_len}, {kv_len})"
            )
