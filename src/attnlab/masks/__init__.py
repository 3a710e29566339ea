"""Attention masks: one convention, two renderings.

Convention (as ``torch.nn.attention.flex_attention``): a mask is a pure function
``mask_mod(b, h, q_idx, kv_idx) -> bool`` with **True = may attend**. Every mask here can be
rendered as

* a dense boolean tensor broadcastable to ``(b, h, i, j)`` (:meth:`Mask.dense`), for the
  reference, SDPA and chunked backends; and
* a FlexAttention ``BlockMask`` (:meth:`Mask.block_mask`), for the block-sparse flex backend.
  Block masks are cached by the mask's *value* (:meth:`Mask.cache_key`) and the problem's
  shape, device and block size, in a bounded process-wide LRU (:func:`block_mask_cache`), so a
  new ``local(256)`` per call reuses the block mask of the last one; masks with no value key
  (a :class:`Dense` tensor) cache on the object. See :mod:`attnlab.masks.block_cache`.

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

from .base import (
    And,
    Binary,
    Dense,
    Mask,
    Or,
    check_mask,
    check_mask_tensor,
    check_pair_shape,
    from_tensor,
    live_keys,
)
from .block_cache import BlockMaskCache, block_mask_cache
from .grid import GridLocal, grid_local
from .kinds import Causal, GlobalTokens, Graph, Local, Padding

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
    "GridLocal",
    "grid_local",
    "from_tensor",
    "check_mask",
    "check_mask_tensor",
    "check_pair_shape",
    "live_keys",
    "BlockMaskCache",
    "block_mask_cache",
]

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
