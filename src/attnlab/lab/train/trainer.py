"""The one trainer of the lab, generic over tasks (:class:`attnlab.lab.tasks.Task`).

One optimizer step:

1. the step's *global* batch (``train.batch_size`` examples of the seeded epoch order) is split
   into ``world_size * grad_accum`` micro-batches (:mod:`attnlab.lab.train.batching`);
2. each rank backpropagates the *summed* loss of its micro-batches (``Task.loss`` returns
   ``(loss_sum, units)``); DDP all-reduces (averages) the gradients;
3. one ``all_reduce`` of ``[loss_sum, units, stop]`` gives the global unit count ``U`` (and
   whether a signal asked any rank to stop), and every gradient is multiplied by
   ``world_size / U``.

The update therefore equals the gradient of ``(1/U) * sum of per-unit losses`` of the whole
global batch, whatever the number of ranks, accumulation steps or padding.

Then gradient clipping, AdamW (:mod:`~attnlab.lab.train.optim`), the LR schedule
(:mod:`~attnlab.lab.train.schedule`); the step's pieces are in :mod:`~attnlab.lab.train.step`. Dev
evaluation (:mod:`~attnlab.lab.train.evaluation`) every ``eval_every`` steps or each epoch, early
stopping with ``patience``, ``best.pt`` for the best dev score, ``last.pt`` to resume
bit-exactly (:mod:`~attnlab.lab.train.checkpoint`, :mod:`~attnlab.lab.train.resume`), and a final
test evaluation of the best model.

A run never loses or misattributes its results:

* the run directory is checked, locked and prepared before any data loads
  (:mod:`~attnlab.lab.train.rundir`): another run's directory is refused unless ``overwrite`` or
  ``resume`` says what to do with it;
* the first SIGINT / SIGTERM stops after the current step and saves ``last.pt``
  (:mod:`~attnlab.lab.train.interrupt`);
* a non-finite loss or gradient never updates the weights: the step is skipped (at most
  ``max_bad_steps`` times) or the run stops with :class:`~attnlab.lab.train.errors.DivergenceError`
  (:mod:`~attnlab.lab.train.divergence`); a non-finite dev score never becomes ``best.pt``.

With ``train.compile`` the model runs under ``torch.compile`` for training and evaluation
(dynamic shapes, batches padded to a few sizes: :mod:`~attnlab.lab.train.compile`); ``model`` stays
the plain module, which checkpoints save.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
import time
from pathlib import Path
from typing import NamedTuple

import torch
from tqdm import tqdm

from attnlab.lab.tasks import TASKS, Task
from attnlab.lab.train.budget import format_duration
from attnlab.lab.train.checkpoint import BEST, LAST, load_checkpoint
from attnlab.lab.train.compile import compile_model
from attnlab.lab.train.config import RunConfig, save_config
from attnlab.lab.train.distributed import (
    all_reduce_sum,
    barrier,
    broadcast_object,
    init_distributed,
    shutdown,
    wrap_model,
)
from attnlab.lab.train.divergence import check_step, gradient_norm, kept_checkpoints
from attnlab.lab.train.errors import TrainingInterrupted
from attnlab.lab.train.evaluation import (
    dev_row,
    eval_log_interval,
    evaluate_split,
    judge_score,
    log_evaluation,
)
from attnlab.lab.train.feed import Feed, Micro
from attnlab.lab.train.host_memory import keep_freed_memory
from attnlab.lab.train.init import init_from_checkpoint
from attnlab.lab.train.interrupt import StopOnSignal
from attnlab.lab.train.metrics_log import MetricsCsv, write_metrics_json
from attnlab.lab.train.optim import build_optimizer
from attnlab.lab.train.precision import choose_precision
from attnlab.lab.train.result import TrainResult
from attnlab.lab.train.resume import (
    find_resume_checkpoint,
    log_resumed_schedule,
    restore_rng,
    restore_training,
    save_epoch_snapshot,
    save_training_checkpoint,
)
from attnlab.lab.train.rng import seed_everything
from attnlab.lab.train.rundir import RunDirectory, open_run_dir
from attnlab.lab.train.schedule import build_scheduler
from attnlab.lab.train.state import TrainState
from attnlab.lab.train.step import apply_update, backward_micros, record_step, scale_gradients
from attnlab.lab.train.tensorboard import TensorBoardLog, require_tensorboard

__all__ = ["Trainer", "TrainResult", "StepResult"]

logger = logging.getLogger(__name__)


class StepResult(NamedTuple):
    """One optimizer step: the global batch's summed loss and units, whether the step was
    applied (finite loss and gradient), and its seconds."""

    loss_sum: float
    units: float
    finite: bool
    seconds: float


class Trainer:
    """Train ``task`` as configured by ``cfg``; single-process or under ``torchrun``.

    Args:
        task: a :class:`Task` instance, or its registry name.
        cfg: the resolved run configuration (``cfg.train`` drives the trainer).
        resume: continue from ``out_dir/last.pt`` (default: ``cfg.train.resume``); an error
            if there is none.
        overwrite: replace the run ``out_dir`` holds (default: ``cfg.train.overwrite``);
            without it (or ``resume``) a directory holding a run is refused.
        progress: show a tqdm progress bar on stderr (rank 0 only).

    Building the trainer checks and locks ``out_dir`` (:func:`~attnlab.lab.train.rundir.
    open_run_dir`), then sets up the task, the model, AdamW and the schedule (and restores
    them when resuming); :meth:`fit` trains. On glibc it first makes ``malloc`` keep freed
    memory for the next step (:func:`~attnlab.lab.train.host_memory.keep_freed_memory`). The lock is held until :meth:`close` (which
    :meth:`fit` calls). After :meth:`fit`, ``model`` holds the best checkpoint's weights.

    Raises:
        RunError: ``out_dir`` is not a writable directory, is locked by another run, holds a
            run (without ``overwrite`` / ``resume``), or has nothing to resume.
    """

    def __init__(
        self,
        task: Task | str,
        cfg: RunConfig,
        *,
        resume: bool | None = None,
        overwrite: bool | None = None,
        progress: bool = True,
    ) -> None:
        task = TASKS.get(task)() if isinstance(task, str) else task
        if cfg.task and task.name and cfg.task != task.name:
            raise ValueError(f"cfg.task is {cfg.task!r} but the task given is {task.name!r}")
        self.task, self.cfg, self.progress = task, cfg, progress
        tc = cfg.train
        resume = tc.resume if resume is None else resume
        overwrite = tc.overwrite if overwrite is None else overwrite
        self.out_dir = Path(cfg.out_dir)
        self.env = init_distributed(tc.device)
        self.device = self.env.device
        self._stop = StopOnSignal()
        self._last_saved = -1  # step of the latest last.pt
        self._last_saved_at = -math.inf  # and when it was written (time.perf_counter())
        self._metrics_csv = MetricsCsv(self.out_dir / "metrics.csv")
        self.run_dir = RunDirectory(self.out_dir)  # nothing held yet
        self.tensorboard = TensorBoardLog(self.out_dir, enabled=False)
        if tc.tensorboard:
            require_tensorboard()  # before anything loads or is written
        try:
            # Before any data loads: a bad or busy out_dir fails in a second, not in minutes.
            self.run_dir = open_run_dir(self.out_dir, self.env, resume=resume, overwrite=overwrite)
            self._build(resume)
        except BaseException:
            self.close(barrier=False)
            raise

    def _build(self, resume: bool) -> None:
        keep_freed_memory()  # each step reuses the memory the last one freed
        # ``auto`` resolved first, and saved so: evaluation and --resume see what ran
        self.precision = choose_precision(
            self.cfg.train.precision, self.device, cpu_precision=self.task.cpu_precision
        )
        if self.cfg.train.precision != self.precision.name:
            train = dataclasses.replace(self.cfg.train, precision=self.precision.name)
            self.cfg = dataclasses.replace(self.cfg, train=train)
        task, cfg, tc = self.task, self.cfg, self.cfg.train
        ckpt = find_resume_checkpoint(self.out_dir / LAST, cfg, self.env, resume=resume)
        if ckpt is not None:
            self._last_saved = ckpt["state"]["step"]

        seed_everything(tc.seed)  # same model init on every rank
        if ckpt is not None:
            task.load_state_dict(ckpt["task"])
            task.load_run_data(self.out_dir)
        task.setup(cfg.task_options)
        self.splits = task.splits()
        if not self.splits.get("train"):
            raise ValueError(f"task {task.name!r} has an empty train split")
        if ckpt is None and self.env.is_main:
            task.save_run_data(self.out_dir)  # e.g. the splits cut from the user's files
        self.model = task.build_model(cfg.model)
        init = getattr(cfg.model, "init", "")  # --model.init: a new run from pre-trained weights
        self.init_report = None
        if init and ckpt is None:
            self.init_report = init_from_checkpoint(task, self.model, init, log=self.env.is_main)
        self.model = self.model.to(self.device)
        self.num_parameters = sum(p.numel() for p in self.model.parameters())
        self.optimizer = build_optimizer(
            self.model, lr=tc.lr, weight_decay=tc.weight_decay, betas=tc.betas
        )
        self.feed = Feed(task, self.splits["train"], tc, self.env)
        self.steps_per_epoch = len(self.feed.epoch_batches(0))
        total = tc.epochs * self.steps_per_epoch
        self.total_steps = min(total, tc.max_steps) if tc.max_steps else total
        self.scheduler = build_scheduler(
            self.optimizer, total_steps=self.total_steps, warmup_steps=tc.warmup_steps,
            warmup_fraction=tc.warmup_fraction, schedule=tc.schedule,
            min_lr_ratio=tc.min_lr_ratio,
        )  # fmt: skip
        self.state = TrainState()
        if ckpt is not None:
            self.state = restore_training(ckpt, self.model, self.optimizer, self.scheduler)
        self.tensorboard = TensorBoardLog(
            self.out_dir, enabled=tc.tensorboard and self.env.is_main,
            resume_step=self.state.step if ckpt is not None else None,
        )  # fmt: skip
        self.train_model = wrap_model(self.model, self.env)
        self.eval_model = self.model  # rank 0 evaluates alone: never the DDP wrapper
        if tc.compile:
            # The DDP wrapper is compiled, not wrapped around a compiled module (PyTorch's
            # recommended order: Dynamo then splits the graph at DDP's gradient buckets).
            mode = tc.compile_mode
            self.train_model = compile_model(self.train_model, mode=mode, device=self.device)
            self.eval_model = (
                compile_model(self.model, mode=mode, device=self.device)
                if self.env.distributed
                else self.train_model
            )
        if self.env.distributed:
            torch.manual_seed(tc.seed + self.env.rank)  # distinct dropout streams per rank
        if ckpt is not None:
            restore_rng(ckpt["rng"], self.env.rank)
        self._epoch_len = self.steps_per_epoch
        self._budget = tc.max_time_s  # train.max_time in seconds (0: none)
        self._eval_log_every = eval_log_interval(self.total_steps, tc.eval_every,
                                                 self.steps_per_epoch)  # fmt: skip
        self._t0, self._elapsed0, self._time_up = time.perf_counter(), self.state.elapsed_s, False
        if ckpt is not None and self.env.is_main:
            log_resumed_schedule(ckpt, cfg, self.state, total_steps=self.total_steps,
                                 steps_per_epoch=self.steps_per_epoch)  # fmt: skip

    # ------------------------------------------------------------------ public

    def fit(self) -> TrainResult:
        """Train until ``epochs``/``max_steps``/early stopping, then test the best model.

        Raises:
            TrainingInterrupted: a SIGINT / SIGTERM stopped the run after a step; ``last.pt``
                holds it (resume to continue).
            DivergenceError: the loss or gradient was non-finite more than
                ``train.max_bad_steps`` times.
        """
        try:
            with self._stop:
                result = self._fit()
        except BaseException:
            self.close(barrier=False)  # other ranks may never reach a barrier
            raise
        self.close()
        return result

    def evaluate(self, split: str = "dev") -> dict[str, float]:
        """Metrics of the current model on ``split`` (computed on rank 0, sent to all ranks)."""
        metrics = self._evaluate_local(split) if self.env.is_main else None
        return broadcast_object(metrics, self.env)

    def close(self, *, barrier: bool = True) -> None:
        """Release the run directory's lock and leave the process group if this trainer
        created it (idempotent)."""
        self.tensorboard.close()
        self.run_dir.release()
        if barrier:
            shutdown(self.env)
        elif self.env.owns_group and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()

    # ------------------------------------------------------------------ training loop

    def _fit(self) -> TrainResult:
        tc, s = self.cfg.train, self.state
        self._t0, self._elapsed0 = time.perf_counter(), s.elapsed_s
        self._time_up = bool(self._budget) and s.elapsed_s >= self._budget
        if self.env.is_main:
            save_config(self.cfg, self.out_dir)
            if s.history:  # resumed: rows after the checkpoint (if any) are dropped
                self._metrics_csv.write(s.history)
            logger.info(
                "training %s: %d parameters, %d steps (%d per epoch), world size %d, device %s, "
                "%s (%s)", self.task.name, self.num_parameters, self.total_steps,
                self.steps_per_epoch, self.env.world_size, self.device, self.precision.name,
                self.precision.reason,
            )  # fmt: skip
        bar = tqdm(
            total=self.total_steps, initial=s.step, desc=self.task.name, unit="step",
            file=sys.stderr, mininterval=1.0, dynamic_ncols=True,
            disable=not (self.progress and self.env.is_main),
        )  # fmt: skip
        self._log_loss = self._log_units = self._log_time = 0.0
        self._stopping = False  # a signal asked to stop, on some rank (set by _step)
        with bar:
            while not self._finished():
                batches = self.feed.epoch_batches(s.epoch)
                self._epoch_len = len(batches)
                for micros in self.feed.steps(batches, s.batch_in_epoch):
                    self._step(micros, bar)
                    evaluated = bool(tc.eval_every) and s.step % tc.eval_every == 0
                    if evaluated:
                        self._evaluate_and_track()
                    new_best = evaluated and s.best_step == s.step  # best.pt never ahead
                    if (
                        (tc.checkpoint_every and s.step % tc.checkpoint_every == 0)
                        or new_best
                        or (evaluated and not tc.checkpoint_every and self._checkpoint_due())
                    ):
                        self._save(LAST)
                    if self._stopping:
                        self._interrupt()
                    if self._finished():
                        break
                else:  # the epoch ran to its end
                    s.epoch += 1
                    s.batch_in_epoch = 0
                    if not tc.eval_every:
                        self._evaluate_and_track()
                    if self._checkpoint_due():
                        self._save(LAST)
                    if tc.keep_epochs and self.env.is_main:
                        save_epoch_snapshot(self.out_dir, model=self.model, state=s, cfg=self.cfg,
                                            task=self.task, keep=tc.keep_epochs)  # fmt: skip
                    continue
                break
        if self._time_up and self.env.is_main:
            logger.info("time budget spent (%s of train.max_time=%s) at step %d, epoch %.2f: "
                        "stopping", format_duration(self._elapsed()), tc.max_time, s.step,
                        self._epoch_progress())  # fmt: skip
        if s.last_eval_step != s.step:  # stopped by max_steps between evaluations
            self._evaluate_and_track()
        self._save(LAST)
        if self._stop_requested():  # a signal during the last evaluation: test on resume
            self._interrupt()
        test = self._test_best()
        return self._result(test)

    def _checkpoint_due(self) -> bool:
        """Whether an evaluation or an epoch end writes ``last.pt``: once
        ``train.checkpoint_interval`` has passed since the last one (rank 0's clock: the
        write is collective), or when this step wrote a new ``best.pt``, which must never be
        ahead of ``last.pt`` (a resumed run that took another path would test a model of the
        path it dropped)."""
        if self.state.best_step == self.state.step:  # the same on every rank
            return True
        due = time.perf_counter() - self._last_saved_at >= self.cfg.train.checkpoint_interval_s
        return broadcast_object(due, self.env) if self.env.world_size > 1 else due

    def _stop_requested(self) -> bool:
        """Whether a signal asked any rank to stop (collective under DDP)."""
        flag = torch.tensor([float(self._stop.requested)], device=self.device)
        return bool(all_reduce_sum(flag, self.env).item() > 0)

    def _interrupt(self) -> None:
        """Save ``last.pt`` (unless this step's is written) and raise TrainingInterrupted."""
        s = self.state
        if self._last_saved != s.step:
            self._save(LAST)
        barrier(self.env)  # no rank exits (and gets the others killed) before rank 0 has saved
        name = self._stop.signal_name or "a signal on another rank"
        raise TrainingInterrupted(name, s.step, self.total_steps, self.out_dir / LAST)

    def _finished(self) -> bool:
        s, tc = self.state, self.cfg.train
        return (
            s.stopped_early
            or s.epoch >= tc.epochs
            or bool(tc.max_steps and s.step >= tc.max_steps)
            or self._time_up
        )

    def _step(self, micros: list[Micro], bar: tqdm) -> None:
        """:meth:`train_step`, then the progress bar and the log."""
        step = self.train_step(micros)
        self._log_time += step.seconds
        if step.finite:
            self._log_loss += step.loss_sum
            self._log_units += step.units
        bar.update(1)
        if self.cfg.train.log_every and self.state.step % self.cfg.train.log_every == 0:
            self._log_progress(bar)

    def train_step(self, micros: list[Micro]) -> StepResult:
        """One optimizer step over this rank's micro-batches (see the module docstring),
        counted in :attr:`state`; what ``attnlab bench train`` times."""
        tc, s = self.cfg.train, self.state
        t0 = time.perf_counter()
        loss, units = backward_micros(
            self.task, self.train_model, self.optimizer, micros, self.feed, self.env
        )
        # One all-reduce carries the loss, its units, whether a signal asked to stop and whether
        # rank 0's clock reached train.max_time, so that every rank stops after the same step.
        late = self.env.is_main and bool(self._budget) and self._elapsed() >= self._budget
        stats = torch.tensor([loss, units, float(self._stop.requested), float(late)],
                             dtype=torch.float64)  # fmt: skip
        loss_total, units_total, stop, late = all_reduce_sum(
            stats.to(self.device), self.env
        ).tolist()
        self._stopping, self._time_up = stop > 0, self._time_up or late > 0
        if units_total <= 0:
            raise RuntimeError(f"{self.task.name}.loss counted 0 units in a whole global batch")
        scale_gradients(self.model, world_size=self.env.world_size, units=units_total)
        norm = gradient_norm(self.model.parameters(), tc.grad_clip)
        finite = check_step(
            loss_total, norm, state=s, max_bad_steps=tc.max_bad_steps, log=self.env.is_main,
            where=f"step {s.step + 1} (epoch {self._epoch_progress():.2f})",
            advice=f"Lower train.lr (now {tc.lr:g})",
            kept=kept_checkpoints(self.out_dir, {BEST: s.best_step, LAST: self._last_saved}),
        )  # fmt: skip
        apply_update(self.optimizer, self.scheduler, finite=finite)

        dt = time.perf_counter() - t0
        record_step(s, seconds=dt, loss_sum=loss_total, units=units_total, finite=finite)
        return StepResult(loss_total, units_total, finite, dt)

    def _log_progress(self, bar: tqdm) -> None:
        s = self.state
        loss = self._log_loss / max(self._log_units, 1.0)
        rate = self._log_units / max(self._log_time, 1e-9)
        lr = self.optimizer.param_groups[0]["lr"]
        unit = self.task.unit
        bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.2e}", **{f"{unit}/s": f"{rate:.0f}"})
        self.tensorboard.scalars(s.step, {"loss": loss, "lr": lr, f"{unit}_per_s": rate}, "train/")
        if self.env.is_main:
            logger.info(
                "step %d/%d epoch %.2f loss %.4f lr %.3e %.0f %s/s",
                s.step, self.total_steps, self._epoch_progress(), loss, lr, rate, unit,
            )  # fmt: skip
        self._log_loss = self._log_units = self._log_time = 0.0

    def _epoch_progress(self) -> float:
        s = self.state
        return s.epoch + s.batch_in_epoch / max(1, self._epoch_len)

    def _elapsed(self) -> float:
        return self._elapsed0 + time.perf_counter() - self._t0

    # ------------------------------------------------------------------ evaluation

    def _evaluate_local(self, split: str) -> dict[str, float]:
        tc = self.cfg.train
        return evaluate_split(
            self.task, self.eval_model, self.feed, self.splits.get(split) or [],
            batch_size=tc.eval_batch_size or tc.batch_size,
        )  # fmt: skip

    def _evaluate_and_track(self) -> None:
        """Evaluate on dev, append a history row, update best/patience, write ``best.pt``."""
        tc, s = self.cfg.train, self.state
        metrics = self.evaluate("dev")
        row = dev_row(
            s, metrics, epoch=self._epoch_progress(), lr=self.optimizer.param_groups[0]["lr"],
            elapsed_s=self._elapsed(),
        )  # fmt: skip
        score, improved, progress = judge_score(self.task, metrics, s, log=self.env.is_main)
        s.record_evaluation(row, metrics, score, improved=improved, progress=progress,
                            patience=tc.patience)  # fmt: skip
        if self.env.is_main:
            self._metrics_csv.write(s.history)
            self.tensorboard.scalars(s.step, {"train_loss": row["train_loss"], **metrics}, "dev/")
            log_evaluation(self.task, s, row, metrics, improved=improved, patience=tc.patience,
                           every=self._eval_log_every)  # fmt: skip
        if improved:
            self._save(BEST)

    def _test_best(self) -> dict[str, float]:
        """Test ``best.pt``, loaded on every rank (rank 0 reads and sends it)."""
        best, state = self.out_dir / BEST, None
        if self.env.is_main and best.is_file():
            state = load_checkpoint(best, torch.device("cpu"))["model"]
        state = broadcast_object(state, self.env)
        if state is not None:
            self.model.load_state_dict(state)
        return self.evaluate("test")

    def _result(self, test: dict[str, float]) -> TrainResult:
        s, task = self.state, self.task
        result = TrainResult.of_run(
            s, task, test=test, out_dir=str(self.out_dir), parameters=self.num_parameters,
            wall_time_s=self._elapsed(), world_size=self.env.world_size, time_up=self._time_up,
        )  # fmt: skip
        if self.env.is_main:
            write_metrics_json(self.out_dir / "metrics.json", result.summary())
            self.tensorboard.scalars(s.step, test, "test/")
            logger.info("%s", result.summary_line())
        return result

    # ------------------------------------------------------------------ checkpoints

    def _save(self, name: str) -> None:
        """Write ``out_dir/name`` (collective: every rank contributes its RNG state)."""
        self.state.elapsed_s = self._elapsed()
        if name == LAST:
            self._last_saved, self._last_saved_at = self.state.step, time.perf_counter()
        save_training_checkpoint(
            self.out_dir / name, model=self.model, optimizer=self.optimizer,
            scheduler=self.scheduler, state=self.state, cfg=self.cfg, task=self.task, env=self.env,
        )  # fmt: skip
