r"""Pieces of the node classifiers: sparse-aware dropout and the GAT authors' layer.

:class:`OriginalGATConv` is GAT as the authors' TensorFlow code computes it (PetarV-/GAT,
``utils/layers.py::attn_head``, the code behind the paper's 83.0 / 72.5), which differs from
PyG's ``GATConv`` (:class:`attnlab.graph.GATConv`) in where the dropout falls:

* **input dropout per head**: each head drops its *own* copy of the layer's input (``attn_head``
  is called once per head, each with ``tf.nn.dropout(seq)``); PyG drops the input once for all
  heads;
* **value dropout**: the projected features :math:`W^k x_j` are dropped again (same ``p``) on the
  value path, after the scores were computed from the undropped ones;
* **Glorot per head**: each head's ``(F, C)`` kernel and ``(C, 1)`` attention vectors get their
  own Glorot bound (``conv1d`` kernels), where PyG's bounds span all heads.

* **score biases**: the two score vectors are ``conv1d`` layers *with* a bias each
  (``f_1``, ``f_2``: zero at the start, decayed by the L2 penalty like every variable), so each
  head learns a shift :math:`c^k = c_s^k + c_d^k` before the LeakyReLU. A shift does not cancel
  in the softmax because the LeakyReLU bends: it moves the scores along the kink. PyG's layout
  has no place for it; ``score_bias=False`` leaves it out.

.. math::
    x'_i = \big\Vert_{k=1}^{H}\ b^k + \sum_{j \to i} \mathrm{drop}(\alpha^k_{ij})\,
        \mathrm{drop}(W^k \mathrm{drop}_k(x)_j), \qquad
    \alpha^k_{ij} = \mathrm{softmax}_j\,\mathrm{LeakyReLU}\big(a_s^{k\top} W^k
        \mathrm{drop}_k(x)_j + c_s^k + a_d^{k\top} W^k \mathrm{drop}_k(x)_i + c_d^k\big).

Legend: ``n`` nodes, ``F`` input features, ``E`` edges (self loops included), ``H`` heads,
``C`` channels per head.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.dropout import dropout
from attnlab.graph import (
    GATConv,
    add_self_loops,
    check_edge_index,
    check_node_features,
    edge_aggregate,
    edge_softmax,
    remove_self_loops,
)

__all__ = ["feature_dropout", "OriginalGATConv", "sparse_aware_linear"]


def sparse_aware_linear(x: Tensor, layer: nn.Linear) -> Tensor:
    """``layer(x)`` for dense or sparse COO ``x`` (Planetoid's features, ~1% non-zero).

    A sparse ``x`` is multiplied as CSR, MKL's sparse product, in ``layer``'s dtype with
    autocast off (CSR has no bfloat16 product): ``nn.Linear`` on the COO matrix took 6 ms
    under bf16 autocast on Cora's ``(2708, 1433)`` features into 64, forward and backward
    8.6 ms; this takes 0.35 and 2.9 ms, in float32 rather than rounded to bf16.
    """
    if not x.is_sparse:
        return layer(x)
    with torch.autocast(x.device.type, enabled=False), _quiet_csr():
        csr = x.to(layer.weight.dtype).to_sparse_csr()
        if layer.bias is None:
            return csr @ layer.weight.t()
        return torch.addmm(layer.bias, csr, layer.weight.t())


def feature_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """``F.dropout(x, p, training)`` for dense or sparse COO features (the stored entries of a
    sparse ``x`` are dropped; a dropped zero is zero, so the distribution is the same).

    Planetoid's bag-of-words features are ~1% non-zero: kept sparse, the input dropout draws
    100x fewer random numbers and the first layer's ``nn.Linear`` multiplies a sparse matrix
    (together a third of GAT's training step on Cora when dense).
    """
    if not training or p == 0.0:
        return x
    if x.is_sparse:
        x = x.coalesce()
        values = dropout(x.values(), p)  # same pattern: no need to re-check it
        return torch.sparse_coo_tensor(
            x.indices(), values, x.shape, check_invariants=False, is_coalesced=True
        )
    return dropout(x, p)


class _BlockDiagonal:
    """The heads' sparse products ``x_k @ W_k^T`` as one product of a block-diagonal sparse
    matrix: block ``k`` is ``x`` (``(n, F)``, entries at ``rows, cols``) with head ``k``'s
    values, the dense factor the heads' ``(F, C)`` kernels stacked. The CSR structure of the
    matrix and of its transpose (for the weight's gradient) depend only on the positions of the
    entries, so a layer builds them once per graph; each call brings the values.
    """

    def __init__(self, rows: Tensor, cols: Tensor, n: int, features: int, heads: int) -> None:
        self.rows, self.cols, self.n, self.heads = rows, cols, n, heads
        self.shape = (heads * n, heads * features)  # block k: rows k*n.., columns k*features..
        head = torch.arange(heads, device=rows.device).unsqueeze(1)  # (H, 1)
        self.crow = _crow(rows, n, heads)  # rows sorted (coalesced COO)
        self.col = (cols + head * features).reshape(-1)  # (H * nnz,)
        self.by_col = torch.argsort(cols, stable=True)  # the transpose's entry order, per block
        self.t_crow = _crow(cols[self.by_col], features, heads)
        self.t_col = (rows[self.by_col] + head * n).reshape(-1)

    def matches(self, rows: Tensor, cols: Tensor, n: int, features: int, heads: int) -> bool:
        """Whether entries at ``rows, cols`` of an ``(n, features)`` input, for ``heads``
        heads, have this structure."""
        return (
            (n * heads, features * heads, heads) == (*self.shape, self.heads)
            and rows.shape == self.rows.shape
            and rows.device == self.rows.device
            and torch.equal(rows, self.rows)
            and torch.equal(cols, self.cols)
        )

    def apply(self, values: Tensor, weight: Tensor) -> Tensor:
        """``(n, H, C)``: head ``k``'s ``x`` with entry values ``values[k]`` (``(H, nnz)``)
        times its kernel ``weight[k*C:(k+1)*C]`` (``weight`` ``(H*C, F)``) transposed."""
        H, n = self.heads, self.n
        stacked = weight.view(H, -1, weight.shape[1]).transpose(1, 2)  # (H, F, C)
        out = _BlockDiagonalProduct.apply(self, values, stacked.reshape(-1, stacked.shape[2]))
        return out.view(H, n, -1).transpose(0, 1).contiguous()  # (n, H, C): gathers read rows


def _crow(rows: Tensor, n: int, heads: int) -> Tensor:
    """CSR row offsets of ``heads`` diagonal blocks, each with entries in sorted ``rows`` of
    ``n``: ``(heads * n + 1,)``."""
    counts = torch.bincount(rows, minlength=n).repeat(heads)  # (H * n,)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


@contextlib.contextmanager
def _quiet_csr() -> Iterator[None]:
    """Without PyTorch's once-per-process "CSR support is in beta" warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        yield


def _csr(crow: Tensor, col: Tensor, values: Tensor, shape: tuple[int, int]) -> Tensor:
    """A CSR tensor (:func:`_quiet_csr`)."""
    with _quiet_csr():
        return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


class _BlockDiagonalProduct(torch.autograd.Function):
    """``S @ w`` for :class:`_BlockDiagonal` ``S`` with ``values`` (``(H, nnz)``: block ``k``'s),
    in ``w``'s dtype with autocast off, as the gather / scatter it replaces ran."""

    @staticmethod
    def forward(ctx, structure: _BlockDiagonal, values: Tensor, w: Tensor) -> Tensor:
        ctx.structure = structure
        ctx.save_for_backward(values, w)
        with torch.autocast(w.device.type, enabled=False):
            s = _csr(structure.crow, structure.col, values.to(w.dtype).reshape(-1), structure.shape)
            return s @ w  # (H * n, C)

    @staticmethod
    def backward(ctx, grad: Tensor):
        values, w = ctx.saved_tensors
        st = ctx.structure
        grad_values = grad_w = None
        with torch.autocast(grad.device.type, enabled=False):
            grad = grad.to(w.dtype)
            if ctx.needs_input_grad[1]:  # d out[k, i] / d value = w[k, f], summed over C
                H, n, C = st.heads, st.n, w.shape[1]
                at_rows = grad.view(H, n, C)[:, st.rows]  # (H, nnz, C)
                at_cols = w.view(H, -1, C)[:, st.cols]  # (H, nnz, C)
                grad_values = (at_rows * at_cols).sum(-1).to(values.dtype)  # (H, nnz)
            if ctx.needs_input_grad[2]:
                by_col = values.to(w.dtype).index_select(1, st.by_col).reshape(-1)
                t = _csr(st.t_crow, st.t_col, by_col, st.shape[::-1])
                grad_w = t @ grad  # (H * F, C)
        return None, grad_values, grad_w


class OriginalGATConv(GATConv):
    """GAT's layer as the authors' code computes it (module docstring), PyG's parameters.

    Args:
        in_channels, out_channels, heads, concat, negative_slope: as :class:`GATConv`.
        dropout: dropout on the attention weights (the authors' ``coef_drop``).
        input_dropout: dropout on the input, drawn independently for each head, and on the
            projected features before the weighted sum (the authors' ``in_drop``, 0.6).
        score_bias: learn the per-head score shifts ``score_bias`` ``(2, H)`` (row 0 the
            source's :math:`c_s`, row 1 the target's :math:`c_d`; zeros at the start), as the
            authors' ``conv1d`` score layers do.

    Self loops are always added (existing ones removed first); no edge features.

    Shapes:
        x ``(n, F)`` dense or sparse COO; edge_index ``(2, E)``; output ``(n, H*C)`` (concat)
        or ``(n, C)``; with ``return_attention_weights=True``, ``(out, (edge_index_used,
        alpha (E', H)))``, alpha before its dropout.
    """

    def __init__(self, in_channels: int, out_channels: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, *,
                 input_dropout: float = 0.0, score_bias: bool = True) -> None:  # fmt: skip
        if not 0.0 <= input_dropout < 1.0:
            raise ValueError(f"input_dropout must be in [0, 1), got {input_dropout!r}")
        self.score_bias: torch.nn.Parameter | None = None
        self._heads_product: _BlockDiagonal | None = None  # the sparse input's, cached
        super().__init__(in_channels, out_channels, heads, concat, negative_slope, dropout)
        self.input_dropout = input_dropout
        if score_bias:
            self.score_bias = torch.nn.Parameter(torch.zeros(2, heads))

    def reset_parameters(self) -> None:
        """Glorot per head, as TensorFlow's ``conv1d`` kernels: ``W^k`` ``(F, C)`` and the
        score vectors ``(C, 1)``; zero biases."""
        F_in, C = self.in_channels, self.out_channels
        bound_w, bound_a = math.sqrt(6.0 / (F_in + C)), math.sqrt(6.0 / (C + 1))
        with torch.no_grad():
            self.lin.weight.uniform_(-bound_w, bound_w)
            self.att_src.uniform_(-bound_a, bound_a)
            self.att_dst.uniform_(-bound_a, bound_a)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)
        if self.score_bias is not None:
            torch.nn.init.zeros_(self.score_bias)

    def _project(self, x: Tensor) -> Tensor:
        """``(n, H, C)``: head ``k`` projects its own dropped copy of ``x`` in training."""
        n, H, C = x.shape[0], self.heads, self.out_channels
        if not (self.training and self.input_dropout > 0):
            return sparse_aware_linear(x, self.lin).view(n, H, C)
        weight = self.lin.weight.view(H, C, -1)  # (H, C, F)
        if not x.is_sparse:
            heads = [F.linear(dropout(x, self.input_dropout), weight[k]) for k in range(H)]
            return torch.stack(heads, dim=1)  # (n, H, C)
        # Sparse x (Planetoid's ~1% non-zero features): one mask per stored entry and head, and
        # the heads' products as one block-diagonal sparse product, O(nnz * H * C): H sparse
        # matmuls (and their backward) took half of a training step, and a gather / scatter
        # over the entries a fifth.
        x = x.coalesce()
        rows, cols = x.indices()  # (nnz,) each, sorted by row
        keep = dropout(x.values().new_ones(H, cols.shape[0]), self.input_dropout)
        scaled = x.values() * keep  # (H, nnz): entry value, dropped per head
        F_in = x.shape[1]
        if self._heads_product is None or not self._heads_product.matches(rows, cols, n, F_in, H):
            self._heads_product = _BlockDiagonal(rows, cols, n, F_in, H)
        return self._heads_product.apply(scaled, self.lin.weight)  # (n, H, C)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor | None = None,
                return_attention_weights: bool = False):  # fmt: skip
        """See the module docstring for the maths and the class docstring for the shapes."""
        if edge_attr is not None:
            raise ValueError("OriginalGATConv takes no edge_attr (the authors' layer has none)")
        check_node_features(x, self.in_channels, dtype=self.lin.weight.dtype,
                            layer="OriginalGATConv")  # fmt: skip
        n = x.shape[0]
        edge_index = check_edge_index(edge_index, n).long()
        used = add_self_loops(remove_self_loops(edge_index)[0], None, n)[0]  # (2, E)
        src, dst = used[0], used[1]
        h = self._project(x)  # (n, H, C)
        a_src = (h * self.att_src).sum(-1)  # (n, H)
        a_dst = (h * self.att_dst).sum(-1)  # (n, H)
        if self.score_bias is not None:
            a_src, a_dst = a_src + self.score_bias[0], a_dst + self.score_bias[1]
        # index_select, not a_src[src]: its backward is an index_add, not a slower index_put
        pair = a_src.index_select(0, src) + a_dst.index_select(0, dst)
        scores = F.leaky_relu(pair, self.negative_slope)  # (E, H)
        alpha = edge_softmax(scores, dst, n)
        dropped = dropout(alpha, self.dropout, self.training)
        values = dropout(h, self.input_dropout, self.training)
        out = edge_aggregate(values, dropped, src, dst, n)  # (n, H, C)
        hc = self.heads * self.out_channels  # not -1: an empty graph has nothing to infer from
        out = out.reshape(n, hc) if self.concat else out.mean(dim=1)  # (n, H*C | C)
        if self.bias is not None:
            out = out + self.bias
        return (out, (used, alpha)) if return_attention_weights else out
