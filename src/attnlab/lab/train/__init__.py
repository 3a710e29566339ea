"""The trainer of the lab: config, batching, checkpoints, distributed training.

``Trainer(task, cfg).fit()`` trains any registered :class:`~attnlab.lab.tasks.Task`, single-process
or under ``torchrun``, and resumes bit-exactly from ``last.pt``.
"""

from attnlab.lab.train.checkpoint import (
    find_checkpoint,
    load_checkpoint,
    load_for_inference,
    save_checkpoint,
)
from attnlab.lab.train.combine import average_checkpoints, load_ensemble
from attnlab.lab.train.config import (
    RunConfig,
    TrainConfig,
    apply_overrides,
    from_dict,
    load_config_file,
    resolve_config,
    save_config,
    to_dict,
)
from attnlab.lab.train.distributed import DistEnv, init_distributed
from attnlab.lab.train.errors import DivergenceError, RunError, TrainingInterrupted
from attnlab.lab.train.result import TrainResult
from attnlab.lab.train.trainer import Trainer

__all__ = [
    "Trainer",
    "TrainResult",
    "RunError",
    "DivergenceError",
    "TrainingInterrupted",
    "RunConfig",
    "TrainConfig",
    "apply_overrides",
    "to_dict",
    "from_dict",
    "load_config_file",
    "resolve_config",
    "save_config",
    "save_checkpoint",
    "load_checkpoint",
    "find_checkpoint",
    "load_for_inference",
    "load_ensemble",
    "average_checkpoints",
    "DistEnv",
    "init_distributed",
]
