"""Checkpoints: atomic, complete enough to resume bit-exactly, and loadable for inference.

A checkpoint is a ``torch.save``-d dict, loadable with ``weights_only=True``:

=============  ==============================================================================
key            content
=============  ==============================================================================
``version``    :data:`CHECKPOINT_VERSION`
``model``      the (unwrapped) model's ``state_dict``
``optimizer``  AdamW's ``state_dict``
``scheduler``  the LR scheduler's ``state_dict``
``rng``        one :func:`~attnlab.lab.train.rng.get_rng_state` per rank (torch, Python, NumPy)
``state``      :class:`~attnlab.lab.train.state.TrainState`: step, epoch, position in the epoch,
               running sums, best score, early-stopping counter, evaluation history
``config``     the resolved :class:`~attnlab.lab.train.config.RunConfig` as a dict
``task``       the task's ``state_dict()`` (vocabularies)
``world_size`` number of ranks that wrote it
=============  ==============================================================================

A run directory holds ``last.pt`` (written every ``checkpoint_every`` steps, at evaluations
and epoch ends at most every ``checkpoint_interval`` and whenever ``best.pt`` is, and when a
run stops; what ``resume`` continues from) and ``best.pt`` (the best dev score so far;
what the final test evaluation and :func:`load_for_inference` use).

A file that cannot be read (empty, truncated, random bytes, another program's pickle) raises
:class:`CheckpointError` with one line saying so; torch's own message is never passed on (for a
foreign pickle it advises ``weights_only=False``, which would run code from the file). When a
run directory's ``best.pt`` is unreadable but its ``last.pt`` is good, :func:`load_for_inference`
refuses and names ``last.pt`` for the user to pass explicitly, rather than silently serving it:
``last.pt`` holds the latest step's weights, not the best dev score's, and numbers from it must
not pass for the run's best model.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from attnlab.lab.train.atomic import atomic_write
from attnlab.lab.train.errors import RunError
from attnlab.lab.train.legacy import LAYOUT_VERSION, upgrade
from attnlab.provenance import code_identity, provenance

if TYPE_CHECKING:
    from attnlab.lab.tasks.base import Task
    from attnlab.lab.train.config import RunConfig

__all__ = [
    "CHECKPOINT_VERSION",
    "CheckpointError",
    "LAST",
    "BEST",
    "save_checkpoint",
    "load_checkpoint",
    "find_checkpoint",
    "load_for_inference",
    "load_weights",
    "config_changes",
]

#: the layout this code writes; older ones (from 1) are read through :func:`.legacy.upgrade`
CHECKPOINT_VERSION = LAYOUT_VERSION
LAST = "last.pt"
BEST = "best.pt"


def save_checkpoint(path: str | Path, checkpoint: dict[str, Any]) -> Path:
    """Atomically ``torch.save`` ``checkpoint`` to ``path`` (temporary file in the same
    directory, fsync, ``os.replace``): a crash mid-write, or a full disk, leaves the previous
    file intact.

    Raises:
        DiskFullError: no space left; the message names the directory and the bytes needed.
    """
    payload = {"version": CHECKPOINT_VERSION, "written_by": provenance(), **checkpoint}
    return atomic_write(path, lambda f: torch.save(payload, f), size_hint=_tensor_bytes(payload))


def _tensor_bytes(obj: Any) -> int:
    """The bytes of every tensor in a nested dict/list: about what ``torch.save`` writes."""
    if isinstance(obj, torch.Tensor):
        return obj.nelement() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


class CheckpointError(RunError):
    """A checkpoint file cannot be used: empty, truncated, corrupt, or not an attnlab checkpoint
    of this version. The message names the file (and a readable alternative, if any)."""


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (``weights_only=True``), in today's
    layout: one of an earlier version is rewritten by :func:`.legacy.upgrade`.

    Raises:
        FileNotFoundError, PermissionError, IsADirectoryError: the file cannot be opened.
        CheckpointError: the file is empty, truncated or corrupt, or not an attnlab checkpoint
            of version :data:`CHECKPOINT_VERSION`.
    """
    try:
        with warnings.catch_warnings():  # a foreign pickle's protocol: the error below says more
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except Exception as err:  # torch raises a dozen types for bad bytes; none is the user's bug
        raise CheckpointError(f"{path}: {_unreadable(Path(path), err)}") from None
    version = ckpt.get("version") if isinstance(ckpt, dict) else None
    if not (isinstance(version, int) and 1 <= version <= CHECKPOINT_VERSION):
        raise CheckpointError(
            f"{path}: not an attnlab checkpoint of versions 1 to {CHECKPOINT_VERSION} (got "
            f"{version!r})" + ("; it is newer than this attnlab: update attnlab to read it"
                               if isinstance(version, int) and version > CHECKPOINT_VERSION
                               else "")
        )  # fmt: skip
    return upgrade(ckpt)


