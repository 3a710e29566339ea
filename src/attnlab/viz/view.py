"""What the viewer shows: named families of attention maps, and the page that shows them.

Legend: ``l`` layer, ``h`` head, ``i`` query position, ``j`` key position.

An :class:`Attention` is one family of maps of one input (an encoder's self-attention, a
decoder's cross-attention), per layer ``(h, i, j)`` with the axis labels and, where known, the
pairs that were masked (True = masked, drawn as masked, never as a zero weight). An
:class:`AttentionView` is what one input shows: its families, a title, the model's prediction and
the modality's own picture (:class:`Modality`: a spectrogram, an image and its patch grid, a graph
neighbourhood, a molecule); ``save`` writes one self-contained HTML page (:mod:`.page`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from .page import MAX_BYTES, render

__all__ = ["Attention", "AttentionView", "Modality", "rollout"]


@dataclass
class Modality:
    """The input's own picture, drawn by the page beside the maps.

    ``kind``: ``"text"`` (tokens only), ``"speech"``, ``"image"``, ``"graph"`` or ``"molecule"``;
    ``data``: JSON-friendly fields the page reads (documented per kind in :mod:`.page`);
    ``arrays``: large numeric fields (a spectrogram, pixels), sent as compact binary."""

    kind: str = "text"
    data: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


class Attention:
    """One family of attention maps of one input.

    Args:
        name: what the family is ("self-attention", "cross-attention", "GAT layers").
        weights: per layer, ``(h, i, j)`` weights (rows: queries; a row sums to 1 over the keys
            a query may attend to). Layers may differ in heads (a GAT's output layer has 1).
        queries: the ``i`` labels; keys: the ``j`` labels (default: the queries).
        masked: None, or one boolean tensor broadcastable to every layer's ``(h, i, j)``, or one
            per layer: True where the pair was masked (or is absent, as a non-edge).

    Raises:
        ValueError: no layers, a layer that is not ``(h, i, j)``, layers of different ``(i, j)``,
            labels or masks that do not match.
    """

    def __init__(
        self,
        name: str,
        weights: Sequence[Tensor | np.ndarray],
        queries: Sequence[str],
        keys: Sequence[str] | None = None,
        *,
        masked: Tensor | np.ndarray | Sequence[Tensor | np.ndarray | None] | None = None,
    ) -> None:
        if not len(weights):
            raise ValueError(f"Attention {name!r}: no layers of weights were given")
        self.name = name
        self.weights = [_float_array(w, f"weights[{n}]", name) for n, w in enumerate(weights)]
        n_i, n_j = self.weights[0].shape[1:]
        for n, w in enumerate(self.weights):
            if w.shape[1:] != (n_i, n_j):
                raise ValueError(
                    f"Attention {name!r}: every layer must be (h, {n_i}, {n_j}) like layer 0; "
                    f"weights[{n}] is {tuple(w.shape)}"
                )
        self.queries = [str(q) for q in queries]
        self.keys = [str(k) for k in (queries if keys is None else keys)]
        if (len(self.queries), len(self.keys)) != (n_i, n_j):
            raise ValueError(
                f"Attention {name!r}: weights are {n_i} queries x {n_j} keys, but got "
                f"{len(self.queries)} query and {len(self.keys)} key labels"
            )
        self.masked = self._masks(masked)

    def _masks(self, masked) -> list[np.ndarray | None]:
        if masked is None:
            return [None] * len(self.weights)
        per_layer = masked if isinstance(masked, (list, tuple)) else [masked] * len(self.weights)
        if len(per_layer) != len(self.weights):
            raise ValueError(
                f"Attention {self.name!r}: masked has {len(per_layer)} layers, weights "
                f"{len(self.weights)}"
            )
        out = []
        for n, (m, w) in enumerate(zip(per_layer, self.weights)):
            if m is None:
                out.append(None)
                continue
            m = np.asarray(m.detach().cpu() if isinstance(m, Tensor) else m, dtype=bool)
            try:
                out.append(np.broadcast_to(m, w.shape).copy())
            except ValueError:
                raise ValueError(
                    f"Attention {self.name!r}: masked[{n}] of shape {m.shape} does not "
                    f"broadcast to the layer's (h, i, j) = {w.shape}"
                ) from None
        return out

    @property
    def square(self) -> bool:
        """Self-attention: queries and keys are the same positions."""
        return self.queries == self.keys

    def rollout(self) -> np.ndarray | None:
        """:func:`rollout` of the layers (None where it has no meaning: cross-attention, or
        one layer)."""
        if not self.square or len(self.weights) < 2:
            return None
        return rollout(self.weights)

    def __repr__(self) -> str:
        heads = [w.shape[0] for w in self.weights]
        return (f"Attention({self.name!r}, layers={len(self.weights)}, heads={heads}, "
                f"queries={len(self.queries)}, keys={len(self.keys)})")  # fmt: skip


def rollout(weights: Sequence[Tensor | np.ndarray], *, residual: float = 0.5) -> np.ndarray:
    r"""Attention rollout across layers (Abnar & Zuidema, 2020), float64.

    Each layer's heads are averaged and the residual connection added as identity,
    :math:`\hat A_l = \mathrm{rownorm}(r I + (1 - r)\,\overline{A_l})`, and the layers composed
    from the input up: :math:`R = \hat A_L \cdots \hat A_2 \hat A_1`. Row ``i`` of ``R`` is how
    much output position ``i`` draws, through every layer, on input position ``j``.

    Args:
        weights: per layer ``(h, n, n)`` self-attention weights (first layer first).
        residual: the share ``r`` of the identity (the paper's 0.5).
    """
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"rollout: residual must be in [0, 1], got {residual}")
    result = None
    for n, w in enumerate(weights):
        a = np.asarray(w.detach().cpu().double() if isinstance(w, Tensor) else w, np.float64)
        if a.ndim != 3 or a.shape[1] != a.shape[2]:
            raise ValueError(f"rollout: layer {n} must be (h, n, n), got {a.shape}")
        a = residual * np.eye(a.shape[1]) + (1.0 - residual) * a.mean(0)
        a = a / np.maximum(a.sum(-1, keepdims=True), 1e-300)
        result = a if result is None else a @ result
    if result is None:
        raise ValueError("rollout: no layers")
    return result


class AttentionView:
    """The attention of a model on one input, ready to show (module docstring).

    Args:
        attentions: the families, the main one first.
        title: what the input is ("pos: I saw a saw").
        prediction: the model's output in one line ("I/PRON saw/VERB a/DET saw/NOUN").
        modality: the input's own picture (default: tokens only).
        notes: lines the page prints under the title (a truncation window, a kernel that had
            to be materialised, ...).
    """

    def __init__(
        self,
        attentions: Attention | Sequence[Attention],
        *,
        title: str = "",
        prediction: str = "",
        modality: Modality | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        self.attentions = [attentions] if isinstance(attentions, Attention) else list(attentions)
        if not self.attentions:
            raise ValueError("AttentionView: no attention to show")
        names = [a.name for a in self.attentions]
        if len(set(names)) != len(names):
            raise ValueError(f"AttentionView: attention names must differ, got {names}")
        self.title = title
        self.prediction = prediction
        self.modality = modality or Modality()
        self.notes = list(notes)

    @property
    def weights(self) -> dict[str, list[np.ndarray]]:
        """The arrays the page shows: per family name, per layer ``(h, i, j)`` float32."""
        return {a.name: a.weights for a in self.attentions}

    def html(self, *, precision: str = "auto", max_bytes: int | None = None) -> str:
        """The self-contained page (:func:`.page.render`): ``precision`` ``"float16"``,
        ``"uint8"`` (8 bits a weight, a scale per row) or ``"auto"`` (float16 for small inputs,
        else as many bits as keep the page within ``max_bytes``, default 5 MB)."""
        return render(self, precision=precision, max_bytes=max_bytes or MAX_BYTES)

    def save(
        self, path: str | Path, *, precision: str = "auto", max_bytes: int | None = None
    ) -> Path:
        """Write :meth:`html` to ``path`` (atomically; parent directories created) and return
        the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.html(precision=precision, max_bytes=max_bytes), encoding="utf-8")
        tmp.replace(path)
        return path

    def _repr_html_(self) -> str:
        """Jupyter: the page in a sandboxed ``iframe`` (``srcdoc``), so that it renders inline
        and in a notebook saved and opened offline, and its script cannot touch the notebook."""
        import html

        return (
            f'<iframe srcdoc="{html.escape(self.html(), quote=True)}" '
            'style="width:100%;height:760px;border:1px solid #ddd" '
            'sandbox="allow-scripts"></iframe>'
        )

    def __repr__(self) -> str:
        return f"AttentionView({self.title!r}, {self.attentions})"


def _float_array(w: Tensor | np.ndarray, what: str, name: str) -> np.ndarray:
    a = w.detach().float().cpu().numpy() if isinstance(w, Tensor) else np.asarray(w, np.float32)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3:
        raise ValueError(f"Attention {name!r}: {what} must be (h, i, j), got shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float32)
