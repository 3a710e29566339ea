"""Self-attention against RNNs: training cost by length, forgetting on ``recall``, and decoding
one token at a time.

Usage::

    # 1. fwd+bwd time per step and peak tensor memory, lengths 256..8192 (a quiet machine)
    OMP_NUM_THREADS=2 python benchmarks/rnn_vs_attention.py speed [--lengths 256 ... 8192]
        [--dim 128] [--batch 4] [--out results/rnn_vs_attention]
    # 2. one-token decoding: time and memory per token against the position (a quiet machine)
    OMP_NUM_THREADS=2 python benchmarks/rnn_vs_attention.py decode [--positions 256 ... 8192]
    # 3. recall accuracy as the distance grows (accuracy only: any machine, one process)
    OMP_NUM_THREADS=1 python benchmarks/rnn_vs_attention.py recall [--distances 16 64 256]
        [--train 4000] [--epochs 10] [--pooling last]

``speed``: one layer of each at the same width ``dim`` (LSTM and GRU: hidden ``dim``,
unidirectional; self-attention: ``MultiHeadAttention`` causal, exact (SDPA) or
``kernel="linear"``), a causal model of ``batch`` random sequences, ``sum(out)`` backwards.
Rows ``{model, n, time_s, tokens_per_s, peak_bytes}``; an LSTM / GRU's cost is linear in ``n``
but sequential, attention's is parallel and quadratic (exact) or linear (linear).

``decode``: the cost of the token at position ``p``: an LSTM step from its state ``(h, c)``,
linear attention's recurrent step from its ``RecurrentCache`` ``(S, z)``, softmax attention's
step against a ``KVCache`` of ``p`` keys and values. Rows ``{model, p, time_s, peak_bytes,
state_bytes}``: the first two stay flat, the KV cache grows with ``p``.

``recall``: ``attnlab train recall --task_options.distance=D`` for an LSTM, a GRU
(unidirectional), the Transformer and the Transformer with linear attention (the same width 64
and budget); test accuracy per distance. ``--pooling`` is every model's readout: ``attention``
(the task's default, a learned query over all positions) or ``last`` (the query's own position,
the last token: where a forward RNN has read everything).

Each part writes ``OUT/<part>.json`` (recall: appended to ``OUT/recall_runs.json`` as runs
finish, each with its train command; a run already there is skipped if its command is this
one's, and stops the part, naming the differences, if not; the table and plot hold only the
runs made with this command's options and list the others), ``OUT/<part>.md`` and
``docs/rnn_vs_attention_<part>.png``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stored import NOT_RECORDED, differences, keep_matching, left_out_note, refuse  # noqa: E402

from attnlab import KVCache, MultiHeadAttention, RecurrentCache, masks
from attnlab.lab.bench import time_call
from attnlab.lab.bench.measure import peak_tensor_bytes

LENGTHS = [256, 512, 1024, 2048, 4096, 8192]
MODELS = ("lstm", "gru", "softmax", "linear")


def layer(name: str, dim: int, heads: int) -> nn.Module:
    if name in ("lstm", "gru"):
        return {"lstm": nn.LSTM, "gru": nn.GRU}[name](dim, dim, batch_first=True)
    return MultiHeadAttention(dim, heads, kernel="linear" if name == "linear" else None)


def forward(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    if isinstance(module, nn.RNNBase):
        return module(x)[0]
    return module(x, mask=masks.causal()).out


# ---------------------------------------------------------------------------------- speed
def bench_speed(lengths, *, dim: int, heads: int, batch: int, repeats: int) -> list[dict]:
    rows = []
    for n in lengths:
        x = torch.randn(batch, n, dim)
        for name in MODELS:
            torch.manual_seed(0)
            module = layer(name, dim, heads)

            def step(module=module) -> None:
                module.zero_grad(set_to_none=True)
                forward(module, x).sum().backward()

            t = time_call(step, repeats=repeats)
            peak, _ = peak_tensor_bytes(step)
            rows.append({"model": name, "n": n, "time_s": t, "tokens_per_s": batch * n / t,
                         "peak_bytes": peak})  # fmt: skip
            print(rows[-1], flush=True)
    return rows


# ---------------------------------------------------------------------------------- decode
def _state_bytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


@torch.no_grad()
def bench_decode(positions, *, dim: int, heads: int, batch: int, repeats: int) -> list[dict]:
    rows = []
    for p in positions:
        gen = torch.Generator().manual_seed(p)
        prefix = torch.randn(batch, p, dim, generator=gen)
        x_t = torch.randn(batch, 1, dim, generator=gen)
        for name in MODELS:
            torch.manual_seed(0)
            module = layer(name, dim, heads).eval()
            if name in ("lstm", "gru"):
                _, state = module(prefix)

                def step(module=module, state=state):
                    return module(x_t, state)[0]

                size = _state_bytes(*(state if isinstance(state, tuple) else (state,)))
            elif name == "linear":
                filled = RecurrentCache()
                module(prefix, mask=masks.causal(), cache=filled)  # p recurrent steps

                def step(module=module, c=filled):  # a fresh cache object: the same state
                    cache = RecurrentCache(s=c.s, z=c.z, length=c.length)
                    return module(x_t, mask=masks.causal(), cache=cache).out

                size = _state_bytes(filled.s, filled.z)
            else:
                filled = KVCache()
                module(prefix, mask=masks.causal(), cache=filled)

                def step(module=module, c=filled):  # appends to a copy of the p cached keys
                    cache = KVCache(k=c.k, v=c.v)
                    return module(x_t, mask=masks.causal(), cache=cache).out

                size = _state_bytes(filled.k, filled.v)
            t = time_call(step, repeats=repeats)
            peak, _ = peak_tensor_bytes(step)
            rows.append({"model": name, "p": p, "time_s": t, "peak_bytes": peak,
                         "state_bytes": size})  # fmt: skip
            print(rows[-1], flush=True)
    return rows


# ---------------------------------------------------------------------------------- recall
RECALL_MODELS: dict[str, list[str]] = {
    "lstm": ["--model.encoder.kind=rnn", "--model.encoder.cell=lstm",
             "--model.encoder.bidirectional=false", "--model.encoder.hidden=64"],
    "gru": ["--model.encoder.kind=rnn", "--model.encoder.cell=gru",
            "--model.encoder.bidirectional=false", "--model.encoder.hidden=64"],
    "softmax": [],
    "linear": ["--model.encoder.attention.kernel=linear"],
}  # fmt: skip


def recall_command(args: argparse.Namespace, name: str, d: int) -> list[str]:
    """The ``attnlab train`` options of model ``name``'s recall run at distance ``d``."""
    return [
        "-m", "attnlab", "train", "recall",
        f"--task_options.distance={d}", f"--task_options.train={args.train}",
        f"--train.epochs={args.epochs}", "--train.log_every=0", f"--train.seed={args.seed}",
        f"--model.head.pooling={args.pooling}", *RECALL_MODELS[name],
    ]  # fmt: skip


