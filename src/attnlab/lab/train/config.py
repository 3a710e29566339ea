"""Run configuration: nested, typed dataclasses (minGPT style), files and overrides.

A run is ``RunConfig(task, out_dir, train=TrainConfig(...), model=..., task_options=...)``.
``model`` and ``task_options`` belong to the task: :meth:`RunConfig.for_task` fills them with
the task's own defaults (:meth:`Task.default_model_config`, :meth:`Task.default_options`),
usually dataclasses, so ``--model.encoder.heads=8`` is checked against the task's model config.

Resolution order (:func:`resolve_config`): task defaults, then a JSON/TOML file, then
``--dotted.name=value`` overrides. Every run writes the resolved ``config.json`` to its
``out_dir`` (:func:`save_config`), and :meth:`RunConfig.from_dict` reads it back.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from attnlab.attention_config import AttentionConfig
from attnlab.lab.tasks import presets
from attnlab.lab.tasks.registry import TASKS
from attnlab.lab.train.atomic import atomic_write_text
from attnlab.lab.train.budget import parse_duration
from attnlab.lab.train.compile import COMPILE_MODES
from attnlab.lab.train.merge import from_dict, merge, to_dict
from attnlab.lab.train.overrides import apply_overrides, override_tree, parse_override

__all__ = [
    "TrainConfig",
    "RunConfig",
    "apply_overrides",
    "to_dict",
    "from_dict",
    "load_config_file",
    "resolve_config",
    "save_config",
]


@dataclass
class TrainConfig:
    """How to train: optimisation, schedule, evaluation, checkpoints.

    Batches: ``batch_size`` is the *global* number of examples per optimizer step, split over
    DDP ranks and ``grad_accum`` micro-batches, so the result does not depend on how many
    processes run it. With ``batch_tokens > 0`` a global batch instead takes examples (in the
    shuffled order) while the sum of :meth:`Task.batch_size_of` stays within ``batch_tokens``.
    With ``bucket > 0`` examples are sorted by that cost within pools of ``bucket`` batches
    before they are cut, and the batches are shuffled: batches of similar lengths, less padding
    (:func:`~attnlab.lab.train.batching.bucket_batches`).

    Learning rate: linear warm-up over ``warmup_steps`` (or ``warmup_fraction`` of all steps),
    then ``schedule`` from ``lr`` down to ``lr * min_lr_ratio`` at the last step.

    Args:
        epochs: passes over the train split.
        max_steps: stop after this many optimizer steps (0: no limit); also shortens the schedule.
        max_time: wall-clock budget of the training loop, summed over resumed segments: 90s,
            30m, 2h, 1h30m or plain seconds (0: no limit). The run stops after the step that
            reaches it, evaluates, saves last.pt and tests its best model; the learning-rate
            schedule is not shortened. --resume with a larger budget continues for the rest.
        batch_size: global examples per optimizer step.
        batch_tokens: if > 0, token-based batching (see above); ``batch_size`` is then unused.
        bucket: length bucketing: sort examples by cost within pools of this many batches
            (0: off).
        eval_batch_size: examples per evaluation batch (None: ``batch_size``).
        grad_accum: micro-batches per rank per optimizer step.
        lr: peak learning rate of AdamW.
        weight_decay: AdamW decoupled weight decay (not applied to biases, norms, embeddings).
        betas: AdamW betas.
        warmup_steps: linear warm-up steps (exclusive with ``warmup_fraction``).
        warmup_fraction: warm-up as a fraction of all optimizer steps.
        schedule: decay after warm-up: ``"cosine"``, ``"linear"`` or ``"constant"``.
        min_lr_ratio: final learning rate as a fraction of ``lr``.
        grad_clip: max global gradient norm (0: no clipping).
        precision: the forward pass's dtype: ``"fp32"``, ``"bf16"`` (bfloat16 autocast; weights,
            gradients and AdamW stay float32) or ``"auto"``: bf16 where the hardware multiplies
            bfloat16 natively (a CPU with AVX512_BF16 or AMX, a CUDA device with bfloat16),
            else fp32 (module ``attnlab.lab.train.precision``). The trainer logs the choice and
            saves it in the run's config, so evaluation runs as the training did.
        compile: ``torch.compile`` the model for training and evaluation, with dynamic shapes
            and padded batches so that it compiles in its first steps only (how: module
            ``attnlab.lab.train.compile``); checkpoints keep the plain model's keys.
        compile_mode: ``torch.compile``'s mode: ``"default"``, ``"reduce-overhead"`` (CUDA
            graphs), ``"max-autotune"`` or ``"max-autotune-no-cudagraphs"``.
        pad_multiple: pad every padded dimension of a batch (sequence length, characters per
            word) up to a multiple of this, so that a compiled model meets few shapes, and so
            does oneDNN in eager mode (it compiles a kernel per new shape of a convolution or
            bfloat16 matmul: ``pos`` sets 8 and trains 1.03x faster); padding is inert
            (None: 8 with ``compile``, else 1, no padding).
        patience: stop after this many evaluations without a better dev score (0: never).
        eval_every: evaluate on dev every this many steps (0: at the end of each epoch).
        checkpoint_every: also write ``last.pt`` every this many steps (0: at evaluations and
            epoch ends instead, as ``checkpoint_interval`` says).
        checkpoint_interval: at evaluations and epoch ends, write ``last.pt`` only once this
            long (a duration: 30s, 5m; 0: every time) has passed since the last one, or with a
            new ``best.pt``. Where an epoch takes milliseconds (a graph is one step), writing
            it at each was half of a run. A run stopped by a signal, by ``max_time`` or at its
            end always writes it; one killed outright loses at most this long and the
            evaluation or epoch it was in.
        keep_epochs: also keep the weights of each of the last this many epoch ends as
            ``epoch-EEE.pt`` (no optimizer state), to average with ``attnlab average``
            (0: none).
        seed: seeds model init, data order (epoch ``e`` shuffles with ``seed + e``), dropout.
        num_workers: DataLoader worker processes for collation.
        log_every: log (and refresh the progress bar's postfix) every this many steps.
        tensorboard: also write TensorBoard event files to ``out_dir/tensorboard`` (train loss,
            learning rate and speed every ``log_every`` steps, dev metrics at each evaluation,
            test metrics at the end); needs the optional extra ``attnlab[tensorboard]``.
        device: ``"auto"`` (CUDA if available), ``"cpu"`` or ``"cuda"``.
        resume: continue the run in ``out_dir`` from its ``last.pt`` (an error if there is none).
        overwrite: replace a run that ``out_dir`` already holds (without it, or ``resume``,
            such a directory is refused).
        max_bad_steps: steps with a non-finite loss or gradient that are skipped (no update)
            before the run stops with an error (0: stop at the first).
    """

    epochs: int = 10
    max_steps: int = 0
    max_time: float | str = 0
    batch_size: int = 32
    batch_tokens: int = 0
    bucket: int = 0
    eval_batch_size: int | None = None
    grad_accum: int = 1
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_steps: int = 0
    warmup_fraction: float = 0.0
    schedule: Literal["cosine", "linear", "constant"] = "cosine"
    min_lr_ratio: float = 0.0
    grad_clip: float = 1.0
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    compile: bool = False
    compile_mode: Literal[
        "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"
    ] = "default"
    pad_multiple: int | None = None
    patience: int = 0
    eval_every: int = 0
    checkpoint_every: int = 0
    checkpoint_interval: float | str = "30s"
    keep_epochs: int = 0
    seed: int = 0
    num_workers: int = 0
    log_every: int = 50
    tensorboard: bool = False
    device: Literal["auto", "cpu", "cuda"] = "auto"
    resume: bool = False
    overwrite: bool = False
    max_bad_steps: int = 0

    def __post_init__(self) -> None:
        for name in ("max_time", "checkpoint_interval"):  # a bad value fails here, naming
            parse_duration(getattr(self, name), f"train.{name}")  # the accepted forms
        nonneg = ("max_steps", "batch_tokens", "bucket", "warmup_steps", "patience", "eval_every",
                  "checkpoint_every", "keep_epochs", "num_workers", "log_every", "max_bad_steps")  # fmt: skip
        for name in nonneg:
            if getattr(self, name) < 0:
                raise ValueError(f"train.{name} must be >= 0, got {getattr(self, name)}")
        for name in ("epochs", "batch_size", "grad_accum"):
            if getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be >= 1, got {getattr(self, name)}")
        if self.eval_batch_size is not None and self.eval_batch_size < 1:
            raise ValueError(
                f"train.eval_batch_size must be >= 1 or None, got {self.eval_batch_size}"
            )
        for name in ("lr", "weight_decay", "grad_clip"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):  # nan fails every comparison
                raise ValueError(f"train.{name} must be a finite number >= 0, got {value}")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            raise ValueError(f"train.betas must both be in [0, 1), got {self.betas}")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise ValueError(f"train.warmup_fraction must be in [0, 1), got {self.warmup_fraction}")
        if self.warmup_steps and self.warmup_fraction:
            raise ValueError(
                "train.warmup_steps and train.warmup_fraction are exclusive; set one of them to 0"
            )
        if self.pad_multiple is not None and self.pad_multiple < 1:
            raise ValueError(
                f"train.pad_multiple must be >= 1 (1: no padding) or None, got {self.pad_multiple}"
            )
        if self.compile_mode not in COMPILE_MODES:
            raise ValueError(
                f"train.compile_mode must be one of {', '.join(COMPILE_MODES)}; "
                f"got {self.compile_mode!r}"
            )
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ValueError(f"train.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio}")

    @property
    def max_time_s(self) -> float:
        """``max_time`` in seconds (0: no limit)."""
        return parse_duration(self.max_time)

    @property
    def checkpoint_interval_s(self) -> float:
        """``checkpoint_interval`` in seconds (0: ``last.pt`` at every evaluation and epoch
        end)."""
        return parse_duration(self.checkpoint_interval, "train.checkpoint_interval")


@dataclass
class RunConfig:
    """One run: which task, where its outputs go, and how to train it.

    Args:
        task: registry name of the task (:data:`attnlab.lab.tasks.TASKS`).
        out_dir: the run's directory (config.json, metrics.csv and .json, last.pt, best.pt);
            runs/TASK unless set.
        train: the trainer's settings.
        model: the task's model configuration (a dataclass from
            :meth:`Task.default_model_config`, or a dict).
        task_options: the task's options (a dataclass from :meth:`Task.default_options`, or a
            dict).
    """

    task: str = ""
    out_dir: str = "runs/default"
    train: TrainConfig = field(default_factory=TrainConfig)
    model: Any = field(default_factory=dict)
    task_options: Any = field(default_factory=dict)

    @classmethod
    def for_task(cls, task: str, **kwargs: Any) -> RunConfig:
        """Defaults for ``task``: its model config and options come from the task class."""
        task_cls = TASKS.get(task)
        kwargs.setdefault("out_dir", f"runs/{task}")
        kwargs.setdefault("model", task_cls.default_model_config())
        kwargs.setdefault("task_options", task_cls.default_options())
        if "train" not in kwargs:  # the task's recipe over the trainer's defaults
            kwargs["train"] = TrainConfig(**task_cls.default_train_options())
        return cls(task=task, **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Inverse of :meth:`to_dict`: the task's defaults merged with ``data``."""
        name = data.get("task", "")
        base = cls.for_task(name) if name in TASKS else cls()
        return merge(base, data)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict of every field (what ``config.json`` holds)."""
        return to_dict(self)


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(f"config file {path}: no such file")
    if path.suffix == ".toml":
        try:
            import tomllib
        except ModuleNotFoundError as err:  # Python < 3.11
            raise ValueError(f"{path}: TOML config files need Python >= 3.11 (tomllib)") from err
        with path.open("rb") as f:
            try:
                return tomllib.load(f)
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
                raise ValueError(f"config file {path}: not valid TOML: {err}") from None
    with path.open("rb") as f:
        try:
            data = json.loads(f.read().decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError(f"config file {path}: not JSON text (not UTF-8)") from None
        except json.JSONDecodeError as err:
            where = f"line {err.lineno}, column {err.colno}"
            raise ValueError(f"config file {path}: invalid JSON at {where}: {err.msg}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config file holds an object, got {type(data).__name__}")
    return data


def load_config_file(path: str | Path, base: RunConfig | None = None) -> RunConfig:
    """Merge a JSON (or, with ``tomllib``, ``.toml``) config file into ``base``.

    Args:
        path: the file; nested objects/tables mirror the dataclasses (``{"train": {"lr": ...}}``).
        base: the config to merge into; default: the defaults of the file's ``task``. When the
            file names a different task than ``base``, the new task's defaults are used.
    """
    data = _read(Path(path))
    name = data.get("task")
    if base is None or (name and name != base.task):
        base = RunConfig.for_task(name) if name else (base or RunConfig())
    return merge(base, data)


#: the section that stands for every attention setting of a model (``--attention.kernel=...``)
ATTENTION = "attention"
#: the section that stands for the task's ``task_options.data`` (``--data.train=FILE``)
DATA = "data"
#: the short names of sections, as ``--help`` lists them
ALIASES = {f"task_options.{DATA}": DATA}


def _data_alias(cfg: RunConfig, section: Any, given: str) -> RunConfig:
    """``cfg`` with the ``data`` ``section`` (``{"train": "my.csv"}``) merged into its task's
    ``task_options.data``."""
    if not dataclasses.is_dataclass(cfg.task_options) or not any(
        f.name == DATA for f in dataclasses.fields(cfg.task_options)
    ):
        raise ValueError(
            f"{given}: the {cfg.task!r} task reads no files of yours; --data.* is for the tasks "
            "whose --help lists a data section (e.g. text-classify, audio-classify, "
            "image-classify)"
        )
    if not isinstance(section, Mapping):
        raise ValueError(f"{given}: set one data setting, e.g. --data.train=FILE")
    return merge(cfg, {"task_options": {DATA: dict(section)}})


def attention_paths(model: Any, prefix: str = "model") -> list[str]:
    """The dotted paths of every :class:`~attnlab.attention_config.AttentionConfig` in a
    model config (nested dataclasses): ``["model.encoder.attention"]`` for a text task's
    Transformer, ``[]`` for its RNN."""
    if isinstance(model, AttentionConfig):
        return [prefix]
    if not dataclasses.is_dataclass(model) or isinstance(model, type):
        return []
    return [path for f in dataclasses.fields(model)
            for path in attention_paths(getattr(model, f.name), f"{prefix}.{f.name}")]  # fmt: skip


def _attention_alias(cfg: RunConfig, section: Mapping[str, Any], given: str) -> RunConfig:
    """``cfg`` with the ``attention`` ``section`` (``{"kernel": "linear"}``) merged into every
    attention config of its model (:func:`attention_paths`)."""
    paths = attention_paths(cfg.model)
    if not paths:
        raise ValueError(
            f"{given}: the {cfg.task!r} model has no attention settings (its config: "
            f"{type(cfg.model).__name__}{_kind(cfg.model)}); choose a model with attention"
        )
    for path in paths:
        tree: dict[str, Any] = dict(section)
        for part in reversed(path.split(".")[1:]):
            tree = {part: tree}
        cfg = merge(cfg, {"model": tree})
    return cfg


def _kind(model: Any) -> str:
    encoder = getattr(model, "encoder", None)
    kind = getattr(encoder, "kind", None) or getattr(model, "kind", None)
    return f", kind {kind!r}" if kind else ""


def resolve_config(
    *,
    task: str | None = None,
    config_file: str | Path | None = None,
    overrides: Sequence[str] = (),
    preset: str | None = None,
) -> RunConfig:
    """Task defaults, then the task's ``preset`` (:mod:`attnlab.lab.tasks.presets`: ``tiny``,
    ``default``, ``paper``), then ``config_file``, then ``overrides`` (``--train.lr=1e-3`` ...).

    The task is, by precedence, a ``--task=...`` override, ``task``, or the file's ``task``.
    ``--attention.X=V`` (and a file's ``attention`` section) sets ``X`` in every attention
    config of the model (:func:`attention_paths`: ``model.encoder.attention`` for the text,
    speech and image encoders, ``model.attention`` for molecules, graphs and g2p), after the
    other settings, so that ``--model.encoder.kind=cnn-attention --attention.kernel=linear``
    reaches the kind chosen. ``--data.X=V`` (and a file's ``data`` section) sets ``X`` in the
    task's ``task_options.data`` (the user's own files of the text tasks).
    """
    data = _read(Path(config_file)) if config_file is not None else {}
    plain, attention, files = [], [], []
    for item in overrides:
        parts, value = parse_override(item)
        if parts == ["task"]:
            task = value
        {ATTENTION: attention, DATA: files}.get(parts[0], plain).append(item)
    task = task or data.get("task")
    cfg = RunConfig.for_task(task) if task else RunConfig()
    if preset:
        if not task:
            raise ValueError(f"--preset {preset}: name a task (presets belong to a task)")
        cfg = merge(cfg, presets.preset(task, preset))
    cfg = merge(cfg, {k: v for k, v in data.items() if k not in ("task", ATTENTION, DATA)})
    if DATA in data:
        cfg = _data_alias(cfg, data[DATA], f"{config_file}: {DATA}")
    if files:
        cfg = _data_alias(cfg, override_tree(files)[DATA], " ".join(files))
    cfg = apply_overrides(cfg, plain)
    if ATTENTION in data:
        cfg = _attention_alias(cfg, data[ATTENTION], f"{config_file}: {ATTENTION}")
    if attention:
        section = override_tree(attention)[ATTENTION]
        if not isinstance(section, Mapping):
            raise ValueError(
                f"{attention[0]}: set one attention setting, e.g. --attention.kernel=linear"
            )
        cfg = _attention_alias(cfg, section, " ".join(attention))
    return cfg


def save_config(cfg: RunConfig, out_dir: str | Path | None = None) -> Path:
    """Write the resolved ``config.json`` into ``out_dir`` (default ``cfg.out_dir``)."""
    path = Path(out_dir if out_dir is not None else cfg.out_dir) / "config.json"
    atomic_write_text(path, json.dumps(cfg.to_dict(), indent=2) + "\n")
    return path
