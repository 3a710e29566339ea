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
        [--models lstm gru softmax linear bilstm] [--train 4000] [--epochs 10] [--pooling last]

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
and budget), and on request claim 11's 2-layer BiLSTM (``bilstm``); test accuracy per distance.
``--pooling`` is every model's readout: ``attention`` (the task's default, a learned query over
all positions) or ``last`` (the query's own position, the last token: where a forward RNN has
read everything). Each run is a job of ``attnlab report``, run by ``run_jobs``
(:mod:`attnlab.lab.report.run`) into ``OUT/jobs/KEY/`` (its log ``OUT/jobs/KEY.log``), KEY a
hash of its resolved configuration: a finished run is read back, not trained again, an
interrupted one resumes, and a changed option is another run. The report's claim 11
(self-attention against the BiLSTM) is ``--models softmax bilstm --distances 16 --pooling
last`` at its budget's sizes: at the quick budget's (``--train 20000 --epochs 1``) these are the
report's jobs of seed ``--seed``, read back when ``--out`` is the report's directory.

Each part writes ``OUT/<part>.json`` (recall: this command's runs, each with its job key and
train command; a run that failed is named under the table), ``OUT/<part>.md`` and
``docs/rnn_vs_attention_<part>.png``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import train_jobs  # noqa: E402

from attnlab import KVCache, MultiHeadAttention, RecurrentCache, masks
from attnlab.lab.bench import time_call
from attnlab.lab.bench.measure import peak_tensor_bytes
from attnlab.lab.report.claims import ForgettingRNN
from attnlab.lab.report.jobs import Job

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
_UNIDIRECTIONAL = ("--model.encoder.bidirectional=false", "--model.encoder.hidden=64")
#: each model's options; "softmax" and "bilstm" are the two of the report's claim 11
RECALL_MODELS: dict[str, tuple[str, ...]] = {
    "lstm": (*ForgettingRNN.RNN, "--model.encoder.cell=lstm", *_UNIDIRECTIONAL),
    "gru": (*ForgettingRNN.RNN, "--model.encoder.cell=gru", *_UNIDIRECTIONAL),
    "softmax": ForgettingRNN.ATTENTION,
    "linear": (*ForgettingRNN.ATTENTION, "--model.encoder.attention.kernel=linear"),
    "bilstm": ForgettingRNN.RNN,
}


def recall_job(args: argparse.Namespace, name: str, d: int) -> Job:
    """Model ``name``'s recall run at distance ``d``: ``attnlab train recall OPTIONS``."""
    options = (
        f"--task_options.distance={d}", f"--task_options.train={args.train}",
        f"--train.epochs={args.epochs}", "--train.log_every=0",
        f"--model.head.pooling={args.pooling}", *RECALL_MODELS[name],
    )  # fmt: skip
    label = f"{name}@{d}" + ("" if args.pooling == "attention" else f"-{args.pooling}")
    return Job("recall", options, args.seed, label)


def run_recall(args: argparse.Namespace) -> tuple[list[dict], str]:
    """The rows of this command's recall runs (each trained where it has not finished in
    ``OUT/jobs``, read back where it has), and a note naming the runs that failed."""
    runs = [(name, d) for d in args.distances for name in args.models]
    jobs = [recall_job(args, name, d) for name, d in runs]
    rows, failed = [], []
    for (name, d), job, result in zip(runs, jobs, train_jobs(jobs, args.out)):
        if isinstance(result, str):
            failed.append(f"  - {job.label}: {result}")
            print(job.label, result, flush=True)
            continue
        rows.append({"model": name, "distance": d, "pooling": args.pooling,
                     "accuracy": result.metrics["test"]["accuracy"], "dev": result.dev,
                     "job": job.key, "command": job.command()})  # fmt: skip
        print(job.label, rows[-1]["accuracy"], flush=True)
    note = (
        "\n".join([f"Failed: {len(failed)} run(s), not in the table:", *failed]) if failed else ""
    )
    return rows, note


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
    if rows:  # (a recall part whose every run failed has none)
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
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(RECALL_MODELS),
                   help="recall: the models to train")  # fmt: skip
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
    note = ""  # recall: the runs that failed
    if args.part == "speed":
        rows = bench_speed(args.lengths, **sizes)
        cols, x, y = ["model", "n", "time_s", "tokens_per_s", "peak_bytes"], "n", "time_s"
        title = f"fwd+bwd of one layer, width {args.dim}, batch {args.batch}"
    elif args.part == "decode":
        rows = bench_decode(args.positions, **sizes)
        cols, x, y = ["model", "p", "time_s", "peak_bytes", "state_bytes"], "p", "time_s"
        title = f"one decoding step at position p, width {args.dim}, batch {args.batch}"
    else:
        rows, note = run_recall(args)
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
