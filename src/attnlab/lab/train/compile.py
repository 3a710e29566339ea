"""``train.compile``: the model under ``torch.compile``, without a recompile per batch.

Text batches change shape at every step (``(b, n)`` tokens, ``(b, n, c)`` characters). With
static shapes ``torch.compile`` would trace and compile the model again for every new shape (a
minute each on a small CPU) and, past ``torch._dynamo.config.recompile_limit``, silently fall
back to eager. Two things keep the number of compilations small and fixed:

* **Dynamic shapes** (``torch.compile(model, dynamic=True)``): sizes are traced as symbols, so
  one graph serves every batch size and sequence length. The attention layer and its
  ``masks.padding(lengths)`` mask are size-generic; the mask's Python-side checks (the
  lengths' minimum and maximum) are graph breaks, not recompiles.
* **A few padded sizes** (``train.pad_multiple``, default 8 under compile): some kernels still
  pin a size. Inductor's convolution backward specialises the convolved length, i.e. the
  characters per word of :class:`~attnlab.lab.models.chars.CharCNN`; rounding every padded
  dimension up to a multiple of 8 leaves it two or three values (8, 16, 24), so the model
  compiles a handful of times in its first steps and then never again.

Padding is inert: integer and boolean tensors of a batch grow along their non-batch dimensions,
filled with 0 (the padding id of every input of :mod:`attnlab.lab.models.batch`: tokens,
characters, word shapes) and -100 for ``labels`` (:func:`torch.nn.functional.cross_entropy`'s
``ignore_index``); ``lengths`` (1-D) is untouched, so masks built from it keep the extra
positions out of every attention row, pooling and loss. Float tensors are left alone (a task
with float sequence features, which padding cannot pad safely, sets ``pad_multiple=1``).
With dropout the padded batch draws more random numbers (the masks differ, not their law).

Random numbers on CPU: Inductor's in-kernel generator (a Philox draw per element, in scalar
code) costs about three times ATen's vectorised ``bernoulli_`` there, so on CPU the compiled
model keeps ATen's dropout (Inductor's ``fallback_random``): ``F.dropout``'s draws from torch's
generator. attnlab's own dropouts (:mod:`attnlab.dropout`: four 16-bit draws per 64-bit
number) reach the compiled graph as an opaque operator seeded by a number the graph draws, so a
compiled CPU run draws other masks than the eager run, of the same law: it is reproducible and
resumes exactly, and without dropout it equals the eager run to float rounding. On CUDA,
Inductor's fused Philox is the fast path and is kept.

Compiled kernels are kept across runs (:func:`keep_compiled_artefacts`): in attnlab's cache
unless ``$TORCHINDUCTOR_CACHE_DIR`` says otherwise.

DDP: the *wrapped* module is compiled (``torch.compile(DistributedDataParallel(model))``, as
PyTorch recommends), so Dynamo's DDP optimizer splits the graph at the gradient buckets and the
all-reduce overlaps the backward pass. Checkpoints always hold the plain module's state dict
(the trainer saves :attr:`Trainer.model`, never the compiled wrapper), so their keys carry no
``_orig_mod.`` prefix; :func:`unwrap` recovers the plain module from any wrapper.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

__all__ = [
    "COMPILE_MODES",
    "DEFAULT_PAD_MULTIPLE",
    "LABEL_PAD",
    "PaddedCollate",
    "compile_model",
    "keep_compiled_artefacts",
    "pad_batch",
    "pad_multiple_of",
    "unwrap",
]

#: the ``mode`` values of :func:`torch.compile`
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: ``train.pad_multiple`` under ``train.compile`` when it is not set
DEFAULT_PAD_MULTIPLE = 8
#: the padding value of ``labels``: cross-entropy's ``ignore_index`` (the text tasks' IGNORE)
LABEL_PAD = -100


def compile_model(
    model: nn.Module, *, mode: str = "default", device: torch.device | str | None = None
) -> nn.Module:
    """``torch.compile(model, mode=mode, dynamic=True)``, with ATen's dropout on CPU (see the
    module docstring).

    Args:
        model: the module to call, a ``DistributedDataParallel`` wrapper under DDP.
        mode: one of :data:`COMPILE_MODES`.
        device: where the model runs (default: the device of its first parameter, else CPU).

    Returns:
        The compiled wrapper; it shares ``model``'s parameters (train it, save ``model``).
    """
    if mode not in COMPILE_MODES:
        raise ValueError(
            f"train.compile_mode must be one of {', '.join(COMPILE_MODES)}; got {mode!r}"
        )
    if device is None:
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
    keep_compiled_artefacts()
    # torch.compile takes a mode or Inductor options, not both: the mode's options plus ours.
    options = dict(torch._inductor.list_mode_options(mode, dynamic=True))
    options["fallback_random"] = torch.device(device).type == "cpu"
    return torch.compile(model, dynamic=True, options=options)


def keep_compiled_artefacts() -> Path:
    """Where Inductor keeps what it compiled (its FX-graph and AOTAutograd caches, on by
    default): ``$TORCHINDUCTOR_CACHE_DIR`` if set, else ``torchinductor`` in attnlab's cache
    (:func:`~attnlab.lab.data.cache_dir`), which outlives a reboot where the temporary
    directory Inductor picks by itself does not. A later run of the same model, shapes and
    torch then loads its kernels instead of compiling them again."""
    from attnlab.lab.data import cache_dir

    if not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir() / "torchinductor")
    return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module inside ``torch.compile`` and ``DistributedDataParallel`` wrappers (in
    any order), whose ``state_dict`` keys are the model's own."""
    while True:
        if isinstance(model, torch._dynamo.eval_frame.OptimizedModule):
            model = model._orig_mod
        elif isinstance(model, DistributedDataParallel):
            model = model.module
        else:
            return model


