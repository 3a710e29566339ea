"""Checkpoints of earlier versions, read in today's layout: the one place that knows old
spellings, used by :func:`~attnlab.train.checkpoint.load_checkpoint` only.

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
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

__all__ = ["LAYOUT_VERSION", "upgrade"]

#: the layout today's code writes
LAYOUT_VERSION = 2

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


def _v1_to_v2(config: dict[str, Any], weights: dict[str, Any]) -> None:
    task, model = config.get("task"), config.get("model")
    if not isinstance(model, dict):
        return
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


#: ``_STEPS[v - 1]`` rewrites layout ``v`` into ``v + 1``
_STEPS: list[Callable[[dict[str, Any], dict[str, Any]], None]] = [_v1_to_v2]
