"""What the blocks' constructors do with their ``attention`` and ``ff_layer`` arguments.

Shared by :class:`~attnlab.blocks.TransformerBlock` and the encoder and decoder stacks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from torch import nn

from ..attention_config import AttentionConfig

__all__ = ["attention_settings", "ff_kwargs"]

_ATTENTION_FIELDS = tuple(f.name for f in fields(AttentionConfig))


def attention_settings(
    attention: AttentionConfig | None, attention_dropout: float | None
) -> tuple[AttentionConfig, float | None]:
    """``(AttentionConfig, attention dropout)`` from a constructor's ``attention`` argument
    (None: ``AttentionConfig()``).

    Raises:
        TypeError: ``attention`` is not an AttentionConfig (a ``dict`` of settings is
            ``AttentionConfig(**settings)``).
    """
    if attention is None:
        return AttentionConfig(), attention_dropout
    if not isinstance(attention, AttentionConfig):
        raise TypeError(
            f"attention: expected an AttentionConfig (or None), got {type(attention).__name__}"
            + ("; build AttentionConfig(**settings) from a dict" if isinstance(attention, Mapping)
               else "")
        )  # fmt: skip
    return attention, attention_dropout


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
