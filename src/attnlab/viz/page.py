"""One self-contained HTML page of an :class:`~.view.AttentionView`: no network, no CDN.

The page is this package's ``assets/viewer.css`` and ``assets/viewer.js`` (written for
attnlab, no library) inlined, and the data in two ``<script>`` elements:

* ``attnlab-meta`` (JSON): the title, prediction, notes, the modality's fields, and per family
  its labels and where each layer's arrays lie in the blob;
* ``attnlab-data``: one binary blob, zlib-compressed (the browser's
  ``DecompressionStream("deflate")`` inflates it), base64. Weights are stored as ``float16``
  (relative error <= 2^-11) or, past :data:`FLOAT16_LIMIT` weights, as ``b`` bits with a
  float32 scale per row, the row's maximum (error <= max / (2 (2^b - 1))); ``b`` is 8, or fewer
  (down to 4) where that keeps the page within :data:`MAX_BYTES`. The page states which, and its
  tooltip prints each weight with its bound. Masked pairs are one byte each (1 = masked).

The modality's fields (``Modality.data``), per kind: ``speech``: ``hop_s`` (seconds per
spectrogram column), ``position_s`` (seconds per attention position), ``window`` ([left, right]
positions a query may see, or null), array ``spectrogram`` (mels x columns, uint8 0-255 over
``db_range``); ``image``: ``grid`` ([rows, cols] of attention positions over the image),
``cls`` (position 0 is a class token), array ``pixels`` (H x W, or H x W x 3, uint8);
``graph``: ``nodes`` (labels), ``xy`` (layout, [0, 1]), ``edges`` ([source, target] position
pairs), ``center`` (the chosen node's position), ``node_labels`` (predicted class per node);
``molecule``: ``atoms`` (symbols), ``xy`` (RDKit 2-D coordinates), ``bonds`` ([a, b, order]),
``readout`` (the pooling attention over atoms, or null).
"""

from __future__ import annotations

import base64
import html
import json
import logging
import re
import zlib
from importlib import resources
from typing import Any

import numpy as np

__all__ = ["render", "read_page", "FLOAT16_LIMIT", "MAX_BYTES", "READY_FLAG"]

logger = logging.getLogger(__name__)

#: up to this many weights (all families and layers), weights are stored as float16
FLOAT16_LIMIT = 2_000_000
#: the page's size budget (bytes) for ``precision="auto"``
MAX_BYTES = 5_000_000
#: the page sets ``window[READY_FLAG] = true`` once it has decoded its data and drawn
READY_FLAG = "attnlabReady"
PRECISIONS = ("auto", "float16", "uint8")


class _Blob:
    """Arrays laid end to end, each at a multiple of 4 bytes (so that the page's typed arrays
    can view them in place)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0

    def add(self, array: np.ndarray) -> dict[str, Any]:
        array = np.ascontiguousarray(array)
        dtype = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
                 np.dtype(np.uint8): "u8"}[array.dtype]  # fmt: skip
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        ref = {"offset": self.size, "dtype": dtype, "shape": list(array.shape)}
        pad = -len(data) % 4
        self.parts.append(data + b"\0" * pad)
        self.size += len(data) + pad
        return ref

    def encoded(self) -> str:
        return base64.b64encode(zlib.compress(b"".join(self.parts), 6)).decode("ascii")


def _weights(blob: _Blob, w: np.ndarray, precision: str, bits: int) -> dict[str, Any]:
    """One ``(h, i, j)`` layer: ``{"w": ref}`` (float16) or ``{"w": ref, "scale": ref, "levels":
    L}`` (``round(w / row max * L)`` as uint8, ``L = 2**bits - 1``, the row maxima as float32)."""
    if precision == "float16":
        return {"w": blob.add(w.astype(np.float16))}
    levels = 2**bits - 1
    scale = w.max(-1).astype(np.float32)  # (h, i)
    safe = np.where(scale > 0, scale, 1.0)[..., None]
    q = np.clip(np.rint(w / safe * levels), 0, levels).astype(np.uint8)
    return {"w": blob.add(q), "scale": blob.add(scale), "levels": levels}


def render(view: Any, *, precision: str = "auto", max_bytes: int = MAX_BYTES) -> str:
    """The page of ``view`` (an :class:`~.view.AttentionView`; module docstring), as a string.

    ``precision``: ``"float16"``; ``"uint8"`` (8 bits a weight, a scale per row); or
    ``"auto"``: float16 up to :data:`FLOAT16_LIMIT` weights, else the most bits a weight (8 down
    to 4, a scale per row) that keep the page within ``max_bytes``. A page that is over
    ``max_bytes`` even so is written, and logged: view fewer layers or a shorter input.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    total = sum(w.size for a in view.attentions for w in a.weights)
    if precision == "float16" or (precision == "auto" and total <= FLOAT16_LIMIT):
        page = _render(view, "float16", 16)
        if precision == "float16" or len(page) <= max_bytes:
            return page
    for bits in _bits_to_try(view, max_bytes) if precision == "auto" else (8,):
        page = _render(view, "uint", bits)
        if len(page) <= max_bytes:
            return page
    logger.warning(
        "the attention page is %.1f MB, over the %.1f MB budget even at %d bits a weight: "
        "view fewer layers or a shorter input", len(page) / 1e6, max_bytes / 1e6, bits,
    )  # fmt: skip
    return page


