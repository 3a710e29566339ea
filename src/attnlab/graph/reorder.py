"""Node orders that pack a graph's edges into few dense blocks, for block-sparse attention.

The flex backend skips every ``block x block`` tile of the ``n x n`` mask that holds no edge, so
its cost follows the number of non-empty tiles. Nodes numbered at random scatter the edges
over almost every tile; reverse Cuthill-McKee (Cuthill & McKee 1969; George 1971, via
:func:`scipy.sparse.csgraph.reverse_cuthill_mckee`) renumbers them breadth-first from a
peripheral node, which narrows the band the edges lie in. :func:`block_density` reports the
share of tiles with an edge, before and after.

Legend: ``n`` nodes, ``E`` edges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..backends.edge_ops import check_edge_index

__all__ = ["rcm_order", "permute_edges", "block_density", "BlockDensity"]


def _symmetric_csr(edge_index: Tensor, n: int):
    from scipy.sparse import coo_matrix

    ei = edge_index.detach().cpu().numpy()
    ones = np.ones(ei.shape[1], dtype=np.int8)
    a = coo_matrix((ones, (ei[1], ei[0])), shape=(n, n)).tocsr()
    return (a + a.T).tocsr()


def rcm_order(edge_index: Tensor, num_nodes: int) -> Tensor:
    """The reverse Cuthill-McKee order of the graph (edge directions ignored): ``perm`` of shape
    ``(n,)`` with ``perm[new_id] = old_id``; relabel with :func:`permute_edges` and index node
    features with ``x[perm]``."""
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    check_edge_index(edge_index, num_nodes)
    order = reverse_cuthill_mckee(_symmetric_csr(edge_index, num_nodes), symmetric_mode=True)
    return torch.as_tensor(order.astype(np.int64), device=edge_index.device)


def permute_edges(edge_index: Tensor, perm: Tensor) -> Tensor:
    """``edge_index`` relabelled to the order ``perm`` (``perm[new_id] = old_id``)."""
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(perm.numel(), device=perm.device)  # old id -> new id
    return inverse[edge_index]


@dataclass(frozen=True)
class BlockDensity:
    """How a graph's ``n x n`` mask falls into ``block x block`` tiles.

    Attributes:
        block: tile side.
        tiles: number of tiles, ``ceil(n / block)^2``.
        nonempty: tiles holding at least one edge (what a block-sparse kernel computes).
        density: ``nonempty / tiles`` (flex's cost relative to dense attention).
        fill: distinct edges per computed pair, ``edges / (nonempty * block^2)`` (the share of
            useful work inside the computed tiles).
    """

    block: int
    tiles: int
    nonempty: int
    density: float
    fill: float


def block_density(edge_index: Tensor, num_nodes: int, block: int = 128) -> BlockDensity:
    """The :class:`BlockDensity` of the graph's mask (edge ``(src, dst)`` at row ``dst``,
    column ``src``, duplicates counted once)."""
    if not isinstance(block, int) or block <= 0:
        raise ValueError(f"block must be a positive int, got {block!r}")
    check_edge_index(edge_index, num_nodes)
    n = num_nodes
    pairs = torch.unique(edge_index[1].long() * n + edge_index[0].long())
    nb = -(-n // block)
    tiles = torch.unique((pairs // n) // block * nb + (pairs % n) // block)
    nonempty = int(tiles.numel())
    return BlockDensity(
        block=block,
        tiles=nb * nb,
        nonempty=nonempty,
        density=nonempty / max(1, nb * nb),
        fill=int(pairs.numel()) / max(1, nonempty * block * block),
    )
