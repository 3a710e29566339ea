"""The arguments of ``attnlab bench attention`` and ``attnlab bench train`` (no heavy import:
``attnlab --help`` builds every parser)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

Handler = Callable[..., int]


def add_bench_commands(
    sub: Any,
    add: Callable[..., argparse.ArgumentParser],
    *,
    attention: Handler,
    train: Handler,
) -> None:
    """Add ``bench`` with its two subcommands to the subparsers ``sub`` (``add(parent, name,
    **kwargs)`` makes a subparser with the shared ``-v``); ``attention`` and ``train`` handle
    them."""
    b = add(sub, "bench", help="benchmarks: attnlab bench attention | train")
    b_sub = b.add_subparsers(dest="what", required=True)
    ba = add(b_sub, "attention", help="speed/memory of exact and efficient attention")
    ba.add_argument("--kernels", nargs="+", default=None,
                    help="efficient kernels to compare (default: all registered)")  # fmt: skip
    ba.add_argument("--lengths", nargs="+", type=int, default=None,
                    help="sequence lengths (default 512 1024 ... 65536)")  # fmt: skip
    ba.add_argument("--dim", type=int, default=256, help="model width (default 256)")
    ba.add_argument("--heads", type=int, default=4, help="attention heads (default 4)")
    ba.add_argument("--batch", type=int, default=1, help="sequences per call (default 1)")
    ba.add_argument("--repeats", type=int, default=3,
                    help="timed calls per measurement, their mean reported (default 3)")  # fmt: skip
    ba.add_argument("--max-memory-gib", type=float, default=16.0,
                    help="skip (and say so) what is estimated to need more")  # fmt: skip
    ba.add_argument("--time-budget", type=float, default=120.0,
                    help="skip a measurement predicted to take longer (seconds)")  # fmt: skip
    ba.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    ba.add_argument("--out", default="results/bench_attention", help="CSV, PNG and JSON go here")
    ba.set_defaults(func=attention)
    bt = add(b_sub, "train", help="training speed of a task: eager, bf16, compile, side by side")
    bt.add_argument("task", help="a task (attnlab tasks); then its options, --a.b=value ...")
    bt.add_argument("--config", help="JSON (or TOML) file of options, applied before overrides")
    bt.add_argument("--variants", default="eager,bf16,compile,compile+bf16",
                    help="comma-separated: eager, bf16, compile, compile+bf16")  # fmt: skip
    bt.add_argument("--variant", action="append", default=[], metavar="NAME=--a.b=v;--c.d=w",
                    help="also the eager step with these options (repeatable)")  # fmt: skip
    bt.add_argument("--steps", type=int, default=20, help="measured steps per variant")
    bt.add_argument("--warmup", type=int, default=3, help="steps per variant before measuring")
    bt.add_argument("--rounds", type=int, default=4, help="turns the measured steps are split into")
    bt.add_argument("--profile-steps", type=int, default=5, help="profiled steps (0: none)")
    bt.add_argument("--out", default=None, help="write the figures as JSON here")
    bt.set_defaults(func=train, takes_rest=True)