def _unreadable(path: Path, err: Exception) -> str:
    """Why ``torch.load`` failed, in words, without torch's text (it may advise
    ``weights_only=False``: unsafe for a file of unknown origin)."""
    size = path.stat().st_size if path.is_file() else 0
    if size == 0:
        return "not a readable checkpoint: the file is empty (0 bytes)"
    if "Unsupported global" in str(err):
        return (
            "not an attnlab checkpoint: it holds Python objects other than tensors and plain "
            "data, which attnlab checkpoints never do (loading it could run code from the file)"
        )
    with path.open("rb") as f:
        zipped = f.read(4) == b"PK\x03\x04"  # torch.save writes a zip archive
    what = "the file is truncated or corrupt" if zipped else "torch.save did not write it"
    return (
        f"not a readable checkpoint: {what} ({size} bytes; torch.load failed with "
        f"{type(err).__name__})"
    )


def find_checkpoint(path: str | Path) -> Path:
    """``path`` itself if it is a file; for a run directory its ``best.pt``, else ``last.pt``."""
    path = Path(path)
    if path.is_dir():
        for name in (BEST, LAST):
            if (path / name).is_file():
                return path / name
        raise FileNotFoundError(f"{path} holds neither {BEST} nor {LAST}")
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return path


def load_for_inference(
    path: str | Path,
    *,
    device: str | torch.device = "cpu",
    setup: bool = False,
) -> tuple[Task, nn.Module, RunConfig]:
    """Rebuild ``(task, model, cfg)`` from a checkpoint or a run directory, for eval/predict.

    Args:
        path: a ``.pt`` file or a run directory (its ``best.pt``, else ``last.pt``).
        device: where to put the model.
        setup: also call ``task.setup(cfg.task_options)`` (loads the data splits, keeping the
            checkpoint's vocabularies); not needed to predict on new inputs.

    Returns:
        The task with its vocabularies restored, the model with the checkpoint's weights in
        eval mode, and the run's config.

    Raises:
        CheckpointError: the checkpoint cannot be read; when the other checkpoint of its run
            directory (``last.pt`` for ``best.pt`` and vice versa) is readable, the message
            names it, to be passed explicitly (it is never used in the unreadable one's place).
    """
    from attnlab.lab.tasks.registry import TASKS
    from attnlab.lab.train.config import RunConfig

    chosen = find_checkpoint(path)
    try:
        ckpt = load_checkpoint(chosen, map_location="cpu")
    except CheckpointError as err:
        raise CheckpointError(f"{err}{_readable_sibling(chosen)}") from None
    cfg = RunConfig.from_dict(ckpt["config"])
    task = TASKS.get(cfg.task)()
    task.load_state_dict(ckpt["task"])
    task.load_run_data(Path(chosen).parent)  # the data the run kept (its splits)
    if setup:
        task.setup(cfg.task_options)
    model = task.build_model(cfg.model)
    load_weights(model, ckpt, chosen)
    return task, model.to(device).eval(), cfg


def load_weights(model: nn.Module, ckpt: dict[str, Any], path: str | Path) -> None:
    """``model.load_state_dict(ckpt["model"])``, after checking that the weights fit.

    A checkpoint's weights stop fitting the model its own config builds when the code that
    builds it changed (a layer renamed, a default width changed) between the attnlab that
    wrote the checkpoint and the one reading it.

    Raises:
        CheckpointError: a weight the model lacks, a weight the checkpoint lacks, or a shape
            that differs; the message names the first, both shapes, and which side is older
            (from the checkpoint's ``written_by`` against this code's
            :func:`~attnlab.provenance.code_identity`).
    """
    problem = _weights_mismatch(ckpt["model"], model.state_dict())
    if problem:
        raise CheckpointError(
            f"{path}: its weights do not fit the model its config builds: {problem}; "
            f"{_which_is_older(ckpt.get('written_by'))}"
        )
    model.load_state_dict(ckpt["model"])


