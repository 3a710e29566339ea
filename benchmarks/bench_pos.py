"""Part-of-speech tagging: the lab's models side by side, and the tagger's training throughput.

Usage:
  python benchmarks/bench_pos.py table   [--corpus brown] [--sentences 8000] [--epochs 2]
  python benchmarks/bench_pos.py speed   [--steps 30] [--quick]
  python benchmarks/bench_pos.py full    --corpus brown --epochs 5 [--bf16] [--compile]

``table``: every model under the same budget (train sentences, epochs, batch, lr): test
accuracy and training tokens/s (FC over a context of k = 1, 3, 5; BiLSTM; CNN; self-attention
with 1 / 4 / 8 heads, without positions, additive scores, ReLU normalisation).
``speed``: training steps (forward, backward, AdamW) of the self-attention tagger and of the
same model built from ``nn.TransformerEncoder`` (same width, depth, heads, feed-forward,
pre-norm, sinusoidal positions, same inputs and head), each in fp32 eager, bf16 eager and bf16
(and the tagger also fp32) under ``torch.compile`` (as ``--train.compile=true`` runs it:
dynamic shapes, batches padded to multiples of 8), taking turns on the same batches in one process. Tokens/s counts real tokens
(padding excluded); the two targets of issue 9 are printed: the tagger's bf16 compiled
throughput over its fp32 eager one (>= 1.5x) and over the ``nn.TransformerEncoder`` tagger's
(>= 1.2x; against its bf16 eager and its bf16 compiled throughput). ``--quick``: a tiny model and
a few steps, to check the script runs (timings meaningless).
``full``: one full-size run of the default tagger.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, train_jobs

from attnlab.lab.models import ENCODERS
from attnlab.lab.report.jobs import Job
from attnlab.lab.models.encoders import SequenceEncoder
from attnlab.positional import Sinusoidal
from attnlab.lab.tasks import TASKS
from attnlab.lab.train import resolve_config
from attnlab.lab.train.compile import DEFAULT_PAD_MULTIPLE, compile_model, pad_batch, unwrap


@ENCODERS.register("torch-transformer")
class TorchTransformerEncoder(SequenceEncoder):
    """``nn.TransformerEncoder`` (pre-norm, GELU) behind the lab's encoder interface."""

    def __init__(self, dim: int, *, depth: int = 2, dropout: float = 0.1, heads: int = 4,
                 ff_hidden: int = 256) -> None:  # fmt: skip
        super().__init__()
        self.dim = self.out_dim = dim
        self.positional = Sinusoidal(dim)
        layer = nn.TransformerEncoderLayer(dim, heads, ff_hidden, dropout, activation="gelu",
                                           batch_first=True, norm_first=True)  # fmt: skip
        self.encoder = nn.TransformerEncoder(layer, depth, norm=nn.LayerNorm(dim),
                                             enable_nested_tensor=False)  # fmt: skip

    def encode(self, x, lengths, *, need_weights):
        pad = torch.arange(x.shape[1]) >= lengths[:, None]  # torch: True = ignore
        return self.encoder(self.positional(x), src_key_padding_mask=pad), None


BUDGET = [
    "--train.batch_size=64",
    "--train.lr=3e-3",
    "--train.warmup_fraction=0.05",
    "--train.precision=bf16",
]
TABLE = {
    "FC k=1": ["--model.encoder.kind=fc", "--model.encoder.context=1"],
    "FC k=3": ["--model.encoder.kind=fc", "--model.encoder.context=3"],
    "FC k=5": ["--model.encoder.kind=fc", "--model.encoder.context=5"],
    "BiLSTM": ["--model.encoder.kind=rnn"],
    "CNN": ["--model.encoder.kind=cnn"],
    "self-attention, 4 heads": [],
    "self-attention, 1 head": ["--model.encoder.heads=1"],
    "self-attention, 8 heads": ["--model.encoder.heads=8"],
    "self-attention, no positions": ["--model.encoder.positional=none"],
    "self-attention, dot (unscaled)": ["--model.encoder.attention.score=dot"],
    "self-attention, additive": ["--model.encoder.attention.score=additive"],
    "self-attention, relu": ["--model.encoder.attention.normalize=relu"],
    "self-attention, fp32 (no autocast)": ["--train.precision=fp32"],
}


