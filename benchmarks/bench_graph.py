"""Graph attention speed: attnlab's GATConv against PyG's on Cora, and the edge-list kernel's
scaling in the number of edges.

Usage::

    python benchmarks/bench_graph.py [--quick] [--threads N] [--out results/bench_graph.json]
    python benchmarks/bench_graph.py --scale [--sizes 10000,100000,1000000] [--quick]
    python benchmarks/bench_graph.py --crossover [--quick]

**Cora** (default): the GAT of Velickovic et al. 2018, two layers (8 heads x 8 hidden, ELU,
then 1 head x 7 classes), full batch on Cora's graph (2,708 nodes, 1,433 features, 10,556
edges + 2,708 self loops), read from the mirror's ``planetoid/`` files (``ATTNLAB_DATA``) or,
without them, a seeded random graph of the same sizes. attnlab's model gets PyG's weights
(``GATConv.from_pyg``); both get the same inputs; outputs and gradients are checked equal before
timing. Forward + backward (loss = sum of the log-softmax at the training nodes), train mode
with dropout 0 (so both compute the same function), timed in turns (ours, PyG, ours, PyG, ...)
with :func:`attnlab.lab.bench.time_call`; ``ratio`` = PyG time / attnlab time (> 1: attnlab faster).

**Scale** (``--scale``): one attnlab ``GATConv(16, 8, heads=2)`` on a seeded power-law graph
(:func:`power_law_graph`, 10 edges per node) at three sizes up to 1M nodes / 10M edges;
forward + backward time, peak RSS (``resource.getrusage``: the whole process so far, so the
largest size's peak is the run's) and the exponent of time against E fitted over the sizes
(1 = linear).

**Crossover** (``--crossover``): ``MultiHeadAttention(64, 4)`` under ``masks.graph`` of a random
graph at n = 2048 and densities 0.2% to 20%, fwd+bwd on the ``edges`` backend and on dense SDPA
(same weights): where ``auto``'s density threshold (3%, ``_EDGES_MAX_DENSITY``) should sit.

Run on a quiet machine; results go to ``--out`` as JSON and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

from attnlab.lab.bench import time_call  # noqa: E402
from attnlab.graph import GATConv  # noqa: E402


def cora() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, str]:
    """Cora's features, edges and training nodes from the mirror, else a random stand-in."""
    root = Path(os.environ.get("ATTNLAB_DATA", "/work/shared/data")) / "planetoid"
    try:
        from attnlab.lab.data.readers.planetoid import read_planetoid

        g = read_planetoid(root, "cora")
        return g.x, g.edge_index, g.train_index, "cora (mirror)"
    except Exception as err:  # the mirror or the reader is absent: same sizes, random
        gen = torch.Generator().manual_seed(0)
        x = (torch.rand(2708, 1433, generator=gen) < 0.0127).float()
        ei = torch.randint(0, 2708, (2, 10556), generator=gen)
        return x, ei, torch.arange(140), f"random stand-in of Cora's sizes ({err})"


class GAT(torch.nn.Module):
    """Velickovic et al.'s Cora GAT: 8 heads x 8 hidden, ELU, 1 head x classes."""

    def __init__(self, conv, features: int, classes: int) -> None:
        super().__init__()
        self.conv1 = conv(features, 8, heads=8)
        self.conv2 = conv(64, classes, heads=1)

    def forward(self, x, edge_index):
        return self.conv2(F.elu(self.conv1(x, edge_index)), edge_index)


def bench_cora(args) -> dict:
    from torch_geometric.nn import GATConv as PyGGATConv

    x, ei, train, source = cora()
    torch.manual_seed(0)
    theirs = GAT(PyGGATConv, x.shape[1], 7)
    ours = GAT(GATConv, x.shape[1], 7)
    ours.conv1 = GATConv.from_pyg(theirs.conv1)
    ours.conv2 = GATConv.from_pyg(theirs.conv2)

    def step(model):
        model.zero_grad(set_to_none=True)
        out = model(x, ei)
        loss = F.log_softmax(out, -1)[train].sum()
        loss.backward()
        return out

    # Equal before timing: outputs and every parameter's gradient.
    out_ours, out_theirs = step(ours), step(theirs)
    diff = (out_ours - out_theirs).abs().max().item()
    grads = dict(ours.named_parameters())
    gdiff = max((grads[k].grad - p.grad).abs().max().item() for k, p in theirs.named_parameters())
    assert diff < 1e-4 and gdiff < 1e-3, (diff, gdiff)
    repeats = 3 if args.quick else 20
    times = {"attnlab": [], "pyg": []}
    for _ in range(2 if args.quick else 5):  # in turns, so drifts of the machine hit both
        times["attnlab"].append(time_call(lambda: step(ours), repeats=repeats))
        times["pyg"].append(time_call(lambda: step(theirs), repeats=repeats))
    best = {k: min(v) for k, v in times.items()}
    row = {
        "graph": source,
        "nodes": x.shape[0],
        "edges_with_loops": ei.shape[1] + x.shape[0],
        "attnlab_ms": best["attnlab"] * 1e3,
        "pyg_ms": best["pyg"] * 1e3,
        "ratio": best["pyg"] / best["attnlab"],
        "max_out_diff": diff,
        "max_grad_diff": gdiff,
    }
    print(f"Cora GAT fwd+bwd ({source}): attnlab {row['attnlab_ms']:.2f} ms, PyG "
          f"{row['pyg_ms']:.2f} ms, ratio {row['ratio']:.2f} (> 1: attnlab faster)")  # fmt: skip
    return row


