"""The Reformer kernel's forward and backward, this tree's against another revision's, in turns
in one process (the kernel alone: `python benchmarks/reformer_masks.py --against 0b564a9`).

The other revision's ``src/attnlab/efficient/reformer.py`` is read with ``git show`` and loaded
beside this tree's, so both run on the same inputs; their outputs and gradients are compared
too. Results: BENCHMARKS.md, "The Reformer's chunk masks".
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from attnlab.efficient.base import MaskParts
from attnlab.efficient.reformer import ReformerKernel

ROOT = Path(__file__).resolve().parents[1]


def kernel_at(rev: str) -> type:
    """``ReformerKernel`` as revision ``rev`` wrote it (its relative imports made absolute)."""
    text = subprocess.run(["git", "show", f"{rev}:src/attnlab/efficient/reformer.py"], cwd=ROOT,
                          check=True, capture_output=True, text=True).stdout  # fmt: skip
    text = text.replace("from ..", "from attnlab.").replace("from .", "from attnlab.efficient.")
    path = Path(tempfile.mkdtemp()) / f"reformer_{rev}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ReformerKernel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the revision to compare with")
    parser.add_argument("--shape", type=int, nargs=4, default=(32, 4, 2000, 16),
                        metavar=("B", "H", "N", "D"))  # fmt: skip
    parser.add_argument("--buckets", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    b, h, n, d = args.shape
    options = dict(dim=h * d, heads=h, buckets=args.buckets, rounds=args.rounds)
    kernels = {
        args.against: kernel_at(args.against)(**options),
        "this tree": ReformerKernel(**options),
    }
    torch.manual_seed(0)
    q = torch.randn(b, h, n, d, requires_grad=True)
    v = torch.randn(b, h, n, d, requires_grad=True)
    lengths = torch.randint(n // 4, n + 1, (b,))
    lengths[0] = n
    valid = torch.arange(n)[None] < lengths[:, None]
    parts = MaskParts(valid[:, None, None, :], False, None, None)
    up = torch.randn(b, h, n, d)

    def step(kernel) -> list[torch.Tensor]:
        out = kernel.attend(q, q, v, parts)
        out.backward(up)
        grads = [q.grad, v.grad]
        q.grad = v.grad = None
        return [out.detach(), *grads]

    first, second = (step(k) for k in kernels.values())  # a warm-up each, and the comparison
    diff = max(float((x - y).abs().max()) for x, y in zip(first, second))
    times: dict[str, list[float]] = {name: [] for name in kernels}
    for _ in range(args.repeats):
        for name, kernel in kernels.items():
            start = time.perf_counter()
            step(kernel)
            times[name].append(time.perf_counter() - start)
    median = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
    print(f"reformer, b={b} h={h} n={n} d={d}, {args.buckets} buckets, {args.rounds} rounds, "
          f"{torch.get_num_threads()} threads; largest difference of outputs and gradients: {diff:.1e}")  # fmt: skip
    before, after = median.values()
    print(f"forward + backward, median of {args.repeats}: {args.against} {before * 1e3:,.0f} ms, "
          f"this tree {after * 1e3:,.0f} ms: {before / after:.2f}x")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
