"""``MultiHeadAttention``: projections and heads around one attention kernel.

The layer owns the query / key / value / output projections, splits ``dim`` into ``heads``
heads, applies a positional encoding where it acts, and hands the projected ``q, k, v`` to its
one kernel (:mod:`attnlab.kernels`): the exact maths with its backends by default, or an
efficient approximation (:mod:`attnlab.efficient`).

Legend: ``b`` batch, ``n`` / ``i`` query positions, ``m`` / ``j`` key positions, ``h`` heads,
``d`` head dim.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention_checks import bias_flags, check_sequence
from .attention_config import AttentionConfig
from .functional import get_normalize, make_score
from .kernels import AttentionKernel, KernelModule, run_kernel
from .kernels.cache import KVCache
from .masks import Mask
from .pair_bias import PairBias
from .positional.base import PositionalEncoding

__all__ = ["MultiHeadAttention", "AttentionOutput", "KVCache"]


class AttentionOutput(NamedTuple):
    out: Tensor  # (b, n, dim)
    weights: Tensor | None  # (b, h, i, j) when need_weights
    backend: str  # what ran: the exact backend's name, or the efficient kernel's


class MultiHeadAttention(nn.Module):
    r"""Multi-head attention, batch first, exact on every backend.

    .. math::
        \mathrm{head}_h = \mathrm{attend}(x W^Q_h, c W^K_h, c W^V_h), \qquad
        \mathrm{out} = [\mathrm{head}_1; \dots; \mathrm{head}_H] W^O,

    with ``c = x`` (self-attention) or ``c = context`` (cross-attention). ``attend`` is the
    layer's one kernel (:attr:`kernel`): :class:`~attnlab.kernels.ExactKernel` (score,
    normalisation, backend, dropout) unless ``kernel=`` names an efficient one.

    Args:
        dim: model width; input last dimension and output width.
        heads: number of heads; must divide ``dim``.
        score: ``"scaled_dot"`` (default), ``"dot"`` or ``"additive"``
            (see :data:`attnlab.functional.SCORES`).
        normalize: ``"softmax"`` (default), ``"relu"``, ``"sigmoid"`` or ``"none"``.
        dropout: dropout on the attention weights during training.
        bias: whether the projections have biases (all four; default True).
        qkv_bias: whether the query, key and value projections have biases (default None:
            ``bias``). ``qkv_bias=False`` with the default ``bias=True`` is timm's ViT default
            (``qkv_bias=False``, biased ``proj``), also used by several other libraries.
        out_bias: whether the output projection has a bias (default None: ``bias``).
        context_dim: width of ``context`` for cross-attention (default ``dim``).
        backend: how the attention is computed: for exact attention ``"auto"`` (default),
            ``"reference"``, ``"sdpa"``, ``"flex"`` or ``"chunked"``; with a sparse kernel
            (``local``, ``longformer``, ``bigbird``) its ``backend`` option (``"banded"``,
            ``"exact"`` or an exact backend); other kernels have no choice (``"auto"``).
        kernel: an efficient approximate attention kernel (module or registered name) that
            replaces the exact maths; ``kernel_options`` are passed to its constructor.

    Call (:meth:`forward`):
        x: the queries' source; context: the keys' and values' source (cross-attention) or
        None (self-attention). mask: True = may attend; a boolean tensor broadcastable to
        ``(b, h, n, m)`` or a :class:`~attnlab.masks.Mask`. Key padding is
        ``masks.padding(lengths)`` or a ``(b, 1, 1, m)`` tensor; a 2-D tensor is ``(n, m)``,
        and one whose first size is the batch size is refused as ambiguous (torch's
        ``key_padding_mask`` is ``(b, m)`` and means the opposite, True = ignore). bias: added
        to the scores (a Hugging Face style additive mask, learned relative biases; exact
        attention only). positional: a positional encoding, applied where it acts (input, q/k
        or scores). need_weights: also return the weights. cache: :meth:`new_cache` for
        incremental causal self-attention (a :class:`KVCache`, or for ``kernel="linear"`` its
        constant-size ``RecurrentCache``), or a :class:`KVCache` for cross-attention.

    Shapes:
        - x: ``(b, n, dim)``; context: ``(b, m, context_dim)``
        - mask: boolean broadcastable to ``(b, h, n, m)``, True = may attend, or a
          :class:`~attnlab.masks.Mask`
        - bias: float ``(n, m)`` or ``(b, h, n, m)`` (sizes of 1 broadcast), added to the scores,
          or a :class:`~attnlab.PairBias` (nonzero at a few pairs)
        - out: ``(b, n, dim)``; weights: ``(b, h, n, m)``
    """

    def __init__(
        self,
        dim: int,
        heads: int,
        *,
        score: str = "scaled_dot",
        normalize: str = "softmax",
        dropout: float = 0.0,
        bias: bool = True,
        qkv_bias: bool | None = None,
        out_bias: bool | None = None,
        context_dim: int | None = None,
        backend: str = "auto",
        kernel: str | nn.Module | None = None,
        **kernel_options: Any,
    ) -> None:
        super().__init__()
        if not isinstance(dim, int) or dim <= 0:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if not isinstance(heads, int) or heads <= 0 or dim % heads:
            raise ValueError(f"heads must be a positive divisor of dim={dim}, got heads={heads!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if kernel is None and kernel_options:
            raise ValueError(
                f"options {sorted(kernel_options)} are kernel options; pass kernel=NAME with them"
            )
        # One validator: the settings as an AttentionConfig, which also builds the kernel.
        config = AttentionConfig(score=score, normalize=normalize, backend=backend,
                                 kernel=kernel, kernel_options=kernel_options)  # fmt: skip
        qkv_bias, out_bias = bias_flags(bias, qkv_bias, out_bias)
        self.dim, self.heads, self.head_dim = dim, heads, dim // heads
        self.context_dim = context_dim or dim
        self.dropout, self.backend = dropout, backend
        # The score first: an additive score's parameters keep their place (and state-dict key
        # score.*) ahead of the projections'.
        self.score = make_score(score, head_dim=self.head_dim, heads=heads)
        self.normalize = get_normalize(normalize)
        # State-dict names stay q_proj / kv_proj / out_proj whichever biases they have.
        self.q_proj = nn.Linear(dim, dim, bias=qkv_bias)
        self.kv_proj = nn.Linear(self.context_dim, 2 * dim, bias=qkv_bias)  # [keys; values]
        self.out_proj = nn.Linear(dim, dim, bias=out_bias)
        self.kernel: AttentionKernel | KernelModule = config.build_kernel(
            dim=dim, heads=heads, dropout=dropout, score=self.score
        )

    @classmethod
    def from_config(
        cls, dim: int, heads: int, config: AttentionConfig, **extra: Any
    ) -> MultiHeadAttention:
        """A layer with the attention settings ``config`` (score, normalisation, backend, kernel
        and its options); ``extra`` are the other constructor arguments (``dropout``, ``bias``,
        ``qkv_bias``, ``out_bias``, ``context_dim``)."""
        if not isinstance(config, AttentionConfig):
            raise TypeError(f"config: expected an AttentionConfig, got {type(config).__name__}")
        return cls(dim, heads, **config.layer_kwargs(), **extra)

    # ---- forward ----------------------------------------------------------------------------
    def forward(
        self,
        x: Tensor,
        context: Tensor | None = None,
        *,
        mask: Tensor | Mask | None = None,
        bias: Tensor | PairBias | None = None,
        positional: PositionalEncoding | None = None,
        need_weights: bool = False,
        cache: Any = None,
    ) -> AttentionOutput:
        """Attend from ``x`` to itself (``context=None``) or to ``context``; the arguments and
        shapes are the class docstring's. ``cache``: the layer's :meth:`new_cache` for
        incremental causal self-attention, or a :class:`KVCache` that cross-attention fills
        from ``context`` once and reuses."""
        self._check_call(x, context, mask, positional, cache)
        b, n, _ = x.shape
        self_cache = cache if context is None else None
        offset = self_cache.length if self_cache is not None else 0
        acts_on = positional.acts_on if positional is not None else None
        if acts_on == "input":
            positional.check_length(offset + n)
            x = positional(x, offset=offset)
        q, k, v = self._project(x, context, cache)  # 3 x (b, h, i | j, d)
        fresh = context is None or cache is None or cache.k is None  # keys not cached before
        if acts_on == "qk" and fresh:
            positional.check_length(offset + max(n, k.shape[2]))
            q, k = positional.rotate(q, k, q_offset=offset, k_offset=offset)
        if context is not None and cache is not None:
            k, v = cache.append(k, v) if fresh else (cache.k, cache.v)
        if acts_on == "scores":
            kv_len = offset + k.shape[2]
            positional.check_length(max(offset + n, kv_len))
            scores_bias = positional.score_bias(n, kv_len, q_offset=offset)
            if isinstance(bias, PairBias):  # made dense by the sum: its size checked first
                bias.check(n, kv_len, self.heads)
            bias = scores_bias if bias is None else bias + scores_bias
        out, weights, ran = run_kernel(
            self.kernel, q, k, v, mask=mask, bias=bias, need_weights=need_weights,
            cache=self_cache,
        )  # fmt: skip
        out = out.transpose(1, 2).reshape(b, n, self.dim)  # (b, i, dim)
        return AttentionOutput(self.out_proj(out), weights, ran)

    def _project(
        self, x: Tensor, context: Tensor | None, cache: Any
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """``q, k, v`` ``(b, h, i | j, d)``; no ``k, v`` when cross-attention's cache already
        holds the projected context."""
        b, n, _ = x.shape
        h, d = self.heads, self.head_dim
        if context is None:  # self-attention: one (dim -> 3 dim) matmul instead of two
            qkv = F.linear(x, *self._fused_qkv()).view(b, n, 3, h, d)  # (b, i, 3, h, d)
            # unbind along the q/k/v axis where it lies, then transpose each: backward stacks
            # the three gradients straight into the (b, i, 3, h, d) layout the matmul's
            # backward reads (one copy; permuting first would stack, then copy again), and
            # never zero-fills a full buffer per slice as qkv[0], qkv[1], qkv[2] would.
            q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))  # 3 x (b, h, i, d)
            return q, k, v
        q = self.q_proj(x).view(b, n, h, d).transpose(1, 2)  # (b, h, i, d)
        if cache is not None and cache.k is not None:
            return q, None, None  # the context was projected once, into the cache
        kv = self.kv_proj(context).view(b, context.shape[1], 2, h, d)  # (b, j, 2, h, d)
        k, v = kv.permute(2, 0, 3, 1, 4).unbind(0)  # 2 x (b, h, j, d)
        return q, k, v

    def _check_call(
        self,
        x: Tensor,
        context: Tensor | None,
        mask: Tensor | Mask | None,
        positional: PositionalEncoding | None,
        cache: Any,
    ) -> None:
        """What only the layer can check; the kernel checks the mask and bias shapes."""
        check_sequence(x, "x", self.dim, self.q_proj.weight)
        if context is None and self.context_dim != self.dim:
            raise ValueError(
                f"context: this layer attends to a context of width context_dim="
                f"{self.context_dim} (x has width {self.dim}); pass context="
            )
        if context is not None:
            check_sequence(context, "context", self.context_dim, self.kv_proj.weight)
            if context.shape[0] != x.shape[0]:
                raise ValueError(
                    f"context: batch {context.shape[0]} differs from x's batch {x.shape[0]}"
                )
        if context is not None and cache is not None and not isinstance(cache, KVCache):
            raise ValueError(
                f"cache: a {type(cache).__name__} is for causal self-attention; "
                "cross-attention reuses its projected context through a KVCache"
            )
        if positional is not None and context is not None and cache is not None:
            raise ValueError(
                "positional: with cross-attention and a KV cache the queries' positions are not "
                "known to the layer; apply positional encodings in self-attention (as "
                "TransformerDecoder does), or call without a cache"
            )
        if mask is not None and not isinstance(mask, Tensor | Mask):
            raise ValueError(
                f"mask must be a boolean tensor or an attnlab.masks.Mask, got {type(mask).__name__}"
            )
        if isinstance(mask, Tensor) and cache is not None and context is None and cache.length:
            raise ValueError(
                "mask: with a KV cache pass a Mask object (e.g. masks.causal()), which "
                "knows the queries' positions, rather than a dense tensor"
            )

    def new_cache(self) -> Any:
        """An empty incremental-decoding cache for this layer's causal self-attention, the
        kernel's: a :class:`~attnlab.efficient.linear.RecurrentCache` (constant size) for a
        kernel with an RNN form (``linear``), else a :class:`KVCache`."""
        return self.kernel.new_cache() if isinstance(self.kernel, AttentionKernel) else KVCache()

    def train(self, mode: bool = True) -> MultiHeadAttention:
        # Fused AdamW (torch 2.13, CPU) updates parameters without bumping their version, so
        # the version key alone let an evaluation reuse the previous evaluation's q/kv weights
        # (the trainer's dev scores then froze after the first). Switching mode drops the cache:
        # the trainer (and users) call train() before optimizer steps and eval() after.
        self.__dict__.pop("_qkv_cache", None)
        return super().train(mode)

    def _fused_qkv(self) -> tuple[Tensor, Tensor | None]:
        """``[W_q; W_kv]`` and ``[b_q; b_kv]`` for one self-attention matmul.

        Without autograd the concatenation is cached until a parameter changes (an in-place
        update bumps its version; ``.to()`` gives new storage) or the mode switches
        (:meth:`train` / ``eval()``: fused optimizers do not bump versions), so inference pays
        no copy.
        """
        params = [self.q_proj.weight, self.kv_proj.weight]
        if self.q_proj.bias is not None:
            params += [self.q_proj.bias, self.kv_proj.bias]
        key = tuple((p._version, p.data_ptr(), p.dtype) for p in params)
        cached = self.__dict__.get("_qkv_cache")
        if not torch.is_grad_enabled() and cached is not None and cached[0] == key:
            return cached[1], cached[2]
        w = torch.cat(params[:2])
        bias = torch.cat(params[2:]) if len(params) > 2 else None
        if not torch.is_grad_enabled():
            self.__dict__["_qkv_cache"] = (key, w, bias)
        else:  # a training forward: an optimizer step may follow, versions bumped or not
            self.__dict__.pop("_qkv_cache", None)
        return w, bias

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, heads={self.heads}, score={self.score.name}, "
            f"normalize={self.normalize.name}, backend={self.backend}"
        )
