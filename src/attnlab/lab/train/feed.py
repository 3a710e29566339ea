"""What a rank feeds its model: the seeded epoch order, the global batches of each step, this
rank's micro-batches of them, collated and moved to the device.

Everything here is a pure function of ``(seed, epoch, position in the epoch, rank)``, so a
resumed run (:mod:`~attnlab.lab.train.resume`) rebuilds exactly the batches the interrupted one
would have seen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader

from attnlab.lab.train.batching import bucket_batches, epoch_order, make_batches, rank_micro_batches
from attnlab.lab.train.compile import PaddedCollate, pad_multiple_of
from attnlab.lab.train.distributed import DistEnv
from attnlab.lab.train.precision import choose_precision

if TYPE_CHECKING:
    from attnlab.lab.tasks import Task
    from attnlab.lab.train.config import TrainConfig

__all__ = ["Feed", "Micro"]

Micro = tuple[dict[str, Any], bool]  # (collated micro-batch, is a zero-weight dummy)


class Feed:
    """The batches of one rank.

    Args:
        task: collates examples (:meth:`Task.collate`) and prices them for token batching
            (:meth:`Task.batch_size_of`).
        train: the train split.
        tc: the trainer's settings (batching, seed, workers, precision, padding); its
            ``precision`` resolved (``fp32`` or ``bf16``, not ``auto``: the trainer resolves it).
        env: this process's place in the run (rank, world size, device).

    Batches (train and evaluation alike) are padded to multiples of ``train.pad_multiple``
    (:func:`~attnlab.lab.train.compile.pad_batch`; 8 by default under ``train.compile``).
    """

    def __init__(self, task: Task, train: list, tc: TrainConfig, env: DistEnv) -> None:
        self.task, self.train, self.tc, self.env = task, train, tc, env
        self.device = env.device
        self.bf16 = choose_precision(tc.precision, self.device).bf16
        self.collate = PaddedCollate(task.collate, pad_multiple_of(tc.compile, tc.pad_multiple),
                                     floats=task.padded_floats)  # fmt: skip
        needs_costs = tc.batch_tokens or tc.bucket
        self.costs = [task.batch_size_of(ex) for ex in train] if needs_costs else None

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """The global batches (lists of train indices) of ``epoch``, in order."""
        tc = self.tc
        order = epoch_order(len(self.train), seed=tc.seed, epoch=epoch)
        if tc.bucket:
            return bucket_batches(
                order, costs=self.costs, bucket=tc.bucket, batch_size=tc.batch_size,
                max_cost=tc.batch_tokens, seed=tc.seed + epoch,
            )  # fmt: skip
        return make_batches(
            order, batch_size=tc.batch_size, costs=self.costs, max_cost=tc.batch_tokens
        )

    def loader(self, examples: list, **kwargs: Any) -> DataLoader:
        """A DataLoader collating ``examples`` (``kwargs``: ``batch_size`` or
        ``batch_sampler``)."""
        # An explicit generator keeps DataLoader from drawing its worker base seed from the
        # global torch RNG: creating a loader must not shift the dropout stream, or a resumed
        # run (which creates its loader mid-epoch) would diverge.
        return DataLoader(
            examples, collate_fn=self.collate, num_workers=self.tc.num_workers,
            pin_memory=self.device.type == "cuda",
            generator=torch.Generator().manual_seed(self.tc.seed), **kwargs,
        )  # fmt: skip

    def steps(self, batches: list[list[int]], start: int) -> Iterator[list[Micro]]:
        """This rank's micro-batches of each remaining step of the epoch, from ``start``."""
        tc, env = self.tc, self.env
        indices, dummy = [], []
        for batch in batches[start:]:
            for chunk in rank_micro_batches(
                batch, rank=env.rank, world_size=env.world_size, grad_accum=tc.grad_accum
            ):
                dummy.append(not chunk)
                indices.append(chunk or batch[:1])  # a dummy keeps collectives aligned
        if not indices:
            return
        it = iter(self.loader(self.train, batch_sampler=indices))
        accum = tc.grad_accum
        for k in range(len(batches) - start):
            yield [(next(it), dummy[k * accum + m]) for m in range(accum)]

    def autocast(self) -> contextlib.AbstractContextManager:
        """bfloat16 autocast of the forward pass if ``train.precision`` is ``bf16``, else a
        no-op."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        """``batch`` with its tensors on the device."""
        return {
            k: v.to(self.device, non_blocking=True) if isinstance(v, Tensor) else v
            for k, v in batch.items()
        }
