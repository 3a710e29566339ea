"""Longformer attention: a sliding window plus global tokens, exact under its mask; the global
tokens fixed at construction or given per call and per example.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``g`` global tokens, ``L`` positions covered by the global-token flags.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ..masks import Mask
from ._sparse import append_keys, full_rows, gathered_attention
from .base import AttentionKernel, MaskParts
from .local import check_backend, default_block, exact_attention, sliding_band

__all__ = ["LongformerKernel", "LongformerPattern"]

#: what ``global_tokens`` may be: shared positions, a ``(b, n)`` boolean, or positions per example
GlobalTokens = Sequence[int] | Sequence[Sequence[int]] | Tensor


class LongformerPattern(Mask):
    r"""Longformer's attention pattern as a mask: query ``i`` may attend to key ``j`` when
    ``|i - j| <= window`` or when ``i`` or ``j`` is a global token of its sequence,

    .. math::
        M_{b,i,j} = [\,|i - j| \le w\,] \lor G_{b,i} \lor G_{b,j} .

    With shared global tokens this is ``masks.local(w) | masks.global_tokens(G)``. Per example
    (Hugging Face's ``is_index_global_attn``, from ``global_attention_mask``) each sequence has
    its own global tokens. Exact attention under this mask (and the same padding) is the
    reference of :class:`LongformerKernel`, which plans its sparse computation from it.

    Args:
        window: ``w``, the radius of the sliding window (HF's ``attention_window // 2``).
        global_tokens: the global tokens:

            * positions shared by every sequence (a sequence of ints or a 1-D integer tensor);
              positions past a sequence's end are ignored;
            * per example, a ``(b, n)`` boolean tensor, True = global, over the ``n`` keys (an
              HF ``global_attention_mask`` of 0 / 1 integers: pass ``mask.bool()``);
            * per example, one sequence of positions per sequence (``[[0, 5], [0]]``), each
              position below the number of keys.

    Raises:
        ValueError: a negative position, a 2-D integer tensor (ambiguous: 0 / 1 flags or
            positions), or, when used, a shape that does not fit the problem (:meth:`check`).
    """

    key_fields = ("window", "flags")  # block masks cached by value

    def __init__(self, window: int, global_tokens: GlobalTokens = ()) -> None:
        if not isinstance(window, int) or window < 0:
            raise ValueError(f"window must be an int >= 0, got {window!r}")
        self.window = window
        self.flags, self.per_example, self.exact_length = _global_flags(global_tokens)
        self.uses_batch = self.flags.shape[0] > 1

    def check(self, batch: int, q_len: int, kv_len: int) -> None:
        rows, length = self.flags.shape
        if self.per_example and rows != batch:
            raise ValueError(
                f"global_tokens: given for {rows} sequences, but the batch has {batch}"
            )
        if self.exact_length and length != kv_len:
            raise ValueError(
                f"global_tokens: a (batch, keys) boolean needs {kv_len} keys per sequence, got "
                f"shape {tuple(self.flags.shape)}"
            )
        if self.per_example and length > kv_len:
            raise ValueError(
                f"global_tokens: position {length - 1} is past the {kv_len} keys of the sequence"
            )

    def mask_mod(self, b, h, q_idx, kv_idx):
        flags = self.flags.to(q_idx.device)
        rows, length = flags.shape
        seq = b if rows > 1 else torch.zeros_like(b)

        def is_global(p: Tensor) -> Tensor:  # positions past the flags are not global
            return flags[seq, p.clamp(0, length - 1)] & (p < length)

        d = q_idx - kv_idx
        return ((d <= self.window) & (d >= -self.window)) | is_global(q_idx) | is_global(kv_idx)

    def global_positions(self, length: int) -> Tensor:
        """Positions below ``length`` that are global in some sequence, ``(g,)`` sorted."""
        return self.flags[:, :length].any(0).nonzero().flatten()

    def __repr__(self) -> str:
        if self.per_example:
            tokens = f"per-example global tokens {tuple(self.flags.shape)}"
        else:
            tokens = f"global_tokens={self.global_positions(self.flags.shape[1]).tolist()}"
        return f"longformer_pattern(window={self.window}, {tokens})"


def _global_flags(tokens: GlobalTokens) -> tuple[Tensor, bool, bool]:
    """``(flags (b or 1, L) bool, per_example, exact_length)`` from any accepted form."""
    if isinstance(tokens, Tensor) and tokens.dim() == 2:
        if tokens.dtype != torch.bool:
            raise ValueError(
                f"global_tokens: a 2-D {tokens.dtype} tensor could be 0/1 flags or positions; "
                "pass flags as a boolean (b, n) tensor (e.g. global_attention_mask.bool()), "
                "positions as one list per sequence"
            )
        return tokens, True, True
    nested = (
        isinstance(tokens, Sequence)
        and not isinstance(tokens, str)
        and any(isinstance(t, Sequence | Tensor) and not isinstance(t, str) for t in tokens)
    )
    rows = [_positions(t) for t in tokens] if nested else [_positions(tokens)]
    length = max([1, *(int(r.max()) + 1 for r in rows if r.numel())])
    flags = torch.zeros(len(rows), length, dtype=torch.bool)
    for n, r in enumerate(rows):
        flags[n, r] = True
    return flags, nested, False


def _positions(tokens: object) -> Tensor:
    """A sequence of positions (ints, or a 1-D integer tensor) as a ``(g,)`` long tensor."""
    idx = None
    if isinstance(tokens, Tensor):
        idx = tokens
    elif isinstance(tokens, Sequence) and not isinstance(tokens, str):
        try:
            idx = torch.as_tensor(list(tokens), dtype=None if tokens else torch.long)
        except (TypeError, ValueError):
            idx = None
    if idx is None or idx.dim() > 1 or idx.dtype == torch.bool or idx.is_floating_point():
        raise ValueError(
            "global_tokens: expected positions (a sequence of ints), one sequence of positions "
            f"per example, or a (b, n) boolean tensor; got {tokens!r}"
        )
    idx = idx.to(torch.long).flatten().cpu()
    if (idx < 0).any():
        raise ValueError(f"global_tokens must be positions >= 0, got {idx.tolist()}")
    return idx


class LongformerKernel(AttentionKernel):
    r"""Longformer attention (Beltagy, Peters & Cohan 2020, Sec. 3.1): window + global tokens.

    Every query attends to the keys within ``window`` positions on either side of itself (the
    radius: the paper's "window size" is twice it); the global tokens attend to every key and
    every query attends to them ("symmetric" global attention, Sec. 3.1). It is exact softmax
    attention under

    .. math::
        M = P \land \mathrm{mask}, \qquad P = \mathrm{local}(w) \lor \mathrm{global}(G)

    (:class:`LongformerPattern`), so padding, causality (causal local window plus global
    tokens seen from later positions) and any other mask compose.

    **Per-example global tokens** (Hugging Face's ``global_attention_mask`` /
    ``is_index_global_attn``, which differ per call and per sequence) travel in the mask:
    ``layer(x, mask=layer.kernel.pattern(flags) & masks.padding(lengths))`` with ``flags`` a
    ``(b, n)`` boolean or one list of positions per sequence. A mask that carries a
    :class:`LongformerPattern` term is taken as the whole pattern for that call: the kernel
    computes exact attention under the mask as given (the constructor's ``global_tokens`` do
    not apply), plans its sparse work from the term's window and global tokens, and exact
    attention (``kernel=None``) under the same mask is its reference. Through
    :class:`~attnlab.blocks.TransformerBlock` and the encoders the mask passes unchanged.

    Not included: the paper's (and HF's) separate projections for global attention
    (``query_global``, ``key_global``, ``value_global``); this kernel works on the layer's one
    set of ``q, k, v``, so HF checkpoints load only where those equal the local ones.

    Long sequences run on the banded path (each query block gathers its band and the global
    keys, the union over the batch; the global queries get full rows); short ones on the
    exact backends.

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        window: ``w``, the sliding window's radius: keys at ``|i - j| <= w`` (default 128), as
            :func:`attnlab.masks.local`.
        global_tokens: positions of the global tokens shared by every sequence (default
            ``(0,)``, e.g. ``[CLS]``); positions past the sequence are ignored.
        block: query block of the banded path (default ``min(max(w, 16), 256)``).
        backend: ``"auto"`` (default), ``"banded"``, ``"exact"`` or an exact backend's name
            (see :class:`~attnlab.efficient.local.LocalKernel`).

    Complexity: time ``O(n (w + g) d)``, memory ``O(n (w + g))``, ``g`` the global tokens
    (per call: their union over the batch).
    """

    name = "longformer"
    supports_causal = True
    supports_structured = True

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        window: int = 128,
        global_tokens: Sequence[int] = (0,),
        block: int | None = None,
        backend: str = "auto",
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        default = LongformerPattern(window, global_tokens)
        if default.per_example:
            raise ValueError(
                "global_tokens: the constructor takes positions shared by every sequence; give "
                "per-example global tokens per call, in the mask (see LongformerKernel.pattern)"
            )
        self.window, self.backend = window, check_backend(backend)
        self.global_idx = default.global_positions(default.flags.shape[1])
        self.block = block or default_block(window)

    def pattern(self, global_tokens: GlobalTokens | None = None) -> LongformerPattern:
        """The kernel's pattern as a mask: its window with ``global_tokens`` (any form
        :class:`LongformerPattern` takes; default: the constructor's). Put it in the call's
        mask (``mask=kernel.pattern(flags) & masks.padding(lengths)``) for per-example global
        tokens; exact attention under the same mask is the reference."""
        tokens = self.global_idx if global_tokens is None else global_tokens
        return LongformerPattern(self.window, tokens)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        i, j = q.shape[2], k.shape[2]
        given = [t for t in _conjuncts(parts.mask) if isinstance(t, LongformerPattern)]
        if given:  # the call's own pattern; the mask already holds it
            pattern, mask = given[0], parts.mask
        else:
            pattern = self.pattern()
            mask = pattern if parts.mask is None else pattern & parts.mask
        # Every allowed key lies in the first pattern's band or among its global keys.
        g = pattern.global_positions(j).to(q.device)  # (g,), the union over the batch
        band = sliding_band(
            self.backend, block=self.block, window=pattern.window, causal=parts.causal,
            q_len=i, kv_len=j, q_offset=q_offset, extra_keys=g.numel(),
        )  # fmt: skip
        if band is None:
            return exact_attention(q, k, v, mask, q_offset=q_offset, backend=self.backend)
        index = append_keys(band, g)  # (r, kk): band keys and the global keys, each once
        out = gathered_attention(q, k, v, index, block=self.block, mask=mask, q_offset=q_offset)
        rows = g - q_offset
        rows = rows[(rows >= 0) & (rows < i)]  # global queries among these queries
        return full_rows(out, q, k, v, rows, mask=mask, q_offset=q_offset)

    def extra_repr(self) -> str:
        return (
            f"window={self.window}, global_tokens={self.global_idx.tolist()}, "
            f"block={self.block}, backend={self.backend!r}"
        )


def _conjuncts(mask: Mask | None) -> tuple[Mask, ...]:
    return () if mask is None else mask.conjuncts()