def run_recall(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The recall runs of this command (trained, or read back if made with the same command),
    and the note naming the runs of ``recall_runs.json`` made with other options."""
    path = args.out / "recall_runs.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    for d in args.distances:
        for name in args.models:
            key = f"{name}@{d}" + ("" if args.pooling == "attention" else f"-{args.pooling}")
            command = recall_command(args, name, d)
            if key in results:
                changes = differences({"command": results[key].get("command")},
                                      {"command": command})  # fmt: skip
                if changes:
                    refuse(f"{path}: {key}", changes, "give this run its own --out")
                continue
            run = args.out / "recall_runs" / key
            done = subprocess.run([sys.executable, *command, f"--out_dir={run}", "--overwrite"],
                                  capture_output=True, text=True)  # fmt: skip
            if done.returncode != 0:
                results[key] = {"error": done.stderr.strip().splitlines()[-1]}
            else:
                metrics = json.loads((run / "metrics.json").read_text())
                results[key] = {"accuracy": metrics["test"]["accuracy"]}
            results[key].update(model=name, distance=d, pooling=args.pooling, command=command)
            path.write_text(json.dumps(results, indent=1))
            print(key, results[key]["accuracy" if "accuracy" in results[key] else "error"],
                  flush=True)  # fmt: skip

    def changes(key: str) -> list[str]:
        r = results[key]
        if r.get("model") not in RECALL_MODELS or "distance" not in r:
            return [f"how it was made is {NOT_RECORDED}"]
        wanted = recall_command(args, r["model"], r["distance"])
        return differences({"command": r.get("command")}, {"command": wanted})

    kept, notes = keep_matching(results, changes, str)
    return {k: results[k] for k in kept}, left_out_note(notes, path)


# ---------------------------------------------------------------------------------- output
def plot(rows: list[dict], x: str, y: str, out: Path, *, title: str, logy: bool = True) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(r["model"] for r in rows):
        pts = sorted((r[x], r[y]) for r in rows if r["model"] == name and y in r)
        ax.plot(*zip(*pts), marker="o", label=name)
    ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def table(rows: list[dict], cols: list[str]) -> str:
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    fmt = {"time_s": "{:.3g}", "tokens_per_s": "{:.3g}", "accuracy": "{:.1%}"}
    body = [
        "| " + " | ".join(fmt.get(c, "{}").format(r.get(c, "")) for c in cols) + " |" for r in rows
    ]
    return head + "\n".join(body) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=["speed", "decode", "recall"])
    p.add_argument("--lengths", type=int, nargs="+", default=LENGTHS)
    p.add_argument("--positions", type=int, nargs="+", default=LENGTHS)
    p.add_argument("--distances", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--train", type=int, default=4000)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pooling", default="attention", help="recall: every model's readout")
    p.add_argument("--out", type=Path, default=Path("results/rnn_vs_attention"))
    p.add_argument("--docs", type=Path, default=Path("docs"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = dict(dim=args.dim, heads=args.heads, batch=args.batch, repeats=args.repeats)
    note = ""  # recall: the runs of recall_runs.json left out (another command's)
    if args.part == "speed":
        rows = bench_speed(args.lengths, **sizes)
        cols, x, y = ["model", "n", "time_s", "tokens_per_s", "peak_bytes"], "n", "time_s"
        title = f"fwd+bwd of one layer, width {args.dim}, batch {args.batch}"
    elif args.part == "decode":
        rows = bench_decode(args.positions, **sizes)
        cols, x, y = ["model", "p", "time_s", "peak_bytes", "state_bytes"], "p", "time_s"
        title = f"one decoding step at position p, width {args.dim}, batch {args.batch}"
    else:
        runs, note = run_recall(args)
        rows = [r for r in runs.values() if "accuracy" in r]
        cols, x, y = ["model", "distance", "accuracy"], "distance", "accuracy"
        title = (
            f"recall: test accuracy against distance ({args.train} examples, {args.epochs} "
            f"epochs, {args.pooling} pooling)"
        )
    (args.out / f"{args.part}.json").write_text(json.dumps(rows, indent=1))
    if note:
        print(note)
    (args.out / f"{args.part}.md").write_text(table(rows, cols) + (f"\n{note}\n" if note else ""))
    plot(rows, x, y, args.docs / f"rnn_vs_attention_{args.part}.png", title=title,
         logy=args.part != "recall")  # fmt: skip
    if args.part != "recall":
        plot(rows, x, "peak_bytes", args.docs / f"rnn_vs_attention_{args.part}_memory.png",
             title=title + ": peak tensor bytes")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
