"""The attention weights of any PyTorch model, from its own forward pass.

:func:`capture` runs ``model(*args, **kwargs)`` once with a hook on every
:class:`attnlab.MultiHeadAttention` and every ``torch.nn.MultiheadAttention`` inside it, asking
each for its weights (``need_weights=True``; PyTorch's per head, not averaged) and keeping them
with the mask the layer was given. Layers are grouped into families in call order:
self-attention (keys are the queries' own sequence) and cross-attention (keys from a
``context``).

Legend: ``b`` batch, ``h`` heads, ``i`` queries, ``j`` keys.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn

from attnlab.attention import MultiHeadAttention
from attnlab.masks import Mask

from .view import Attention, AttentionView

__all__ = ["capture", "recording", "families", "view_module"]


class _Call:
    def __init__(self, name: str, cross: bool, weights: Tensor, allowed: Tensor | None):
        self.name, self.cross, self.weights, self.allowed = name, cross, weights, allowed


@contextmanager
def recording(model: nn.Module) -> Iterator[list[_Call]]:
    """Within the block, every attention layer of ``model`` that runs returns and records its
    weights (and its mask) in the list this yields; the hooks are removed on exit. For models
    called in several steps (an encoder-decoder's ``encode`` then ``decode``);
    :func:`families` turns a step's records into :class:`Attention` families.

    Raises:
        ValueError: the model has no attention layer.
    """
    layers = [(n, m) for n, m in model.named_modules()
              if isinstance(m, (MultiHeadAttention, nn.MultiheadAttention))]  # fmt: skip
    if not layers:
        raise ValueError(
            f"{type(model).__name__} has no attention layer (attnlab.MultiHeadAttention or "
            "torch.nn.MultiheadAttention): there is no attention to show"
        )
    calls: list[_Call] = []
    handles = []
    for name, layer in layers:
        handles.append(layer.register_forward_pre_hook(_ask_weights, with_kwargs=True))
        handles.append(layer.register_forward_hook(_keeper(name, calls), with_kwargs=True))
    try:
        yield calls
    except (NotImplementedError, ValueError) as error:
        if "weight" in str(error):
            raise ValueError(f"the model's attention keeps no weights to show: {error}") from error
        raise
    finally:
        for h in handles:
            h.remove()


def capture(
    model: nn.Module, *args: Any, index: int = 0, **kwargs: Any
) -> tuple[Any, list[Attention]]:
    """Run ``model(*args, **kwargs)`` (no grad, in eval mode; the mode is restored after) and
    return its output and the attention families of batch element ``index`` (module
    docstring).

    Raises:
        ValueError: the model has no attention layer, or none ran; a layer's kernel that keeps
            no weight matrix (an efficient "-former" kernel: its reason is quoted).
    """
    was_training = model.training
    model.eval()
    try:
        with recording(model) as calls, torch.no_grad():
            out = model(*args, **kwargs)
    finally:
        model.train(was_training)
    if not calls:
        raise ValueError(
            f"none of {type(model).__name__}'s attention layers ran in this forward pass "
            "(PyTorch's TransformerEncoderLayer fast path bypasses its MultiheadAttention: "
            "call the model in training mode, or with a mask, to see it)"
        )
    return out, families(calls, index)


def view_module(
    model: nn.Module,
    *args: Any,
    tokens: Sequence[str] | None = None,
    context_tokens: Sequence[str] | None = None,
    title: str = "",
    index: int = 0,
    **kwargs: Any,
) -> AttentionView:
    """:func:`capture` as an :class:`AttentionView`, positions labelled by ``tokens`` (queries
    and self-attention keys) and ``context_tokens`` (cross-attention keys); default labels are
    the positions ``0, 1, ...``."""
    _, families = capture(model, *args, index=index, **kwargs)
    for fam in families:
        n_i, n_j = fam.weights[0].shape[1:]
        if tokens is not None:
            if len(tokens) != n_i:
                raise ValueError(
                    f"tokens: {len(tokens)} labels given, but the {fam.name} has {n_i} queries"
                )
            fam.queries = [str(t) for t in tokens]
        keys = tokens if fam.name.startswith("self") else context_tokens
        if keys is not None:
            if len(keys) != n_j:
                what = "tokens" if fam.name.startswith("self") else "context_tokens"
                raise ValueError(
                    f"{what}: {len(keys)} labels given, but the {fam.name} has {n_j} keys"
                )
            fam.keys = [str(t) for t in keys]
    return AttentionView(families, title=title)


def _ask_weights(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    kwargs = dict(kwargs)
    kwargs["need_weights"] = True
    if isinstance(module, nn.MultiheadAttention):
        kwargs["average_attn_weights"] = False
    return args, kwargs


def _keeper(name: str, calls: list[_Call]):
    def keep(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if isinstance(module, MultiHeadAttention):
            x = args[0] if args else kwargs["x"]
            context = args[1] if len(args) > 1 else kwargs.get("context")
            weights = output.weights  # (b, h, i, j)
            cross = context is not None and context is not x
            allowed = _allowed(kwargs.get("mask"), weights)
        else:  # torch.nn.MultiheadAttention(query, key, value, ...): (b?, h, i, j) per head
            q, k = (list(args) + [kwargs.get("query"), kwargs.get("key")])[:2]
            weights = output[1]
            if weights.dim() == 3:  # an unbatched call
                weights = weights[None]
            cross = k is not q
            allowed = None
        calls.append(_Call(name, cross, weights.detach().float().cpu(), allowed))

    return keep


def _allowed(mask: Tensor | Mask | None, weights: Tensor) -> Tensor | None:
    """The layer's mask as a ``(b, h, i, j)`` boolean (True = may attend), or None."""
    if mask is None:
        return None
    b, h, i, j = weights.shape
    dense = mask.dense(b, h, i, j) if isinstance(mask, Mask) else mask.bool()
    return dense.expand(b, h, i, j).cpu()


def families(
    calls: list[_Call],
    index: int = 0,
    *,
    names: tuple[str, str] = ("self-attention", "cross-attention"),
) -> list[Attention]:
    """The recorded calls of batch element ``index`` as families: self-attention layers in
    call order, then cross-attention layers, named by ``names``; positions labelled
    ``0, 1, ...``."""
    out = []
    for cross, name in zip((False, True), names):
        mine = [c for c in calls if c.cross == cross]
        if not mine:
            continue
        if not 0 <= index < mine[0].weights.shape[0]:
            raise ValueError(
                f"index {index} is not in the batch of {mine[0].weights.shape[0]} inputs"
            )
        n_i, n_j = mine[0].weights.shape[2:]
        # A decoder called step by step (cached) has layers of other shapes: keep the first.
        mine = [c for c in mine if c.weights.shape[2:] == (n_i, n_j)]
        weights = [c.weights[index] for c in mine]
        masked = [None if c.allowed is None else ~c.allowed[index] for c in mine]
        labels_i = [str(p) for p in range(n_i)]
        labels_j = labels_i if not cross and n_i == n_j else [str(p) for p in range(n_j)]
        out.append(Attention(name, weights, labels_i, labels_j,
                             masked=None if all(m is None for m in masked) else masked))  # fmt: skip
    return out
