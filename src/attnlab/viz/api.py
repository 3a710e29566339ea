"""``attnlab.viz.view``: a model, or a trained run of the lab, to an :class:`AttentionView`.

This is the one module of the library that opens the lab (like ``python -m attnlab``): a run
directory is the lab's format, so a run given by path is handed to
:func:`attnlab.lab.view.view_run`. A model object never touches the lab.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from .capture import view_module
from .view import AttentionView

__all__ = ["view"]


def view(
    model_or_run: nn.Module | str | Path, inputs: Any, *args: Any, **opts: Any
) -> AttentionView:
    """The attention of a model on one input, as an :class:`AttentionView`.

    Args:
        model_or_run: an ``nn.Module`` with attention layers (``attnlab.MultiHeadAttention`` or
            ``torch.nn.MultiheadAttention``), or a trained run of the lab (its directory or
            checkpoint file).
        inputs: for a module, its first forward argument (a batch; the view shows element
            ``index=0``), with ``*args`` and the keyword options other than the viewer's
            (``tokens``, ``context_tokens``, ``title``, ``index``) passed to its forward; for a run,
            the task's input as ``attnlab show`` takes it (a sentence, a wav path, an image index,
            a node id, a SMILES, a word, a ListOps expression), ``opts`` being the task's own
            ``show`` flags (``node=12``, ``index=3``).

    Raises:
        ValueError: a model without attention; an input the task cannot read (one line saying
            which and why).
    """
    if isinstance(model_or_run, nn.Module):
        return view_module(model_or_run, inputs, *args, **opts)
    if isinstance(model_or_run, (str, Path)):
        from attnlab.lab.view import view_run

        return view_run(model_or_run, inputs, **opts)
    raise TypeError(
        f"view: model_or_run must be an nn.Module or a run's path, got {type(model_or_run).__name__}"
    )
