"""``attnlab report --check``: set up every job that has not finished, training none, so
that a report that runs for days stops on none of them at its setup."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from .jobs import Job

__all__ = ["check_jobs"]


def check_jobs(jobs: Sequence[Job]) -> int:
    """Set up each of ``jobs`` as its run would (its data, model and optimiser; in a scratch
    directory, training nothing; the seeds of one variant once) and print a line for each:
    ``ok`` with its splits' sizes, or ``FAIL`` with the error. A days-long report then stops on
    none of these at its hundredth job. A job that starts from another's checkpoint is set
    up from scratch (that checkpoint is read when it runs). Returns 0 if all set up, else 1."""
    from attnlab.lab.train import Trainer
    from attnlab.lab.train.config import resolve_config

    seen, failed = set(), 0
    with tempfile.TemporaryDirectory(prefix="attnlab-check-") as scratch:
        for job in jobs:
            if (job.task, job.options) in seen:
                continue
            seen.add((job.task, job.options))
            name = f"{job.task}: {job.label or job.key}"
            try:
                cfg = resolve_config(task=job.task,
                                     overrides=[*job.options, f"--train.seed={job.seed}"])  # fmt: skip
                cfg.out_dir = str(Path(scratch) / job.key)
                trainer = Trainer(cfg.task, cfg, progress=False)
                sizes = {k: len(v) for k, v in trainer.task.splits().items()}
                trainer.close(barrier=False)
            except Exception as err:  # noqa: BLE001 (each job's error is the report)
                failed += 1
                print(f"FAIL {name}: {type(err).__name__}: {err}", flush=True)
                continue
            print(f"ok   {name} ({', '.join(f'{k} {n:,}' for k, n in sizes.items())})",
                  flush=True)  # fmt: skip
    print(f"check: {len(seen) - failed} of {len(seen)} set up"
          + (f"; {failed} failed" if failed else ""))  # fmt: skip
    return 1 if failed else 0