def train(name: str, overrides: list[str], out: Path) -> dict:
    """One tagger, run as a job of ``attnlab report`` (``run_jobs``, into ``out/jobs/KEY``: a
    finished job is read back, not re-run; the report's claims 1, 2, 4, 5 and 6 run the same
    models)."""
    (res,) = train_jobs([Job("pos", tuple(overrides), 0, name)], out)
    if isinstance(res, str):
        raise SystemExit(f"{name}: {res}")
    m = res.metrics
    row = dict(model=name, test_accuracy=m["test"]["accuracy"],
               oov_accuracy=m["test"]["oov_accuracy"], dev_accuracy=m["best_score"],
               tokens_per_s=m["units_per_s"], parameters=m["parameters"],
               train_time_s=m["train_time_s"], out_dir=str(out / "jobs" / res.key))  # fmt: skip
    print(
        f"  {name:<32} test {row['test_accuracy']:.2%}  oov {row['oov_accuracy']:.2%}  "
        f"{row['tokens_per_s']:8.0f} tok/s  {row['parameters'] / 1e3:.0f}k params",
        flush=True,
    )
    return row


def table(args) -> dict:
    budget = [*BUDGET, f"--task_options.corpus={args.corpus}",
              f"--task_options.max_train_sentences={args.sentences}", f"--train.epochs={args.epochs}"]  # fmt: skip
    names = args.only or list(TABLE)
    return {
        "budget": budget,
        "rows": [train(n, [*budget, *TABLE[n]], Path(args.out)) for n in names],
    }


#: name -> (encoder, bf16, compiled); they take turns on every batch
VARIANTS = {
    "attnlab fp32 eager": ("attnlab", False, False),
    "attnlab bf16 eager": ("attnlab", True, False),
    "attnlab bf16 compiled": ("attnlab", True, True),
    "attnlab fp32 compiled": ("attnlab", False, True),
    "torch fp32 eager": ("torch", False, False),
    "torch bf16 eager": ("torch", True, False),
    "torch bf16 compiled": ("torch", True, True),
}
ENCODER_OVERRIDES = {
    "attnlab": ["--model.encoder.positional=sinusoidal"],
    "torch": ["--model.encoder.kind=torch-transformer"],
}
QUICK = ["--model.input.dim=32", "--model.input.char_dim=8", "--model.encoder.depth=1"]


