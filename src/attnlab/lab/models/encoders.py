r"""Sequence encoders: ``(x (b, n, dim), lengths (b,)) -> EncodedSequence(hidden, weights)``.

All encoders share one interface, so a task (tagging, classification, later seq2seq) and the
trainer never depend on which one runs:

* ``forward(x, lengths, *, need_weights=False) -> EncodedSequence``;
* ``hidden`` is ``(b, n, out_dim)`` and **zero at padded positions** (``t >= lengths[b]``);
* nothing at a valid position depends on what lies at padded positions;
* ``weights`` is the list of per-layer attention weights ``(b, h, i, j)`` when
  ``need_weights`` and the encoder attends, else None;
* attributes ``dim`` (input width) and ``out_dim`` (output width).

Registered (:data:`ENCODERS`): ``"transformer"`` (here) and the lecture's baselines ``"fc"``
(fully connected over a context of ``k`` vectors), ``"cnn"``, ``"rnn"``
(:mod:`attnlab.lab.models.baselines`).

Legend: ``b`` batch, ``n`` / ``i`` / ``j`` positions, ``h`` heads.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from attnlab import masks
from attnlab.attention_config import AttentionConfig
from attnlab.blocks import TransformerEncoder, TrunkConfig
from attnlab.positional import make_positional
from attnlab.registry import Registry

__all__ = [
    "ENCODERS",
    "EncodedSequence",
    "SequenceEncoder",
    "TransformerSequenceEncoder",
    "valid_positions",
]

ENCODERS: Registry = Registry("encoder")


class EncodedSequence(NamedTuple):
    hidden: Tensor  # (b, n, out_dim), zeros at padded positions
    weights: list[Tensor] | None  # per layer (b, h, i, j), when need_weights and attention


def valid_positions(lengths: Tensor, n: int) -> Tensor:
    """``(b, n)`` boolean, True at ``t < lengths[b]``."""
    return torch.arange(n, device=lengths.device) < lengths.unsqueeze(-1)  # (b, n)


#: a batch is cut into groups only when its longest sequence has at least this many positions
#: (below, the per-call overhead of more, smaller calls outweighs the padding saved) ...
GROUP_MIN_LENGTH = 128
#: ... and a group ends where a sequence is shorter than this share of the group's longest ...
GROUP_SHRINK = 0.75
#: ... or of this share, for a group whose longest has GROUP_LONG positions or more: there the
#: n^2 of attention dominates a step, and finer groups pay (ListOps, 500-2,000 tokens: 1.10x
#: at 0.85); shorter, the cost of each extra group ate the saving (phones, 170-870 frames:
#: 0.78x at 0.85; BENCHMARKS.md, "Training speed")
GROUP_SHRINK_LONG = 0.85
GROUP_LONG = 1024


def length_groups(lengths: list[int]) -> list[tuple[list[int], int]] | None:
    """Groups of sequences of similar lengths, ``[(members, longest), ...]``, for running a
    padded batch of long, unequal sequences group by group, each cut to its longest; None when
    one group would do (short or similar sequences).

    Sorted longest first, a group closes at the first sequence shorter than
    :data:`GROUP_SHRINK` (:data:`GROUP_SHRINK_LONG` from :data:`GROUP_LONG` positions) times
    the group's longest, while that longest has at least :data:`GROUP_MIN_LENGTH` positions.
    ListOps' 32 trees of 500-2,000 tokens pad to about 1,950 (attention's cost 1.8x the trees'
    own); in groups, each group whose longest has 128 or more positions pads to at most 4/3 of
    its shortest member, and from 1,024 positions to at most 20/17.
    """
    order = sorted(range(len(lengths)), key=lambda k: -lengths[k])
    if not order or lengths[order[0]] < GROUP_MIN_LENGTH:
        return None
    groups: list[tuple[list[int], int]] = []
    members, longest = [], lengths[order[0]]
    for k in order:
        shrink = GROUP_SHRINK_LONG if longest >= GROUP_LONG else GROUP_SHRINK
        if lengths[k] < shrink * longest and longest >= GROUP_MIN_LENGTH:
            groups.append((members, longest))
            members, longest = [], lengths[k]
        members.append(k)
    groups.append((members, max(longest, 1)))
    return groups if len(groups) > 1 else None


#: groups as ``[(rows (k,) long, longest), ...]``: which rows of the batch, cut to what length
_Rows = list[tuple[Tensor, int]]


class _SplitGroups(torch.autograd.Function):
    """``x`` ``(b, n, d)`` -> each group's rows cut to its longest, ``(k, longest, d)``.

    Autograd's own indexing (``x[rows, :longest]``) would fill and add a whole ``(b, n, d)``
    gradient per group; the backward here writes every group's gradient into one.
    """

    @staticmethod
    def forward(x: Tensor, rows: _Rows) -> tuple[Tensor, ...]:
        return tuple(x[:, :longest].index_select(0, idx) for idx, longest in rows)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Tensor, _Rows], output: Any) -> None:
        x, ctx.rows = inputs
        ctx.shape = x.shape

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple[Tensor, None]:
        grad = grads[0].new_zeros(ctx.shape)  # (unused groups' gradients come as zeros)
        for (idx, longest), g in zip(ctx.rows, grads):
            grad[:, :longest].index_copy_(0, idx, g)
        return grad, None


class _MergeGroups(torch.autograd.Function):
    """The groups' ``(k, longest, d)`` results -> the batch's ``(b, n, d)``, zero beyond each
    group's longest: one tensor written in place of a padded copy per group, their
    concatenation and a reordering (and their backward passes)."""

    @staticmethod
    def forward(rows: _Rows, n: int, *hidden: Tensor) -> Tensor:
        dtype = functools.reduce(torch.promote_types, (h.dtype for h in hidden))
        b = sum(len(idx) for idx, _ in rows)
        out = hidden[0].new_zeros(b, n, hidden[0].shape[-1], dtype=dtype)
        for (idx, longest), h in zip(rows, hidden):
            out[:, :longest].index_copy_(0, idx, h.to(dtype))
        return out

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Tensor) -> None:
        rows, _, *hidden = inputs
        ctx.rows, ctx.dtypes = rows, [h.dtype for h in hidden]

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        parts = (
            grad[:, :longest].index_select(0, idx).to(dtype)
            for (idx, longest), dtype in zip(ctx.rows, ctx.dtypes)
        )
        return (None, None, *parts)


class SequenceEncoder(nn.Module):
    """Base class: holds ``dim`` / ``out_dim`` and checks the inputs.

    Subclasses implement :meth:`encode` on checked inputs; :meth:`forward` zeroes the padded
    positions of its result.
    """

    dim: int
    out_dim: int

    def forward(self, x: Tensor, lengths: Tensor, *, need_weights: bool = False) -> EncodedSequence:
        """Encode ``x`` ``(b, n, dim)``, whose sequence ``b`` has ``lengths[b]`` valid positions.

        Args:
            x: ``(b, n, dim)`` input vectors.
            lengths: ``(b,)`` long, ``0 <= lengths <= n``.
            need_weights: also return per-layer attention weights (attention encoders only;
                others return None).
        """
        if x.dim() != 3 or x.shape[-1] != self.dim:
            raise ValueError(f"x: expected shape (batch, seq, {self.dim}), got {tuple(x.shape)}")
        if lengths.shape != x.shape[:1] or lengths.dtype.is_floating_point:
            raise ValueError(
                f"lengths: expected an integer tensor of shape ({x.shape[0]},), got "
                f"{lengths.dtype} {tuple(lengths.shape)}"
            )
        lengths = lengths.to(device=x.device, dtype=torch.long)
        valid = valid_positions(lengths, x.shape[1]).unsqueeze(-1)  # (b, n, 1)
        hidden, weights = self.encode(x * valid, lengths, need_weights=need_weights)
        return EncodedSequence(hidden * valid, weights)

    def encode(
        self, x: Tensor, lengths: Tensor, *, need_weights: bool
    ) -> tuple[Tensor, list[Tensor] | None]:
        """``x`` ``(b, n, dim)`` with zeros at padded positions -> ``(hidden, weights)``."""
        raise NotImplementedError


@ENCODERS.register("transformer")
class TransformerSequenceEncoder(SequenceEncoder):
    r"""A stack of Transformer blocks over the valid positions of each sequence.

    Wraps :class:`attnlab.blocks.TransformerEncoder`; the attention mask is
    ``masks.padding(lengths)`` (keys beyond a sequence's length are never attended to), and
    with ``window`` also ``masks.local(window)`` (restricted self-attention: position ``i`` sees
    ``|i - j| <= window``), and with ``causal`` also ``masks.causal()`` (position ``i`` sees
    ``j <= i`` only: a decoder-only reader, whose prefix averages count what came before).

    Args:
        dim: model width (input and output).
        depth: number of blocks.
        heads: attention heads; must divide ``dim``.
        ff_hidden: feed-forward hidden width (default ``4 * dim``).
        dropout: dropout in the blocks during training.
        norm_first: pre-norm (True) or post-norm (False) blocks.
        positional: a positional encoding name (:data:`attnlab.positional.POSITIONAL`) or a
            :class:`~attnlab.positional.base.PositionalEncoding`; None = no position
            information (the encoder is then permutation-equivariant).
        max_len: longest sequence, for encodings that need it (e.g. ``"learned"``).
        positional_options: options of the encoding built by name, passed to
            :func:`~attnlab.positional.make_positional` (e.g. ``{"interleaved": True,
            "fraction": 0.5}`` for a GPT-J style :class:`~attnlab.positional.Rotary`, or
            ``{"base": 500000}``); unknown options raise, listing the valid ones.
        window: local attention radius, or None for full attention.
        causal: each position attends to itself and earlier positions only.
        attention: the attention maths
            (:class:`~attnlab.attention_config.AttentionConfig`: score, normalisation, backend,
            kernel and its options; default exact scaled-dot softmax).
        attention_dropout: dropout on the attention weights (default ``dropout``; exact
            attention only).

    The blocks are built from these settings as a :class:`~attnlab.blocks.TrunkConfig`
    (:meth:`~attnlab.blocks.TransformerEncoder.from_config`), as every model of the lab builds
    its blocks.

    Shapes:
        - x: ``(b, n, dim)``; lengths: ``(b,)``
        - hidden: ``(b, n, dim)``; weights: ``depth`` x ``(b, heads, n, n)``
    """

    def __init__(
        self,
        dim: int,
        *,
        depth: int = 2,
        heads: int = 4,
        ff_hidden: int | None = None,
        dropout: float = 0.0,
        norm_first: bool = True,
        positional: str | nn.Module | None = "rotary",
        max_len: int | None = None,
        positional_options: Mapping[str, Any] | None = None,
        window: int | None = None,
        causal: bool = False,
        attention: AttentionConfig | None = None,
        attention_dropout: float | None = None,
    ) -> None:
        super().__init__()
        trunk = TrunkConfig(depth=depth, heads=heads, ff_hidden=ff_hidden, dropout=dropout,
                            attention_dropout=attention_dropout, norm_first=norm_first,
                            attention=attention or AttentionConfig())  # fmt: skip
        if window is not None and (not isinstance(window, int) or window < 0):
            raise ValueError(f"window must be None or an int >= 0, got {window!r}")
        if max_len is not None and not isinstance(positional, str):
            raise ValueError("max_len sizes a positional encoding built by name; pass its name")
        if positional_options and not isinstance(positional, str):
            raise ValueError(
                f"positional_options {dict(positional_options)} configure a positional encoding "
                f"built by name; got positional={positional!r}. Pass its name (e.g. "
                "positional='rotary'), or set the options on the module you pass"
            )
        self.dim = self.out_dim = dim
        self.window = window
        self.causal = bool(causal)
        if isinstance(positional, str):
            positional = make_positional(
                positional, dim=dim, heads=heads, max_len=max_len, **(positional_options or {})
            )
        self.encoder = TransformerEncoder.from_config(dim, trunk, positional=positional)
        # Exact attention at real positions does not depend on how far a batch is padded, so
        # a batch of long, unequal sequences may run in groups of similar lengths (see
        # length_groups); efficient kernels may mix positions (Linformer projects along n).
        self.exact = trunk.attention.kernel is None

    def encode(
        self, x: Tensor, lengths: Tensor, *, need_weights: bool
    ) -> tuple[Tensor, list[Tensor] | None]:
        groups = None
        if self.exact and not need_weights and not torch.compiler.is_compiling():
            groups = length_groups(lengths.tolist())
        if groups is None:
            return self._encode(x, lengths, need_weights=need_weights)
        rows = [(torch.tensor(members, device=x.device), longest) for members, longest in groups]
        parts = _SplitGroups.apply(x, rows)  # each group cut to its longest sequence
        hidden = [
            self._encode(part, lengths[idx], need_weights=False)[0]
            for part, (idx, _) in zip(parts, rows)
        ]
        return _MergeGroups.apply(rows, x.shape[1], *hidden), None

    def _encode(
        self, x: Tensor, lengths: Tensor, *, need_weights: bool
    ) -> tuple[Tensor, list[Tensor] | None]:
        mask = masks.padding(lengths)
        if (structure := self.attention_mask()) is not None:
            mask = mask & structure
        out = self.encoder(x, mask=mask, need_weights=need_weights)
        return out.out, (list(out.weights) if need_weights else None)

    def attention_mask(self) -> masks.Mask | None:
        """The window and causal structure of the attention, without padding (None: full)."""
        if self.window is not None:
            return masks.local(self.window, causal=self.causal)
        return masks.causal() if self.causal else None

    def extra_repr(self) -> str:
        return f"dim={self.dim}, window={self.window}, causal={self.causal}"
