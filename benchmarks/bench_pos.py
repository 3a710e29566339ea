"""Part-of-speech tagging: the lab's models side by side, and the tagger's training throughput.

Usage:
  python benchmarks/bench_pos.py table   [--corpus brown] [--sentences 8000] [--epochs 2]
  python benchmarks/bench_pos.py speed   [--steps 30]
  python benchmarks/bench_pos.py full    --corpus brown --epochs 5 [--bf16]

``table``: every model under the same budget (train sentences, epochs, batch, lr): test
accuracy and training tokens/s (FC over a context of k = 1, 3, 5; BiLSTM; CNN; self-attention
with 1 / 4 / 8 heads, without positions, additive scores, ReLU normalisation).
``speed``: training steps of the self-attention tagger against the same model built from
``nn.TransformerEncoder`` (same width, depth, heads, feed-forward, pre-norm, sinusoidal
positions, same inputs and head), alternating on the same batches in one process, fp32 and bf16.
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
from common import machine

from attnlab.models import ENCODERS
from attnlab.models.encoders import SequenceEncoder
from attnlab.positional import Sinusoidal
from attnlab.tasks import TASKS
from attnlab.train import Trainer, resolve_config


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
    "--train.bf16=true",
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
    "self-attention, fp32 (no autocast)": ["--train.bf16=false"],
}


def train(name: str, overrides: list[str], out: Path) -> dict:
    cfg = resolve_config(task="pos", overrides=overrides)
    cfg.out_dir = str(out / name.replace(" ", "_").replace(",", "").replace("=", ""))
    trainer = Trainer("pos", cfg)
    try:
        res = trainer.fit()
    finally:
        trainer.close()
    row = dict(model=name, test_accuracy=res.test["accuracy"], oov_accuracy=res.test["oov_accuracy"],
               dev_accuracy=res.best_score, tokens_per_s=res.units_per_s, parameters=res.parameters,
               train_time_s=res.train_time_s, out_dir=cfg.out_dir)  # fmt: skip
    print(
        f"  {name:<32} test {row['test_accuracy']:.2%}  oov {row['oov_accuracy']:.2%}  "
        f"{row['tokens_per_s']:8.0f} tok/s  {res.parameters / 1e3:.0f}k params",
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


def speed(args) -> dict:
    """Alternate training steps of both models on the same batches; median tokens/s."""
    results = {}
    for bf16 in (False, True):
        models, tasks = {}, {}
        for kind, over in (("attnlab", ["--model.encoder.positional=sinusoidal"]),
                           ("torch", ["--model.encoder.kind=torch-transformer"])):  # fmt: skip
            cfg = resolve_config(
                task="pos", overrides=["--task_options.max_train_sentences=4000", *over]
            )
            task = TASKS.get("pos")()
            task.setup(cfg.task_options)
            torch.manual_seed(0)
            models[kind], tasks[kind] = task.build_model(cfg.model), task
        assert sum(p.numel() for p in models["attnlab"].encoder.parameters()) == sum(
            p.numel() for p in models["torch"].encoder.parameters()
        ), "encoders differ in size"
        train_set = tasks["attnlab"].splits()["train"]
        batches = [
            tasks["attnlab"].collate(train_set[i : i + 64]) for i in range(0, 64 * args.steps, 64)
        ]
        opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-3) for k, m in models.items()}
        times: dict[str, list[float]] = {k: [] for k in models}
        tokens = 0
        for step, batch in enumerate(batches):
            for kind, model in models.items():
                t = time.perf_counter()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    loss, units = tasks[kind].loss(model, batch)
                (loss / units).backward()
                opts[kind].step()
                opts[kind].zero_grad()
                if step >= 3:
                    times[kind].append(time.perf_counter() - t)
            tokens += int(batch["lengths"].sum()) if step >= 3 else 0
        per_step = tokens / (len(batches) - 3)
        tps = {k: per_step / statistics.median(v) for k, v in times.items()}
        key = "bf16" if bf16 else "fp32"
        results[key] = {
            **{f"{k}_tokens_per_s": v for k, v in tps.items()},
            "ratio": tps["attnlab"] / tps["torch"],
        }
        print(
            f"  {key}: attnlab {tps['attnlab']:.0f} tok/s, nn.TransformerEncoder {tps['torch']:.0f} tok/s, "
            f"ratio {tps['attnlab'] / tps['torch']:.2f}",
            flush=True,
        )
    results["bf16_speedup_attnlab"] = (
        results["bf16"]["attnlab_tokens_per_s"] / results["fp32"]["attnlab_tokens_per_s"]
    )
    print(f"  bf16 / fp32 (attnlab tagger): x{results['bf16_speedup_attnlab']:.2f}")
    return results


def full(args) -> dict:
    over = [f"--task_options.corpus={args.corpus}", f"--train.epochs={args.epochs}",
            "--train.batch_size=32", "--train.lr=2e-3", "--train.warmup_fraction=0.05",
            f"--train.bf16={'true' if args.bf16 else 'false'}", *args.extra]  # fmt: skip
    return train(f"{args.corpus} {'bf16' if args.bf16 else 'fp32'}", over, Path(args.out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("what", choices=["table", "speed", "full"])
    ap.add_argument("--corpus", default="brown")
    ap.add_argument("--sentences", type=int, default=8000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--extra", nargs="*", default=[], help="more --a.b=value overrides")
    ap.add_argument("--out", default="runs/bench_pos")
    args = ap.parse_args()
    print(f"machine: {machine()}", flush=True)
    result = {"table": table, "speed": speed, "full": full}[args.what](args)
    path = Path("results") / f"bench_pos_{args.what}_{args.corpus}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
