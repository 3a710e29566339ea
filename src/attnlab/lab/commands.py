"""What the CLI's ``train``, ``eval``, ``predict`` and ``show`` subcommands do.

Every command talks to a task only through its interfaces, :class:`~attnlab.lab.tasks.Task`
(training) and :class:`~attnlab.lab.tasks.TaskCommands` (``parse_input``, ``predict``,
``format_text`` / ``format_json``, ``draw``, ``read_examples``), so a task of any input kind
works here unchanged; one without the second trains and evaluates its splits only. The commands sit above
both the tasks and the trainer: :mod:`attnlab.lab.cli` imports this module, this module imports
:mod:`attnlab.lab.train` and :mod:`attnlab.lab.tasks`, and neither of those imports it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

import numpy as np
import torch
from tqdm import tqdm

from attnlab.lab.predictions import TEST_INDEX, predict_in_batches, test_inputs, write_predictions
from attnlab.lab.task_flags import commands_of, read_stdin_inputs, task_flags
from attnlab.lab.tasks import Task
from attnlab.lab.train import (
    RunConfig,
    Trainer,
    average_checkpoints,
    load_ensemble,
    load_for_inference,
    resolve_config,
    save_checkpoint,
)
from attnlab.lab.train.batching import eval_order, make_batches
from attnlab.lab.train.distributed import resolve_device
from attnlab.lab.train.errors import RunComplete
from attnlab.lab.train.precision import choose_precision
from attnlab.lab.train.resume import check_not_complete

__all__ = [
    "normalize_overrides",
    "train_command",
    "eval_command",
    "predict_command",
    "show_command",
]

logger = logging.getLogger(__name__)


def normalize_overrides(args: Sequence[str]) -> list[str]:
    """``--a.b value`` -> ``--a.b=value``; reject stray words. (``--attention.X`` is resolved
    by :func:`~attnlab.lab.train.resolve_config`, against the task's model.)"""
    out: list[str] = []
    i = 0
    args = list(args)
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise ValueError(f"expected an option like --train.lr=1e-3, got {arg!r}")
        if "=" not in arg and i + 1 < len(args) and not args[i + 1].startswith("--"):
            arg = f"{arg}={args[i + 1]}"
            i += 1
        out.append(arg)
        i += 1
    return out


def train_command(
    task: str, rest: Sequence[str], *, config: str | None, resume: bool, preset: str | None = None
) -> int:
    """``attnlab train TASK [--preset NAME] [--a.b=value ...]``: train (the trainer logs one
    summary line at the end), then print the checkpoint's path (rank 0 only under
    ``torchrun``). ``--resume`` of a run that is already complete says so and returns 0."""
    overrides = normalize_overrides(rest)
    cfg = resolve_config(task=task, config_file=config, overrides=overrides, preset=preset)
    if resume or cfg.train.resume:
        try:
            check_not_complete(cfg)
        except RunComplete as done:
            print(done)
            return 0
    trainer = Trainer(cfg.task, cfg, resume=resume or None)
    try:
        trainer.fit()
    finally:
        trainer.close()
    if trainer.env.is_main:
        print(f"checkpoint: {Path(cfg.out_dir) / 'best.pt'}")
    return 0


def eval_command(
    checkpoint: str | Sequence[str], *, data: str | None, split: str, device: str | None = None
) -> int:
    """``attnlab eval CKPT [CKPT ...] [--data FILE | --split NAME] [--device D]``: the task's
    metrics on a file it reads (:meth:`TaskCommands.read_examples`) or on one of its splits, as one
    JSON line. Several checkpoints are evaluated as their ensemble (class probabilities
    averaged, :class:`~attnlab.lab.models.Ensemble`; runs of one task with the same vocabularies),
    with the first run's evaluation settings.

    Evaluates as the run's own evaluation did, so that a split gives the number the run
    reported: the run's evaluation batch size (``train.eval_batch_size``, else
    ``train.batch_size``), examples of similar lengths batched together as the trainer's
    evaluation batches them (:func:`~attnlab.lab.train.batching.eval_order`), under bfloat16
    autocast if the run trained with it (``train.precision``, which the trainer saved
    resolved). A progress bar (examples, rate, ETA) goes to stderr.

    Args:
        checkpoint: a ``.pt`` file or a run directory, or several (an ensemble).
        data: an evaluation file in a format of the task; None: ``split``.
        split: ``train``, ``dev`` or ``test``.
        device: ``auto`` / ``cpu`` / ``cuda``; None: the run's ``train.device``.
    """
    if data is not None and not Path(data).exists():  # a file, or a folder of class folders
        raise FileNotFoundError(f"--data: no such file or folder {data}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: CUDA is not available here; use cpu or auto")
    paths = [checkpoint] if isinstance(checkpoint, str | Path) else list(checkpoint)
    task, model, cfg = load_ensemble(paths, setup=data is None)
    target = _eval_device(device, cfg.train.device)
    model.to(target)
    if data is not None:
        examples = commands_of(task, "eval --data").read_examples(data)
        where = str(data)
    else:
        examples = task.splits().get(split) or []
        where = f"{cfg.task} {split} split"
    if not examples:
        raise ValueError(f"{where}: no examples to evaluate")
    size = cfg.train.eval_batch_size or cfg.train.batch_size
    bf16 = choose_precision(cfg.train.precision, target).bf16
    precision = "bfloat16 autocast, as the run trained" if bf16 else "float32"
    logger.info("evaluating on %s: %d examples, batches of %d, %s, device %s",
                where, len(examples), size, precision, target)  # fmt: skip
    bar = tqdm(total=len(examples), desc="eval", unit="ex", file=sys.stderr,
               dynamic_ncols=True, mininterval=0.5)  # fmt: skip
    with bar:
        metrics = evaluate_examples(task, model, cfg, examples, bar=bar)
    if len(paths) > 1:
        where += f" (ensemble of {len(paths)})"
    print(f"{where}: " + json.dumps({k: round(float(v), 4) for k, v in metrics.items()}))
    return 0


def evaluate_examples(
    task: Task, model: torch.nn.Module, cfg: RunConfig, examples: list, *, bar: tqdm | None = None
) -> dict[str, float]:
    """``task.evaluate`` of ``model`` (in eval mode, on its device) on ``examples``, as the run
    ``cfg`` evaluated: its batch size, examples of similar lengths together, its precision.
    ``bar`` (if given) counts the examples."""
    device = next(model.parameters()).device
    size = cfg.train.eval_batch_size or cfg.train.batch_size
    # no_grad, not inference_mode (1.16x faster on pos): process-wide caches (FlexAttention's
    # block masks) would keep inference tensors that a later training step cannot save
    with torch.no_grad(), _autocast(cfg, device):
        metrics = task.evaluate(model, _batches(task, examples, size, device, bar))
    return {k: float(v) for k, v in metrics.items()}


def _eval_device(device: str | None, run_device: str) -> torch.device:
    """``--device`` if given, else the run's ``train.device``
    (its ``cuda`` falls back to the CPU, with a warning, on a machine without CUDA)."""
    if device is not None:
        return resolve_device(device)
    if run_device == "cuda" and not torch.cuda.is_available():
        logger.warning("the run trained on CUDA, which is not available here: evaluating on cpu")
        run_device = "cpu"
    return resolve_device(run_device)


def _batches(
    task: Task, examples: list, size: int, device: torch.device, bar: tqdm | None
) -> Iterator[dict]:
    """Collated batches of ``size`` examples of similar lengths (:func:`eval_order`), on
    ``device``; ``bar`` (if any) counts the examples of each batch once the task is done
    with it."""
    for indices in make_batches(eval_order(task, examples), batch_size=size):
        chunk = [examples[i] for i in indices]
        batch = task.collate(chunk)
        yield {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        if bar is not None:
            bar.update(len(chunk))


def _autocast(cfg: RunConfig, device: torch.device) -> contextlib.AbstractContextManager:
    """The run's precision: bfloat16 autocast if it trained with it (``train.precision``, as
    the trainer's own evaluation does), else a no-op."""
    bf16 = choose_precision(cfg.train.precision, device).bf16
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16)


def average_command(checkpoints: Sequence[str], *, out: str) -> int:
    """``attnlab average CKPT CKPT ... --out FILE``: write the checkpoint whose weights are the
    mean of the given snapshots' (:func:`~attnlab.lab.train.average_checkpoints`), for ``eval``,
    ``predict`` and ``show``; prints the file and the steps averaged."""
    target = Path(out)
    if target.name in ("last.pt", "best.pt"):
        raise ValueError(
            f"--out: {out} would pass for a run's own checkpoint (resume reads last.pt, test "
            "and eval read best.pt); name it otherwise, e.g. avg.pt"
        )
    averaged = average_checkpoints(checkpoints)
    save_checkpoint(target, averaged)
    steps = ", ".join(str(m["step"]) for m in averaged["averaged"])
    print(f"{target}: the mean of {len(checkpoints)} checkpoints (steps {steps})")
    return 0


def predict_command(
    checkpoint: str,
    texts: Sequence[str],
    *,
    as_json: bool,
    rest: Sequence[str] = (),
    stdin: TextIO | None = None,
    out: str | None = None,
) -> int:
    """``attnlab predict CKPT INPUT ... [--json] [TASK FLAGS]``: one line per input, as the task
    renders its prediction (:meth:`TaskCommands.format_text` or :meth:`TaskCommands.format_json`), computed in
    the run's precision (bfloat16 autocast if it trained with it, as ``eval`` does).

    ``rest``: the task's own flags (:meth:`TaskCommands.add_arguments`, e.g. ``--node 12``), passed to
    :meth:`TaskCommands.command_inputs` and :meth:`TaskCommands.predict`. No inputs at all is the task's error
    (:meth:`TaskCommands.command_inputs` names what it reads: sentences, or a graph's ``--node``).
    An input ``-`` alone reads the inputs from ``stdin``, one per non-blank line, wherever it
    stands among the flags (``--json -`` and ``- --json`` mean the same). ``--index N``:
    example N of the run's test split (:func:`test_inputs`), its record with ``example`` and
    ``gold``. ``out``: write the records to a ``.csv`` or ``.jsonl`` file
    (:func:`write_predictions`) instead of printing them."""
    task, model, cfg = load_for_inference(checkpoint)
    task = commands_of(task, "predict")
    texts, options = task_flags(task, "predict", texts, rest)
    picked = test_inputs(task, cfg, options.pop(TEST_INDEX, []))
    texts = read_stdin_inputs(texts, stdin)
    inputs = [x for x, _, _ in picked]
    if texts or not picked:
        inputs += task.command_inputs(texts, options)
    with _autocast(cfg, torch.device("cpu")):
        records = predict_in_batches(task, model, inputs, options)
    for record, (_, gold, n) in zip(records, picked):
        record.update(example=f"test:{n}", gold=gold)
    if out is not None:
        print(f"{write_predictions(records, out)}: {len(records)} predictions")
        return 0
    for record in records:
        if "example" in record and not as_json:
            print(f"{cfg.task} test example {record['example'][5:]}: gold {record['gold']}")
        print(task.format_json(record) if as_json else task.format_text(record))
    return 0


def show_command(
    checkpoint: str,
    text: str | Sequence[str],
    *,
    out: str | None = None,
    html: str | None = None,
    layer: int | None = None,
    head: int | None = None,
    rest: Sequence[str] = (),
) -> int:
    """``attnlab show CKPT INPUT --out FILE.png [--layer L] [--head H] [TASK FLAGS]``: the
    task's picture of the model's attention on one input (:meth:`TaskCommands.draw`); prints the path
    written.

    With ``layer`` and/or ``head`` (1-based, as the panels are titled), only that layer's
    and/or head's heatmaps of :meth:`TaskCommands.attention_map` are drawn
    (:func:`attnlab.lab.viz.plot_attention`), larger. ``rest``: the task's own flags
    (:meth:`TaskCommands.add_arguments`, e.g. ``--node 12``), passed to :meth:`TaskCommands.command_inputs`
    and :meth:`TaskCommands.draw`. ``text``: the input's words as the command line gave them, joined
    into one text with single spaces (a sentence typed unquoted); one argument is kept exactly
    as given (a quoted sentence, or a file name with spaces).
    """
    from attnlab.lab.viz import plot_attention

    if out is None and html is None:
        raise ValueError("show: give --html PAGE.html (interactive) and/or --out FIGURE.png")
    task, model, cfg = load_for_inference(checkpoint)
    task = commands_of(task, "show")
    x, title, options = _one_input(task, cfg, text, rest)
    with _autocast(cfg, torch.device("cpu")):
        if html is not None:
            page = task.attention_view(model, x, title=title, **options).save(html)
            print(page)
        if out is None:
            return 0
        if layer is None and head is None:
            path = task.draw(model, x, out, title=title, **options)
        else:  # the page's main attention, as heatmaps: masked pairs (NaN) drawn as absent
            shown = task.attention_view(model, x, title=title, **options)
            family = shown.attentions[0]
            weights = [torch.from_numpy(np.where(m, np.nan, w) if m is not None else w)
                       for w, m in zip(family.weights, family.masked)]  # fmt: skip
            path = plot_attention(weights, family.keys, out,
                                  title="\n".join(filter(None, [title, shown.prediction])),
                                  query_tokens=family.queries, layer=layer, head=head)  # fmt: skip
    print(path)
    return 0


def _one_input(task, cfg, text: str | Sequence[str], rest: Sequence[str]):
    """``(input, title, options)`` of ``show``'s command line: the one parsed input, a title
    naming the task and the input, and the task's own flags."""
    words = [text] if isinstance(text, str) else list(text)
    words, options = task_flags(task, "show", [w for w in words if w.strip()], rest)
    picked = test_inputs(task, cfg, options.pop(TEST_INDEX, []))
    if picked and not words:
        if len(picked) != 1:
            raise ValueError(f"show draws one input at a time; got --index {len(picked)} times")
        x, gold, n = picked[0]
        return x, f"{cfg.task}: test example {n} (gold: {gold})", options
    text = words[0] if len(words) == 1 else " ".join(words)
    inputs = task.command_inputs([text] if text else [], options)
    if len(inputs) != 1:
        raise ValueError(f"show draws one input at a time; got {len(inputs)}")
    shown = text or " ".join(f"{k}={v}" for k, v in options.items() if v not in (None, False))
    return inputs[0], f"{cfg.task}: {shown}", options
