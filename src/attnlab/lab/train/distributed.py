"""Single-process or ``torchrun`` multi-process training with the same command.

``torchrun --nproc_per_node=N -m attnlab train ...`` sets ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK`` (and ``LOCAL_WORLD_SIZE``); :func:`init_distributed` reads them, initialises the
process group (``gloo`` on CPU, ``nccl`` on CUDA) and returns a :class:`DistEnv`. Without those
variables everything degrades to no-ops and one process.

Collectives used by the trainer: one ``all_reduce`` per optimizer step of ``[loss_sum, units]``
(so the loss is averaged over the *total* units of all ranks), DDP's gradient ``all_reduce``,
``broadcast_object`` of rank 0's evaluation results, and ``all_gather_object`` of the ranks'
RNG states into a checkpoint.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

__all__ = [
    "DistEnv",
    "env_ranks",
    "resolve_device",
    "init_distributed",
    "shutdown",
    "all_reduce_sum",
    "broadcast_object",
    "all_gather_object",
    "barrier",
    "wrap_model",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistEnv:
    """Where this process sits in a (possibly single-process) run.

    Args:
        rank: global rank (0 writes checkpoints, logs and the progress bar).
        world_size: number of processes.
        local_rank: rank on this machine (selects the CUDA device).
        local_world_size: processes on this machine (shares its CPU cores).
        device: the device this rank trains on.
        owns_group: whether :func:`init_distributed` created the process group (and
            :func:`shutdown` should destroy it).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    owns_group: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def env_ranks() -> tuple[int, int, int, int]:
    """``(rank, world_size, local_rank, local_world_size)`` from torchrun's variables."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    return rank, world, local_rank, local_world


def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """``"auto"`` -> ``cuda:<local_rank>`` if CUDA is available else ``cpu``."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("train.device='cuda' but CUDA is not available; use 'cpu' or 'auto'")
        return torch.device("cuda", local_rank)
    if device != "cpu":
        raise ValueError(f"unknown device {device!r}; valid choices: auto, cpu, cuda")
    return torch.device("cpu")


def init_distributed(device: str = "auto") -> DistEnv:
    """Detect torchrun's environment and initialise the process group if needed.

    On CPU, each of the ``local_world_size`` processes of a machine gets
    ``cpu_count // local_world_size`` threads (at least 1) unless ``OMP_NUM_THREADS`` is set
    (torchrun sets it to 1), so ranks do not oversubscribe the cores.
    """
    rank, world, local_rank, local_world = env_ranks()
    if dist.is_available() and dist.is_initialized():
        rank, world = dist.get_rank(), dist.get_world_size()
    dev = resolve_device(device, local_rank)
    owns = False
    if world > 1:
        if not dist.is_available():
            raise RuntimeError("WORLD_SIZE > 1 but torch.distributed is not available")
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        if not dist.is_initialized():
            dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
            owns = True
        if dev.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, local_world)))
        logger.info(
            "rank %d/%d (local %d) on %s, %d threads",
            rank, world, local_rank, dev, torch.get_num_threads(),
        )  # fmt: skip
    return DistEnv(rank, world, local_rank, local_world, dev, owns)


def barrier(env: DistEnv) -> None:
    if env.distributed:
        dist.barrier()


def shutdown(env: DistEnv) -> None:
    """Barrier, then destroy the process group if :func:`init_distributed` created it."""
    if env.owns_group and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def all_reduce_sum(tensor: torch.Tensor, env: DistEnv) -> torch.Tensor:
    """In-place sum of ``tensor`` over ranks (no-op on one process)."""
    if env.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def broadcast_object(obj: Any, env: DistEnv, src: int = 0) -> Any:
    """Rank ``src``'s ``obj`` on every rank (picklable objects)."""
    if not env.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def all_gather_object(obj: Any, env: DistEnv) -> list[Any]:
    """``[obj of rank 0, obj of rank 1, ...]`` on every rank."""
    if not env.distributed:
        return [obj]
    out: list[Any] = [None] * env.world_size
    dist.all_gather_object(out, obj)
    return out


def wrap_model(model: nn.Module, env: DistEnv) -> nn.Module:
    """``DistributedDataParallel(model)`` under torchrun, else ``model`` itself.

    DDP averages gradients over ranks; the trainer accounts for it when it divides the summed
    loss gradients by the total unit count.
    """
    if not env.distributed:
        return model
    device_ids = [env.device.index] if env.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)