def power_law_graph(n: int, avg_degree: int = 10, gamma: float = 2.5, seed: int = 0) -> torch.Tensor:  # fmt: skip
    """A seeded Chung-Lu graph with power-law degrees: ``avg_degree * n`` directed edges whose
    two ends are drawn independently with probability proportional to ``w_i = (i + 1)^{-1 /
    (gamma - 1)}``, so in- and out-degrees follow a power law of exponent ``gamma`` (hubs of
    thousands of edges at a million nodes). ``(2, avg_degree * n)`` long; O(E log n)."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.arange(1, n + 1, dtype=torch.float64).pow(-1.0 / (gamma - 1.0))
    cdf = torch.cumsum(w, 0)
    cdf /= cdf[-1].clone()
    e = avg_degree * n
    ends = torch.searchsorted(cdf, torch.rand(2, e, generator=gen, dtype=torch.float64))
    return ends.clamp_max_(n - 1)


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def bench_scale(args) -> list[dict]:
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.quick:
        sizes = [s // 100 for s in sizes]
    rows = []
    for n in sizes:
        ei = power_law_graph(n)
        torch.manual_seed(0)
        conv = GATConv(16, 8, heads=2)
        x = torch.randn(n, 16)

        def step():
            conv.zero_grad(set_to_none=True)
            conv(x, ei).square().mean().backward()

        t0 = time.perf_counter()
        step()  # warm-up, and the edge cache of the graph
        first = time.perf_counter() - t0
        t = time_call(step, repeats=1 if n >= 10**6 else 3)
        rows.append({"nodes": n, "edges": int(ei.shape[1]), "seconds": t, "first_call_s": first,
                     "peak_rss_gib": peak_rss_gib()})  # fmt: skip
        print(f"n={n:>9,} E={ei.shape[1]:>11,} fwd+bwd {t:8.3f} s  peak RSS {peak_rss_gib():.2f} GiB")  # fmt: skip
    if len(rows) >= 2:
        xs = [math.log(r["edges"]) for r in rows]
        ys = [math.log(r["seconds"]) for r in rows]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys)) / sum((a - mx) ** 2 for a in xs)
        print(f"time ~ E^{slope:.2f} over {len(rows)} sizes (1 = linear)")
        rows.append({"exponent": slope})
    return rows


def bench_crossover(args) -> list[dict]:
    """The ``edges`` backend against dense SDPA under the same graph mask, by density: where
    ``auto``'s ``_EDGES_MAX_DENSITY`` (attnlab.backends.edges) should sit on this machine."""
    from attnlab import MultiHeadAttention, masks

    n = 256 if args.quick else 2048
    torch.manual_seed(0)
    x = torch.randn(1, n, 64, requires_grad=True)
    rows = []
    for density in (0.002, 0.01, 0.03, 0.05, 0.1, 0.2):
        ei = torch.randint(
            0, n, (2, int(density * n * n)), generator=torch.Generator().manual_seed(1)
        )
        mask = masks.graph(ei, n)
        layers = {b: MultiHeadAttention(64, 4, backend=b) for b in ("edges", "sdpa")}
        layers["sdpa"].load_state_dict(layers["edges"].state_dict())

        def step(layer):
            layer(x, mask=mask).out.sum().backward()

        t = {
            b: time_call(lambda b=b: step(layers[b]), repeats=2 if args.quick else 10)
            for b in layers
        }
        rows.append({"nodes": n, "density": density, "edges_ms": t["edges"] * 1e3,
                     "sdpa_ms": t["sdpa"] * 1e3, "sdpa_over_edges": t["sdpa"] / t["edges"]})  # fmt: skip
        print(f"density {density:5.3f}: edges {t['edges'] * 1e3:8.2f} ms  sdpa {t['sdpa'] * 1e3:8.2f} ms  sdpa/edges {t['sdpa'] / t['edges']:.2f}")  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", action="store_true", help="the scaling run instead of Cora")
    ap.add_argument("--crossover", action="store_true", help="edges vs sdpa by graph density")
    ap.add_argument("--sizes", default="10000,100000,1000000", help="nodes, comma separated")
    ap.add_argument("--quick", action="store_true", help="a smoke run (sizes / 100, few repeats)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--out", default="results/bench_graph.json")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(machine())
    result = {"machine": machine(), "quick": args.quick}
    if args.scale:
        result["scale"] = bench_scale(args)
    elif args.crossover:
        result["crossover"] = bench_crossover(args)
    else:
        result["cora"] = bench_cora(args)
    out = Path(args.out if not args.quick else args.out.replace(".json", "_quick.json"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
