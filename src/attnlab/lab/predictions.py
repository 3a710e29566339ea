"""What ``predict`` and ``show`` read and write besides a user's inputs: examples of a run's
test split (``--index N``, with their gold answers) and a file of predictions
(``predict --out FILE.csv`` or ``.jsonl``)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import nn
from tqdm import tqdm

from attnlab.lab.tasks import TaskCommands
from attnlab.lab.train import RunConfig
from attnlab.lab.train.batching import make_batches

__all__ = ["TEST_INDEX", "predict_in_batches", "test_inputs", "write_predictions"]

#: the ``dest`` of the commands' own ``--index N`` (a task that declares ``--index`` keeps it)
TEST_INDEX = "test_index"


def test_inputs(task: TaskCommands, cfg: RunConfig, indices: Sequence[int]) -> list[tuple]:
    """``(input, gold, n)`` of example ``n`` of the run's test split, for each of ``indices``
    (:meth:`TaskCommands.example_input`); loads the task's data (``setup``) only if asked.

    Raises:
        ValueError: an index outside the test split, naming its size.
    """
    if not indices:
        return []
    task.setup(cfg.task_options)  # keeps the vocabularies the checkpoint restored
    test = task.splits().get("test") or []
    for n in indices:
        if not 0 <= n < len(test):
            raise ValueError(f"--index {n}: the {cfg.task} test split has examples 0 to "
                             f"{len(test) - 1}")  # fmt: skip
    return [(*task.example_input(test[n]), n) for n in indices]


def predict_in_batches(
    task: TaskCommands, model: nn.Module, inputs: Sequence[Any], options: dict[str, Any]
) -> list[dict[str, Any]]:
    """``task.predict(model, inputs, **options)``, computed ``task.predict_batch`` inputs at a
    time, shortest to longest (:meth:`TaskCommands.input_size`), the records in the inputs'
    order. A prediction does not depend on the other inputs of its batch (padding is masked),
    so only the speed changes: less padding, and memory for one batch instead of all.
    """
    size = task.predict_batch
    if size is None or len(inputs) <= size:
        return task.predict(model, inputs, **options)
    order = sorted(range(len(inputs)), key=lambda k: task.input_size(inputs[k]))
    records: list[dict[str, Any]] = [{}] * len(inputs)
    batches = make_batches(order, batch_size=size)
    bar = tqdm(batches, desc="predict", unit="batch", leave=False, disable=len(batches) < 10)
    for batch in bar:  # a progress bar (stderr) from 10 batches on
        for k, record in zip(batch, task.predict(model, [inputs[k] for k in batch], **options)):
            records[k] = record
    return records


def write_predictions(records: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """``predict --out``: the records as JSON lines (``.jsonl``) or a CSV table (``.csv``: a
    nested mapping as one column per key, ``probabilities.LABEL``; a list joined by spaces).

    Raises:
        ValueError: another extension.
    """
    path = Path(path)
    if path.suffix not in (".csv", ".jsonl"):
        raise ValueError(f"--out: expected a .csv or .jsonl file, got {str(path)!r}")
    if path.suffix == ".jsonl":
        text = "".join(json.dumps(r) + "\n" for r in records)
    else:
        rows = [_flat_record(r) for r in records]
        columns = list(dict.fromkeys(k for row in rows for k in row))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buf.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _flat_record(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, dict):
            out.update(_flat_record(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = " ".join(map(str, value)) if isinstance(value, list) else value
    return out