def pad_multiple_of(compile: bool, pad_multiple: int | None) -> int:
    """The padding multiple in use: ``pad_multiple``, else 8 under compile, else 1 (none)."""
    if pad_multiple is not None:
        return pad_multiple
    return DEFAULT_PAD_MULTIPLE if compile else 1


def pad_batch(
    batch: Mapping[str, Any],
    multiple: int,
    *,
    fill: Mapping[str, int] | None = None,
    floats: Sequence[str] = (),
) -> dict[str, Any]:
    """``batch`` with every integer or boolean tensor of 2 or more dimensions padded at the end
    of each non-batch dimension to a multiple of ``multiple``, and the float tensors named in
    ``floats`` (sequences of frames, :attr:`Task.padded_floats`) padded with zeros along
    dimension 1 only.

    Args:
        batch: a collated batch (:meth:`Task.collate`).
        multiple: round up to multiples of this (1: no padding).
        fill: padding value per key (default ``{"labels": -100}``); other keys get 0 (False).

    Returns:
        A new dict; float tensors not in ``floats``, 1-D tensors (``lengths``) and other values
        are the same objects.

    Example: ``tokens (4, 13)``, ``chars (4, 13, 9)``, ``labels (4, 13)`` with ``multiple=8``
    become ``(4, 16)``, ``(4, 16, 16)`` and ``(4, 16)`` (labels padded with -100).
    """
    if not isinstance(multiple, int) or multiple < 1:
        raise ValueError(f"pad_batch: multiple must be an int >= 1, got {multiple!r}")
    fill = {"labels": LABEL_PAD} if fill is None else fill
    out = dict(batch)
    if multiple == 1:
        return out
    for key, value in batch.items():
        if not isinstance(value, Tensor) or value.dim() < 2:
            continue
        if value.is_floating_point() or value.is_complex():
            if key in floats:  # contiguous either way: a compiled graph guards on strides
                pads = [0, 0] * (value.dim() - 2) + [0, -value.shape[1] % multiple]
                out[key] = F.pad(value, pads) if any(pads) else value.contiguous()
            continue
        # F.pad lists (before, after) pairs from the last dimension backwards
        pads = [p for size in reversed(value.shape[1:]) for p in (0, -size % multiple)]
        if any(pads):
            out[key] = F.pad(value, pads, value=fill.get(key, 0))
    return out


class PaddedCollate:
    """``collate(examples)`` followed by :func:`pad_batch` (picklable, for DataLoader workers).

    Args:
        collate: the task's collate function.
        multiple: padding multiple (1: ``collate`` unchanged).
        floats: the float sequences to pad too (:attr:`Task.padded_floats`).
    """

    def __init__(self, collate: Callable[[list], Mapping[str, Any]], multiple: int,
                 floats: Sequence[str] = ()) -> None:  # fmt: skip
        if not isinstance(multiple, int) or multiple < 1:
            raise ValueError(f"train.pad_multiple must be an int >= 1, got {multiple!r}")
        self.collate, self.multiple, self.floats = collate, multiple, tuple(floats)

    def __call__(self, examples: list) -> Mapping[str, Any]:
        batch = self.collate(examples)
        if self.multiple == 1:
            return batch
        return pad_batch(batch, self.multiple, floats=self.floats)