def _bits_to_try(view: Any, max_bytes: int) -> list[int]:
    """8 down to 4 bits a weight, starting at the most whose page, estimated from each family's
    first layer compressed alone, fits in ``max_bytes`` (writing a large page once, not five
    times)."""
    layers = sum(len(a.weights) for a in view.attentions)
    ladder = [8, 7, 6, 5, 4]
    for k, bits in enumerate(ladder):
        sample = _Blob()
        for a in view.attentions:
            _weights(sample, a.weights[0], "uint", bits)
        if len(sample.encoded()) * layers / len(view.attentions) <= 0.9 * max_bytes:
            return ladder[k:]
    return ladder[-1:]


def _render(view: Any, precision: str, bits: int) -> str:
    blob = _Blob()
    families = []
    for a in view.attentions:
        layers = []
        for w, m in zip(a.weights, a.masked):
            layer = {"heads": int(w.shape[0]), **_weights(blob, w, precision, bits)}
            layer["mask"] = None if m is None else blob.add(m.astype(np.uint8))
            layers.append(layer)
        roll = a.rollout()
        families.append({
            "name": a.name, "queries": a.queries, "keys": a.keys, "square": a.square,
            "layers": layers,
            "rollout": None if roll is None else _weights(blob, roll[None].astype(np.float32),
                                                          precision, bits),
        })  # fmt: skip
    meta = {  # the view's fields the page reads (its arrays go in the blob)
        "title": view.title,
        "prediction": view.prediction,
        "notes": view.notes,
        "modality": {"kind": view.modality.kind, **view.modality.data},
        "precision": "float16" if precision == "float16" else f"{bits}-bit",
        "attentions": families,
        "arrays": {k: blob.add(v) for k, v in view.modality.arrays.items()},
        "ready_flag": READY_FLAG,
    }
    return _TEMPLATE.format(
        title=html.escape(view.title or "attention"),
        css=_asset("viewer.css"),
        js=_asset("viewer.js"),
        meta=_script_json(meta),
        data=blob.encoded(),
    )


def read_page(page: str) -> dict[str, Any]:
    """The data of a page :func:`render` wrote, decoded as the browser decodes it: the meta
    JSON with, per family and layer, ``"weights"`` (``(h, i, j)`` float32 as the page shows
    them), ``"masked"`` (bool or None) and ``"rollout"`` (``(n, n)`` or None). For tests and
    for reading a saved page back."""
    meta = json.loads(_between(page, "attnlab-meta").replace("<\\/", "</"))
    raw = zlib.decompress(base64.b64decode(_between(page, "attnlab-data")))
    for family in meta["attentions"]:
        for layer in family["layers"]:
            layer["weights"] = _decode_weights(raw, layer)
            layer["masked"] = None if layer["mask"] is None else _view(raw, layer["mask"]) > 0
        roll = family["rollout"]
        family["rollout"] = None if roll is None else _decode_weights(raw, roll)[0]
    meta["arrays"] = {k: _view(raw, ref) for k, ref in meta["arrays"].items()}
    return meta


def _decode_weights(raw: bytes, layer: dict[str, Any]) -> np.ndarray:
    w = _view(raw, layer["w"]).astype(np.float32)
    if "scale" in layer:
        w = w / layer["levels"] * _view(raw, layer["scale"])[..., None]
    return w


def _view(raw: bytes, ref: dict[str, Any]) -> np.ndarray:
    dtype = np.dtype({"f16": "<f2", "f32": "<f4", "u8": "u1"}[ref["dtype"]])
    count = int(np.prod(ref["shape"]))
    return np.frombuffer(raw, dtype, count, ref["offset"]).reshape(ref["shape"])


def _between(page: str, element_id: str) -> str:
    match = re.search(rf'<script id="{element_id}"[^>]*>(.*?)</script>', page, re.S)
    if match is None:
        raise ValueError(f"not an attnlab attention page: no <script id={element_id!r}>")
    return match.group(1).strip()


def _script_json(value: Any) -> str:
    """JSON safe inside ``<script>``: ``</`` cannot end the element."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


def _asset(name: str) -> str:
    return resources.files("attnlab.viz").joinpath("assets", name).read_text(encoding="utf-8")


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data: blob:; connect-src data: blob:">
<title>{title}</title>
<style>
{css}
</style>
</head>
<body>
<div id="app">loading the attention data&hellip; (this page needs JavaScript)</div>
<script id="attnlab-meta" type="application/json">{meta}</script>
<script id="attnlab-data" type="application/octet-stream">{data}</script>
<script>
{js}
</script>
</body>
</html>
"""
