"""What a training step of a finished run's model costs: on random sequences of given lengths
(the speed-against-length measures of claims 11, :func:`~.claims_recall.recall_measures`, and
14, :func:`~.claims_lra.listops_costs`), or on the longest examples of its dev split (claim 8's,
:func:`dev_step_cost`). The report takes them side by side after the training (:mod:`.timing`)."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

__all__ = ["dev_step_cost", "random_step_costs"]


def random_step_costs(
    task: Any, model: Any, cfg: Any, lengths: Iterable[int], batch: int, *, repeats: int = 3,
    memory: bool = False
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Per length ``n`` of ``lengths`` (keyed ``str(n)``, as JSON stores it): the seconds of a
    training step of ``model`` (train mode, in ``cfg.train.precision`` on this CPU) on ``batch``
    sequences of ``n`` tokens drawn from ``task.alphabet`` (seeded: every run is timed on the
    same sequences), ``{"step_s": s}``, with ``"peak_mib"`` (peak tensor memory) when
    ``memory``; or ``{"error": first line of the message}`` for a length the model cannot run
    (a Linformer's fixed ``max_len``, learned positions' maximum): a gap, not a failed job."""  # fmt: skip
    import torch

    from attnlab.lab.bench.measure import training_step_cost
    from attnlab.lab.train.precision import choose_precision

    bf16 = choose_precision(cfg.train.precision, torch.device("cpu")).bf16
    rng, alphabet = random.Random(0), list(task.alphabet)
    model.train()
    measured: dict[str, dict[str, Any]] = {}
    for n in lengths:
        sequences = task.collate([([rng.choice(alphabet) for _ in range(n)], 0)
                                  for _ in range(batch)])  # fmt: skip

        def loss(sequences=sequences) -> torch.Tensor:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                return task.loss(model, sequences)[0]

        try:
            seconds, peak = training_step_cost(model, loss, repeats=repeats, memory=memory)
            cost = {"step_s": seconds, **({} if peak is None else {"peak_mib": peak / 2**20})}
        except Exception as err:  # noqa: BLE001 - the message is the result
            cost = {"error": (str(err).splitlines() or [type(err).__name__])[0][:80]}
        measured[str(n)] = cost
    return measured


def dev_step_cost(run: Any, batch: int, *, repeats: int = 3) -> dict[str, float]:
    """The seconds of a training step of the finished ``run``'s model (train mode, in its
    precision on this CPU) on the ``batch`` longest examples of its dev split (by the task's
    ``batch_size_of``; the first of equals), as one batch: ``{"step_s": s, "units": the units
    its loss counts}``."""
    import torch

    from attnlab.lab.bench.measure import training_step_cost
    from attnlab.lab.train.checkpoint import load_for_inference
    from attnlab.lab.train.precision import choose_precision

    task, model, cfg = load_for_inference(str(run), setup=True)
    bf16 = choose_precision(cfg.train.precision, torch.device("cpu")).bf16
    dev = task.splits()["dev"]
    longest = sorted(range(len(dev)), key=lambda i: -task.batch_size_of(dev[i]))[:batch]
    examples = task.collate([dev[i] for i in sorted(longest)])
    model.train()
    units = 0.0

    def loss() -> torch.Tensor:
        nonlocal units
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            total, units = task.loss(model, examples)
        return total

    seconds, _ = training_step_cost(model, loss, repeats=repeats, memory=False)
    return {"step_s": seconds, "units": float(units)}