def _weights_mismatch(saved: dict[str, torch.Tensor], own: dict[str, torch.Tensor]) -> str:
    """The first difference between a checkpoint's weights and a model's, in words."""

    def more(items: list) -> str:
        return f" (and {len(items) - 1} more)" if len(items) > 1 else ""

    shapes = [k for k in own if k in saved and saved[k].shape != own[k].shape]
    if shapes:
        k = shapes[0]
        return (f"{k!r} is {tuple(saved[k].shape)} in the checkpoint but "
                f"{tuple(own[k].shape)} in the model{more(shapes)}")  # fmt: skip
    lacking = [k for k in own if k not in saved]
    if lacking:
        return f"the model has {lacking[0]!r}{more(lacking)}, which the checkpoint lacks"
    extra = [k for k in saved if k not in own]
    if extra:
        return f"the checkpoint has {extra[0]!r}{more(extra)}, which the model lacks"
    return ""


def _which_is_older(written_by: dict[str, Any] | None) -> str:
    """Which of the checkpoint's code and this code is older, and what to do, in words."""
    here = code_identity()
    this = _describe_code(here)
    if not written_by:
        return (f"the checkpoint predates attnlab's version stamps, so it is older than this "
                f"code ({this}): load it with the attnlab that wrote it, or retrain")  # fmt: skip
    then = _describe_code(written_by)
    a, b = written_by.get("commit_time"), here.get("commit_time")
    if written_by.get("commit") and written_by.get("commit") == here.get("commit"):
        return (f"the checkpoint was written at this code's commit ({then}), so uncommitted "
                "changes to the model code made the difference: undo them, or retrain")  # fmt: skip
    if a is None or b is None:
        return (f"the checkpoint was written by {then}, this is {this}: load it with the "
                "attnlab that wrote it, or retrain")  # fmt: skip
    if a < b:
        return (f"the checkpoint is older: written by {then}, read by {this}; load it with "
                f"the attnlab that wrote it (git checkout {written_by['commit'][:12]}), or "
                "retrain")  # fmt: skip
    return (f"the checkpoint is newer: written by {then}, read by {this}; update attnlab to "
            "read it")  # fmt: skip


def _describe_code(ident: dict[str, Any]) -> str:
    """``attnlab 0.1.0 at commit abc123456789 (2026-12-03)``, from what ``ident`` holds."""
    import time

    text = f"attnlab {ident.get('attnlab', '?')}"
    if ident.get("commit"):
        text += f" at commit {ident['commit'][:12]}"
        if ident.get("commit_time") is not None:
            text += time.strftime(" (%Y-%m-%d)", time.gmtime(ident["commit_time"]))
        if ident.get("dirty"):
            text += " with uncommitted changes"
    return text


def _readable_sibling(path: Path) -> str:
    """For an unreadable ``best.pt`` / ``last.pt``: what its run directory offers instead."""
    names = {BEST: LAST, LAST: BEST}
    if path.name not in names or not (path.parent / names[path.name]).is_file():
        return ""
    other = path.parent / names[path.name]
    try:
        step = load_checkpoint(other)["state"]["step"]
    except (CheckpointError, KeyError, TypeError, OSError):
        return f"; {other} is unreadable too"
    what = "the latest weights" if other.name == LAST else "the best dev score's weights"
    return f"; {other} is readable ({what}, step {step}): pass {other} to use it"


#: settings that do not change the trained weights: where the run lives, how often it logs and
#: saves, how many epoch snapshots it keeps
BOOKKEEPING = frozenset({"out_dir", "train.resume", "train.overwrite", "train.log_every",
                         "train.checkpoint_every", "train.checkpoint_interval",
                         "train.keep_epochs"})  # fmt: skip


def config_changes(
    old: Any,
    new: Any,
    *,
    ignore: frozenset[str] = BOOKKEEPING,
) -> list[str]:
    """Dotted names whose values differ between two config dicts (e.g. a checkpoint's and the
    current run's), ignoring ``ignore`` (by default :data:`BOOKKEEPING`)."""
    return _diff(old, new, ignore, "")


def _diff(old: Any, new: Any, ignore: frozenset[str], prefix: str) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            name = f"{prefix}.{key}" if prefix else key
            if name not in ignore:
                out += _diff(old.get(key), new.get(key), ignore, name)
        return out
    return [] if old == new else [prefix]
