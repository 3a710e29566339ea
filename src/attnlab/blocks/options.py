"""What the blocks' constructors do with their ``attention`` and ``ff_layer`` arguments.

Shared by :class:`~attnlab.blocks.TransformerBlock`, the encoder and decoder stacks and
:class:`~attnlab.models.TransformerSequenceEncoder`, so a legacy ``attention={...}`` dict is
converted (and warned about) once, at the constructor the user called.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from torch import nn

from ..attention_config import AttentionConfig

__all__ = ["attention_settings", "ff_kwargs"]

_ATTENTION_FIELDS = tuple(f.name for f in fields(AttentionConfig))


def attention_settings(
    attention: AttentionConfig | Mapping[str, Any] | None,
    attention_dropout: float | None,
    *,
    stacklevel: int = 3,
) -> tuple[AttentionConfig, float | None]:
    """``(AttentionConfig, attention dropout)`` from a constructor's ``attention`` argument.

    ``attention`` was once a ``dict`` of :class:`MultiHeadAttention` keyword arguments; such a
    dict still works, with a ``DeprecationWarning``: ``score``, ``normalize``, ``backend``,
    ``kernel`` and ``kernel_options`` become the config's fields, ``dropout`` the attention
    dropout, and any other key a kernel option.

    Args:
        attention: the settings, a legacy dict, or None (``AttentionConfig()``).
        attention_dropout: the constructor's own ``attention_dropout`` argument.
        stacklevel: where the deprecation warning points (the caller's caller by default).

    Raises:
        ValueError: a dict holds ``context_dim`` (a block argument), both the dict and the
            argument set the dropout, or a key is neither a setting nor a kernel option.
    """
    if attention is None:
        return AttentionConfig(), attention_dropout
    if isinstance(attention, AttentionConfig):
        return attention, attention_dropout
    if not isinstance(attention, Mapping):
        raise TypeError(
            f"attention: expected an AttentionConfig (or None), got {type(attention).__name__}"
        )
    warnings.warn(
        "attention={...} (a dict) is deprecated; pass attention=AttentionConfig(...) and "
        "attention_dropout=... instead",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    options = dict(attention)
    if "context_dim" in options:
        raise ValueError("pass context_dim to the block, not inside attention={...}")
    if "dropout" in options:
        if attention_dropout is not None:
            raise ValueError(
                "the attention dropout is set twice: attention={'dropout': ...} and "
                "attention_dropout=...; keep attention_dropout"
            )
        attention_dropout = options.pop("dropout")
    settings = {k: options.pop(k) for k in _ATTENTION_FIELDS if k in options}
    if options and settings.get("kernel") is None:
        raise ValueError(
            f"attention: unknown settings {sorted(options)}; valid: "
            f"{', '.join(_ATTENTION_FIELDS)}, dropout, or a kernel's options with kernel=NAME"
        )
    settings["kernel_options"] = {**settings.get("kernel_options", {}), **options}
    return AttentionConfig(**settings), attention_dropout


def ff_kwargs(
    ff_layer: Callable[..., nn.Module], ff_hidden: int | None, dropout: float
) -> dict[str, Any]:
    """The keyword arguments the block adds to ``ff_layer(dim, ...)``.

    What a ``functools.partial`` binds is the user's explicit choice and wins over the block's
    defaults (issue 9: the block's ``dropout`` overrode ``partial(FeedForward, dropout=0)``).
    """
    bound = getattr(ff_layer, "keywords", None) or {}
    kwargs: dict[str, Any] = {}
    if "dropout" not in bound:
        kwargs["dropout"] = dropout
    if "hidden" not in bound:
        kwargs["hidden"] = ff_hidden
    elif ff_hidden is not None and ff_hidden != bound["hidden"]:
        raise ValueError(
            f"ff_hidden={ff_hidden} and ff_layer's bound hidden={bound['hidden']} disagree; "
            "set the feed-forward width in one place"
        )
    return kwargs
