"""Start a model from another model's weights (``--model.init``): by parameter name, with the
rows of vocabulary-indexed parameters matched by their string.

Pre-training and fine-tuning build their vocabularies from different text, so word ``w`` has one
id in the pre-trained embedding and another in the new model's. :func:`vocab_rows` pairs the ids
of the strings both vocabularies hold (the new vocabulary's word looked up as the pre-trained one
normalises it: a lowercased vocabulary serves ``The`` with the row of ``the``);
:func:`transfer_weights` copies those rows, every other parameter whose name and shape match,
and leaves the rest (the task's head, words the pre-training never saw) at their fresh init.

Legend: ``V`` vocabulary size, ``d`` embedding width.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import Tensor, nn

from attnlab.lab.models.vocab import Vocabulary

__all__ = ["RowMap", "TransferReport", "vocab_rows", "transfer_weights"]


class RowMap(NamedTuple):
    """``target[dst[r]] = source[src[r]]`` for the rows of a vocabulary-indexed parameter.

    Attributes:
        dst: row ids in the new model's parameter ``(r,)``.
        src: the same strings' row ids in the pre-trained parameter ``(r,)``.
        rows: how many rows the new parameter has (its vocabulary's size).
    """

    dst: Tensor
    src: Tensor
    rows: int


def vocab_rows(target: Vocabulary, source: Vocabulary) -> RowMap:
    """The rows of ``target``'s entries that ``source`` holds too, specials included
    (``<pad>``, ``<unk>``), in ``target`` id order."""
    pairs = [(i, source.index(t)) for i, t in enumerate(target.tokens) if t in source]
    dst, src = zip(*pairs) if pairs else ((), ())
    return RowMap(torch.tensor(dst, dtype=torch.long), torch.tensor(src, dtype=torch.long),
                  len(target))  # fmt: skip


@dataclass
class TransferReport:
    """What :func:`transfer_weights` did, parameter by parameter.

    Attributes:
        loaded: names copied whole.
        remapped: name -> ``(rows copied, rows)`` of the vocabulary-indexed parameters.
        fresh: names of the new model left at their init (its head, or absent from the source).
        unused: names of the source not used (its head, or absent from the new model).
    """

    loaded: list[str] = field(default_factory=list)
    remapped: dict[str, tuple[int, int]] = field(default_factory=dict)
    fresh: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report for people, one line each."""
        out = [f"loaded {len(self.loaded)} tensors whole: {_names(self.loaded)}"]
        for name, (hit, total) in self.remapped.items():
            out.append(f"{name}: {hit:,} of {total:,} rows ({hit / max(total, 1):.1%}) by "
                       f"their string, {total - hit:,} left fresh")  # fmt: skip
        out.append(f"left fresh: {_names(self.fresh) or 'nothing'}")
        out.append(f"not used from the checkpoint: {_names(self.unused) or 'nothing'}")
        return out


def _names(names: list[str], most: int = 8) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


@torch.no_grad()
def transfer_weights(
    model: nn.Module,
    source: Mapping[str, Tensor],
    *,
    rows: Mapping[str, RowMap] | None = None,
    skip: tuple[str, ...] = ("head.",),
) -> TransferReport:
    """Copy ``source``'s tensors into ``model``'s parameters and buffers of the same name.

    Args:
        model: the new model; changed in place.
        source: a ``state_dict`` (e.g. a checkpoint's ``"model"``).
        rows: for vocabulary-indexed parameters (``inputs.embed.weight``): which rows to copy
            (:func:`vocab_rows`); the other rows keep their init.
        skip: name prefixes never copied (the task's head: its labels are the task's own).

    Raises:
        ValueError: a name in both whose shapes differ (the message names it and both
            shapes; for remapped rows, the row width), or no tensor at all in common.
    """
    rows = rows or {}
    report = TransferReport()
    target = model.state_dict()  # tensors sharing the model's storage
    for name, dst in target.items():
        src = source.get(name)
        if name.startswith(skip) or src is None:
            report.fresh.append(name)
            continue
        if name in rows:
            if src.shape[1:] != dst.shape[1:]:
                raise _mismatch(name, src, dst, "rows of width")
            m = rows[name]
            dst[m.dst] = src[m.src].to(dst)  # (r, d)
            report.remapped[name] = (len(m.dst), m.rows)
            continue
        if src.shape != dst.shape:
            raise _mismatch(name, src, dst, "shape")
        dst.copy_(src)
        report.loaded.append(name)
    report.unused = [n for n in source if n.startswith(skip) or n not in target]
    if not report.loaded and not report.remapped:
        raise ValueError(
            f"no parameter name of the checkpoint is in this model (it has "
            f"{_names(list(source), 4)}; this model {_names(list(target), 4)}): build it with "
            "the pre-trained run's --model.input / --model.encoder settings"
        )
    return report


def _mismatch(name: str, src: Tensor, dst: Tensor, what: str) -> ValueError:
    shapes = (tuple(src.shape), tuple(dst.shape))
    if what != "shape":
        shapes = (tuple(src.shape[1:]), tuple(dst.shape[1:]))
    return ValueError(
        f"parameter {name}: the checkpoint's has {what} {shapes[0]}, this model's {shapes[1]}; "
        "build the model with the pre-trained run's --model.input / --model.encoder settings"
    )