def speed(args) -> dict:
    """Every variant trains on the same batches, in turns; a first pass over the batches warms
    up (compiles), the second is timed; median tokens/s per variant."""
    from torch._dynamo.utils import counters

    # The compiled variants share the model's forward (one code object): Dynamo's per-frame
    # recompile limit (8) counts all of their graphs (fp32 and bf16, every padded shape), and
    # past it that frame silently runs eagerly. Room for all of them:
    torch._dynamo.config.recompile_limit = 64
    sentences, batch_size = (300, 16) if args.quick else (4000, 64)
    size = QUICK if args.quick else []
    task, models, opts = None, {}, {}
    for name, (encoder, _, compiled) in VARIANTS.items():
        over = [
            f"--task_options.max_train_sentences={sentences}",
            *size,
            *ENCODER_OVERRIDES[encoder],
        ]
        cfg = resolve_config(task="pos", overrides=over)
        if task is None:
            task = TASKS.get("pos")()
            task.setup(cfg.task_options)
        torch.manual_seed(0)
        model = task.build_model(cfg.model)  # per encoder: the same initial weights
        opts[name] = torch.optim.AdamW(model.parameters(), lr=1e-3)
        models[name] = compile_model(model) if compiled else model
    encoders = [unwrap(models[f"{e} fp32 eager"]).encoder for e in ("attnlab", "torch")]
    sizes = [sum(p.numel() for p in encoder.parameters()) for encoder in encoders]
    assert sizes[0] == sizes[1], f"encoders differ in size: {sizes}"
    train_set = task.splits()["train"]
    batches = [
        task.collate(train_set[i : i + batch_size])
        for i in range(0, batch_size * args.steps, batch_size)
    ]
    padded = [pad_batch(b, DEFAULT_PAD_MULTIPLE) for b in batches]  # what train.compile feeds
    tokens = sum(int(b["lengths"].sum()) for b in batches)

    def step(name: str, k: int) -> None:
        _, bf16, compiled = VARIANTS[name]
        batch = (padded if compiled else batches)[k]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss, units = task.loss(models[name], batch)
        (loss / units).backward()
        opts[name].step()
        opts[name].zero_grad()

    t0 = time.perf_counter()
    failed = {}
    for k in range(len(batches)):  # warm-up: every padded shape compiles here
        for name in list(models):
            try:
                step(name, k)
            except Exception as err:  # noqa: BLE001 - a variant torch cannot compile is reported
                if not VARIANTS[name][2]:
                    raise
                failed[name] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
                print(f"  {name}: torch.compile failed, left out: {failed[name]}", flush=True)
                del models[name]
    print(f"  warm-up (compilation included): {time.perf_counter() - t0:.0f} s", flush=True)
    graphs = counters["stats"]["unique_graphs"]
    times: dict[str, list[float]] = {name: [] for name in models}
    for k in range(len(batches)):
        for name in models:
            t = time.perf_counter()
            step(name, k)
            times[name].append(time.perf_counter() - t)
    recompiles = counters["stats"]["unique_graphs"] - graphs
    per_step = tokens / len(batches)
    tps = {name: per_step / statistics.median(v) for name, v in times.items()}
    for name, rate in tps.items():
        print(f"  {name:<24} {rate:9.0f} tok/s", flush=True)
    best = tps["attnlab bf16 compiled"]
    nan = float("nan")
    ratios = {
        "bf16_compiled_over_fp32_eager": best / tps["attnlab fp32 eager"],
        "bf16_compiled_over_torch_bf16_eager": best / tps["torch bf16 eager"],
        "bf16_compiled_over_torch_bf16_compiled": best / tps.get("torch bf16 compiled", nan),
        "bf16_eager_over_fp32_eager": tps["attnlab bf16 eager"] / tps["attnlab fp32 eager"],
        "attnlab_over_torch_bf16_eager": tps["attnlab bf16 eager"] / tps["torch bf16 eager"],
        # what compile alone gives, where bf16 has no instructions (AVX2 CPUs)
        "fp32_compiled_over_fp32_eager": tps.get("attnlab fp32 compiled", nan)
        / tps["attnlab fp32 eager"],
        "fp32_compiled_over_torch_fp32_eager": tps.get("attnlab fp32 compiled", nan)
        / tps["torch fp32 eager"],
    }
    r = {k: f"x{v:.2f}" for k, v in ratios.items()}
    print(
        f"  target 1, tagger bf16 compiled / fp32 eager: {r['bf16_compiled_over_fp32_eager']} "
        "(>= 1.5)\n"
        "  target 2, tagger bf16 compiled / nn.TransformerEncoder tagger bf16: "
        f"{r['bf16_compiled_over_torch_bf16_eager']} (eager), "
        f"{r['bf16_compiled_over_torch_bf16_compiled']} (compiled) (>= 1.2)\n"
        f"  compile alone, tagger fp32 compiled / fp32 eager: {r['fp32_compiled_over_fp32_eager']}"
        f", / nn.TransformerEncoder tagger fp32: {r['fp32_compiled_over_torch_fp32_eager']}\n"
        f"  graphs compiled while timing: {recompiles} (0: no recompiles after warm-up)",
        flush=True,
    )
    return {
        "sentences": sentences, "batch_size": batch_size, "steps": len(batches),
        "tokens_per_step": per_step, "pad_multiple_compiled": DEFAULT_PAD_MULTIPLE,
        "quick": args.quick, "tokens_per_s": tps, "ratios": ratios,
        "graphs_compiled_while_timing": recompiles, "compile_failed": failed,
    }  # fmt: skip


def full(args) -> dict:
    over = [f"--task_options.corpus={args.corpus}", f"--train.epochs={args.epochs}",
            "--train.batch_size=32", "--train.lr=2e-3", "--train.warmup_fraction=0.05",
            f"--train.precision={'bf16' if args.bf16 else 'fp32'}",
            f"--train.compile={'true' if args.compile else 'false'}", *args.extra]  # fmt: skip
    name = f"{args.corpus} {'bf16' if args.bf16 else 'fp32'}{' compiled' if args.compile else ''}"
    return train(name, over, Path(args.out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("what", choices=["table", "speed", "full"])
    ap.add_argument("--corpus", default="brown")
    ap.add_argument("--sentences", type=int, default=8000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--compile", action="store_true", help="full: --train.compile=true")
    ap.add_argument("--quick", action="store_true", help="speed: a tiny smoke run")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--extra", nargs="*", default=[], help="more --a.b=value overrides")
    ap.add_argument("--out", default="runs/bench_pos")
    args = ap.parse_args()
    print(f"machine: {machine()}", flush=True)
    result = {"table": table, "speed": speed, "full": full}[args.what](args)
    quick = "_quick" if args.quick and args.what == "speed" else ""
    path = Path("results") / f"bench_pos_{args.what}_{args.corpus}{quick}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
