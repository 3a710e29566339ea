"""Size and write time of the attention viewer's page (``attnlab.viz``) for 6 layers x 8 heads
at 128, 512 and 2048 tokens.

Two kinds of attention, as the page's size depends on how compressible the weights are:

* ``untrained``: a 6-layer, 8-head ``TransformerEncoder(64)`` at initialisation on random
  inputs: near-uniform rows, the hardest case to compress;
* ``peaked``: rows that put most of their weight on a few keys, as trained heads do: the
  softmax of N(0, 3^2) scores (a stated synthetic distribution, not a trained model);
* ``trained`` (with ``--run RUN --input INPUT``): a trained run's own attention on one input
  (``attnlab.viz.view(run, input)``), its bytes per weight at 8 and 4 bits, extrapolated to
  6 x 8 x n^2 weights.

The time is the whole of ``view(model, x).save(path)`` (forward pass with the weights,
encoding, compression, writing) for ``untrained``, and of ``AttentionView(...).save`` for
``peaked``; one run each after one warm-up (a page is written once, not in a loop).

    python benchmarks/viewer_pages.py [--lengths 128 512 2048] [--out results/viewer_pages.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from attnlab.blocks import TransformerEncoder
from attnlab.viz import Attention, AttentionView, read_page, view
from attnlab.viz.page import _Blob, _weights


def _peaked(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [torch.softmax(torch.from_numpy(rng.normal(0, 3.0, (8, n, n))).float(), -1).numpy()
            for _ in range(6)]  # fmt: skip


def _measure(write, path: Path) -> dict:
    start = time.perf_counter()
    write(path)
    seconds = time.perf_counter() - start
    text = path.read_text()
    return {"mb": round(len(text.encode()) / 1e6, 3), "seconds": round(seconds, 2),
            "precision": read_page(text)["precision"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512, 2048])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--run", help="a trained run: also extrapolate from its attention")
    parser.add_argument("--input", default="", help="the run's input, as `attnlab show` takes it")
    args = parser.parse_args()
    if args.run:
        trained(args.run, args.input, args.lengths)
    torch.manual_seed(0)
    encoder = TransformerEncoder(64, 8, 6)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.html"
        view(encoder, torch.randn(1, 16, 64)).save(path)  # warm-up
        for n in args.lengths:
            x = torch.randn(1, n, 64)
            untrained = _measure(lambda p: view(encoder, x).save(p), path)
            labels = [str(k) for k in range(n)]
            layers = _peaked(n)
            peaked = _measure(
                lambda p: AttentionView(Attention("self-attention", layers, labels)).save(p), path
            )
            row = {"tokens": n, "weights": 48 * n * n, "untrained": untrained, "peaked": peaked}
            rows.append(row)
            print(json.dumps(row))
    print("\n| tokens | weights | untrained: MB, precision, s | peaked: MB, precision, s |")
    print("|---:|---:|---|---|")
    for r in rows:
        u, p = r["untrained"], r["peaked"]
        print(f"| {r['tokens']} | {r['weights']:,} | {u['mb']} MB, {u['precision']}, "
              f"{u['seconds']} s | {p['mb']} MB, {p['precision']}, {p['seconds']} s |")  # fmt: skip
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1))


def trained(run: str, text: str, lengths: list[int]) -> None:
    """Bytes per weight of ``run``'s own attention in the page's blob (base64 included), at 8
    and 4 bits, and the page that rate gives for 6 x 8 x n^2 weights."""
    shown = view(run, text)
    family = shown.attentions[0]
    count = sum(w.size for w in family.weights)
    print(f"{run}: {len(family.weights)} layers, heads {[w.shape[0] for w in family.weights]}, "
          f"{family.weights[0].shape[1]} positions, {count:,} weights")  # fmt: skip
    for bits in (8, 4):
        blob = _Blob()
        for w in family.weights:
            _weights(blob, w, "uint", bits)
        per = len(blob.encoded()) / count
        sizes = ", ".join(f"{n}: {per * 48 * n * n / 1e6:.1f} MB" for n in lengths)
        print(f"  {bits}-bit: {per:.3f} bytes a weight -> 6 x 8 heads at {sizes}")


if __name__ == "__main__":
    main()
