"""Positional encodings: where order enters a permutation-equivariant attention layer.

=============  ==========================  ===========  ==========================
name           class                       acts on      extrapolates
=============  ==========================  ===========  ==========================
sinusoidal     :class:`Sinusoidal`         input        yes (closed form)
learned        :class:`Learned`            input        no (``max_len``)
relative       :class:`RelativeBias`       scores       yes (last bucket)
shaw           :class:`ShawRelative`       scores       yes (clipping)
rotary         :class:`Rotary`             q and k      yes (closed form)
alibi          :class:`ALiBi`              scores       yes (closed form)
floater        :class:`Floater`            input        yes (integrate further)
recurrent      :class:`Recurrent`          input        yes (more RNN steps)
=============  ==========================  ===========  ==========================

Image grids (pixels or patches, row-major, after ``prefix`` CLS tokens) have their own
registry, :data:`GRID_POSITIONAL`: ``sinusoidal2d`` (:class:`GridSinusoidal`, input),
``learned2d`` (:class:`GridLearned`, row + column, input) and ``relative2d``
(:class:`GridRelativeBias`, scores). They take the grid (``height``, ``width``, ``prefix``),
not a length, so they are not in :data:`POSITIONAL`.

Pass a module to ``MultiHeadAttention(...)(x, positional=pe)``; build one from a name only at
the config / CLI boundary with :func:`make_positional`.

Graph nodes have no index: :class:`LaplacianPE` adds a projection of the graph Laplacian's
eigenvectors (:func:`laplacian_eigenvectors`) to node features; it takes the eigenvectors, not a
length, so it is not in :data:`POSITIONAL`.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..registry import Registry
from .alibi import ALiBi, alibi_slopes
from .base import ACTS_ON, PositionalEncoding
from .floater import Floater
from .grid import GridLearned, GridRelativeBias, GridSinusoidal
from .laplacian import LaplacianPE, laplacian_eigenvectors
from .learned import Learned
from .recurrent import Recurrent
from .relative import RelativeBias, ShawRelative, t5_bucket
from .rotary import Rotary
from .sinusoidal import Sinusoidal

__all__ = [
    "ACTS_ON",
    "GRID_POSITIONAL",
    "POSITIONAL",
    "ALiBi",
    "Floater",
    "GridLearned",
    "GridRelativeBias",
    "GridSinusoidal",
    "LaplacianPE",
    "Learned",
    "PositionalEncoding",
    "Recurrent",
    "RelativeBias",
    "Rotary",
    "ShawRelative",
    "Sinusoidal",
    "alibi_slopes",
    "laplacian_eigenvectors",
    "make_positional",
    "t5_bucket",
]

POSITIONAL: Registry = Registry("positional encoding")
POSITIONAL.register("sinusoidal", Sinusoidal)
POSITIONAL.register("learned", Learned)
POSITIONAL.register("relative", RelativeBias)
POSITIONAL.register("shaw", ShawRelative)
POSITIONAL.register("rotary", Rotary)
POSITIONAL.register("alibi", ALiBi)
POSITIONAL.register("floater", Floater)
POSITIONAL.register("recurrent", Recurrent)

#: 2-D encodings of an image's grid, built with ``(dim=, heads=, height=, width=, prefix=)``
GRID_POSITIONAL: Registry = Registry("2-D positional encoding")
GRID_POSITIONAL.register("sinusoidal2d", GridSinusoidal)
GRID_POSITIONAL.register("learned2d", GridLearned)
GRID_POSITIONAL.register("relative2d", GridRelativeBias)


def make_positional(
    name: str, *, dim: int, heads: int, max_len: int | None = None, **options: Any
) -> PositionalEncoding:
    """Build the encoding registered as ``name`` for a layer of width ``dim`` and ``heads``.

    Each class gets the sizes its constructor asks for: ``dim`` (input encodings), ``heads``
    (score biases), ``head_dim = dim // heads`` (Rotary) and ``max_len`` (Learned needs it;
    Floater and Recurrent take it as an optional cap; the others extrapolate and ignore it).
    ``options`` go to the constructor (e.g. ``base=``, ``num_buckets=``, ``cell=``).

    Raises:
        ValueError: unknown name (lists the valid ones), ``heads`` not dividing ``dim``,
            ``max_len`` missing where required, or an option the class does not take.
    """
    cls = POSITIONAL.get(name)
    if not isinstance(heads, int) or heads <= 0 or dim % heads:
        raise ValueError(f"heads must be a positive divisor of dim={dim}, got heads={heads!r}")
    params = inspect.signature(cls).parameters
    sizes = {"dim": dim, "heads": heads, "head_dim": dim // heads, "max_len": max_len}
    unknown = sorted((set(options) - set(params)) | (set(options) & set(sizes)))
    if unknown:
        valid = sorted(set(params) - set(sizes))
        raise ValueError(
            f"positional encoding {name!r} does not take {unknown} as options; "
            f"valid options: {', '.join(valid) or 'none'}"
        )
    kwargs = {k: v for k, v in sizes.items() if k in params}
    if kwargs.get("max_len", 0) is None and params["max_len"].default is inspect.Parameter.empty:
        raise ValueError(
            f"positional encoding {name!r} does not extrapolate and needs max_len (the longest "
            "sequence); pass max_len=N (attnlab train: --model.encoder.max_len=N), or choose "
            "one that extrapolates"
        )
    return cls(**kwargs, **options)
