"""Checkpoints of earlier versions, read in today's layout: the one place that knows old
spellings, used by :func:`~attnlab.lab.train.checkpoint.load_checkpoint` only.

A checkpoint records the layout version it was written in (``version``); each step below
rewrites one version's config and weights into the next, so every older checkpoint still
loads, evaluates and resumes with the numbers it gave, while the code and the command line
know one spelling only.

* **1 -> 2** (one trunk, issue 33): every model builds its Transformer blocks from one
  :class:`~attnlab.blocks.TrunkConfig`, whose ``ff_hidden=None`` means ``4 x`` the width.
  The image encoders' ``ff_hidden=0`` and the molecule model's ``None`` meant ``2 x`` the
  width, g2p's ``0`` meant ``4 x``; they become explicit widths. An image encoder's
  ``positional="none"`` becomes None. The molecule model's blocks moved under its
  ``encoder`` (``blocks.*`` -> ``encoder.blocks.*``, ``norm.*`` -> ``encoder.norm.*``).
  The old spellings of the sequence encoder that layout 1 still read (with warnings) are
  rewritten here too, and nowhere else any more: the flat ``encoder`` section of every kind's
  fields, ``local_window`` (``window``), the attention settings at the encoder's top level
  (``attention.*``), kind ``window`` (``fc``), and the kernels' option names ``chunk``
  (``block``) and ``impl`` (``attention.backend``).
* **2 -> 3** (``train.precision``, issue 34): ``train.bf16 = true / false`` becomes
  ``train.precision = "bf16" / "fp32"``: what the run trained in, never ``auto`` (which could
  pick another dtype on another machine).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

__all__ = ["LAYOUT_VERSION", "upgrade"]

#: the layout today's code writes
LAYOUT_VERSION = 3

_IMAGE_TASKS = ("fashion", "digits")
_MOLECULE_TASKS = ("freesolv", "solubility")
_IMAGE_ATTENTION_KINDS = ("pixels", "patches", "hybrid")


def upgrade(ckpt: dict[str, Any]) -> dict[str, Any]:
    """``ckpt`` (a loaded checkpoint) in layout :data:`LAYOUT_VERSION`: its ``config`` and
    ``model`` weights rewritten step by step from its ``version``; a copy, the input is left
    as it was. A checkpoint already in today's layout is returned as it is."""
    version = ckpt.get("version")
    if version == LAYOUT_VERSION:
        return ckpt
    ckpt = copy.copy(ckpt)
    ckpt["config"] = copy.deepcopy(ckpt.get("config") or {})
    ckpt["model"] = dict(ckpt.get("model") or {})
    for step in _STEPS[version - 1 :]:
        step(ckpt["config"], ckpt["model"])
    ckpt["version"] = LAYOUT_VERSION
    return ckpt


#: every field of the flat sequence-encoder section that held all kinds; the fields each kind
#: kept when the kinds got their own configs
_FLAT_FIELDS = frozenset({
    "kind", "depth", "dropout", "heads", "ff_hidden", "norm_first", "positional", "max_len",
    "local_window", "score", "normalize", "backend", "kernel", "kernel_options", "hidden",
    "context", "conv_kernel", "residual", "cell", "bidirectional",
})  # fmt: skip
_KIND_FIELDS = {
    "transformer": {"depth", "dropout", "heads", "ff_hidden", "norm_first", "positional",
                    "max_len", "local_window", "score", "normalize", "backend", "kernel",
                    "kernel_options"},
    "fc": {"depth", "dropout", "hidden", "context"},
    "cnn": {"depth", "dropout", "hidden", "conv_kernel", "residual"},
    "rnn": {"depth", "dropout", "hidden", "cell", "bidirectional"},
}  # fmt: skip
_ATTENTION_FIELDS = ("score", "normalize", "backend", "kernel", "kernel_options")
_RENAMED_KERNEL_OPTIONS = {"chunk": "block"}


def _sequence_encoder(encoder: dict[str, Any]) -> None:
    """A text / speech / long-range encoder section in today's spelling, in place."""
    if encoder.get("kind") == "window":
        encoder["kind"] = "fc"
    kind = encoder.get("kind", "transformer")
    if {*encoder, "kind"} >= _FLAT_FIELDS and kind in _KIND_FIELDS:
        for key in set(encoder) - _KIND_FIELDS[kind] - {"kind"}:
            del encoder[key]
    if "local_window" in encoder:
        encoder["window"] = encoder.pop("local_window")
    attention = dict(encoder.get("attention") or {})
    for key in _ATTENTION_FIELDS:
        if key in encoder:
            attention[key] = encoder.pop(key)
    options = dict(attention.get("kernel_options") or {})
    for old, new in _RENAMED_KERNEL_OPTIONS.items():
        if old in options:
            options[new] = options.pop(old)
    if "impl" in options:  # the sparse kernels' way to compute is attention.backend
        attention["backend"] = options.pop("impl")
    if attention:
        attention["kernel_options"] = options
        encoder["attention"] = attention


def _v1_to_v2(config: dict[str, Any], weights: dict[str, Any]) -> None:
    task, model = config.get("task"), config.get("model")
    if not isinstance(model, dict):
        return
    if task not in _IMAGE_TASKS and isinstance(model.get("encoder"), dict):
        _sequence_encoder(model["encoder"])
    if task in _IMAGE_TASKS:
        encoder = model.get("encoder") or {}
        if encoder.get("kind", "patches") in _IMAGE_ATTENTION_KINDS:
            if encoder.get("ff_hidden") in (0, None):  # 0 was 2 x dim
                encoder["ff_hidden"] = 2 * encoder.get("dim", 64)
            if encoder.get("positional") == "none":
                encoder["positional"] = None
    elif task in _MOLECULE_TASKS:
        if model.get("ff_hidden") is None:  # None was 2 x dim
            model["ff_hidden"] = 2 * model.get("dim", 64)
        for key in [k for k in weights if k.startswith(("blocks.", "norm."))]:
            weights[f"encoder.{key}"] = weights.pop(key)
    elif task == "g2p" and model.get("ff_hidden") == 0:  # 0 was 4 x dim, today's None
        model["ff_hidden"] = None


def _v2_to_v3(config: dict[str, Any], weights: dict[str, Any]) -> None:
    train = config.get("train")
    if isinstance(train, dict) and "bf16" in train:
        train["precision"] = "bf16" if train.pop("bf16") else "fp32"


#: ``_STEPS[v - 1]`` rewrites layout ``v`` into ``v + 1``
_STEPS: list[Callable[[dict[str, Any], dict[str, Any]], None]] = [_v1_to_v2, _v2_to_v3]
