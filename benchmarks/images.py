"""Images: data efficiency of cnn / patches (ViT) / hybrid on Fashion-MNIST, and their speed.

Usage:
    # accuracy against training-set size (one `attnlab train fashion` run per point, resumable:
    # a run whose metrics.json exists is read, not retrained)
    python benchmarks/images.py --runs /tmp/images/runs --sizes 1000 5000 20000 0 \
        --encoders cnn patches hybrid --seeds 0 --steps 600 --out results/images.jsonl
    # any other --a.b=value option goes to every run (its directory is named after it; give
    # such a sweep its own --out)
    python benchmarks/images.py --runs /tmp/images/rel --encoders hybrid --sizes 0 \
        --model.encoder.positional=relative2d --out results/images_rel.jsonl
    # the plot from the jsonl (test accuracy vs train size, log x, error bars = std over seeds)
    python benchmarks/images.py --plot docs/images_data_efficiency.png --out results/images.jsonl
    # its markdown table (mean +- std over seeds, seeds in brackets)
    python benchmarks/images.py --table --out results/images.jsonl
    # speed: images/s, training step and inference, every encoder, same batch, one process
    python benchmarks/images.py --speed [--batch 128] [--quick]

Budget rule of the accuracy runs (the same for every encoder and size): ``--steps`` AdamW
optimizer steps of batch 128 (lr 1e-3, weight decay 0.05, 5% warm-up, cosine decay), random
crop (+-2 px) and horizontal flips, dev evaluation every half of the run, the best dev
checkpoint tested on the 10,000 test images. Size 0 is the whole train split (60,000 less the
fixed 5,000-image validation split = 55,000). Subsets are nested and class-balanced
(``--task_options.train_size``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

from attnlab.bench import time_call  # noqa: E402

ENCODERS = ["cnn", "patches", "hybrid", "pixels"]


def train_command(
    run_dir: Path, encoder: str, size: int, seed: int, steps: int, extra: Sequence[str] = ()
) -> list[str]:
    """The ``attnlab train fashion`` command of one point; ``extra`` options go last."""
    return [
        sys.executable, "-m", "attnlab", "train", "fashion", f"--out_dir={run_dir}",
        f"--model.encoder.kind={encoder}", f"--train.max_steps={steps}", "--train.epochs=1000",
        "--train.batch_size=128", "--train.lr=1e-3", f"--train.eval_every={max(steps // 2, 1)}",
        f"--train.seed={seed}", f"--task_options.train_size={size}", *extra,
    ]  # fmt: skip


def _slug(extra: Sequence[str]) -> str:
    """A run-directory suffix naming the extra options (so a variant never reuses a plain
    run's directory): ``--model.encoder.positional=relative2d`` -> ``-positional=relative2d``."""
    parts = []
    for option in extra:
        key, eq, value = option.lstrip("-").partition("=")
        parts.append(f"-{key.rsplit('.', 1)[-1]}{eq}{value.replace('/', '_')}")
    return "".join(parts)


def run_sweep(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for size in args.sizes:
        for encoder in args.encoders:
            for seed in args.seeds:
                run_dir = Path(args.runs) / f"{encoder}-n{size}-s{seed}{_slug(args.extra)}"
                metrics = run_dir / "metrics.json"
                cmd = train_command(run_dir, encoder, size, seed, args.steps, args.extra)
                if not metrics.is_file():
                    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
                    subprocess.run([*cmd, "--overwrite"], check=True, env=env)
                m = json.loads(metrics.read_text())
                row = {"encoder": encoder, "train_size": size or 55000, "seed": seed,
                       "steps": m["steps"], "test_accuracy": m["test"]["accuracy"],
                       "dev_accuracy": m["best_dev"]["accuracy"], "parameters": m["parameters"],
                       "train_minutes": round(m["train_time_s"] / 60, 1),
                       "command": " ".join(cmd[1:])}  # fmt: skip
                with out.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)


def _latest(out: str) -> dict[tuple[str, int, int], dict]:
    """The rows of ``out`` by (encoder, train size, seed); a later line replaces an earlier."""
    rows = [json.loads(line) for line in Path(out).read_text().splitlines() if line]
    return {(r["encoder"], r["train_size"], r["seed"]): r for r in rows}


def _accuracies(latest: dict, encoder: str, size: int) -> list[float]:
    """Test accuracies (%) of ``encoder`` at ``size``, one per seed."""
    return [r["test_accuracy"] * 100 for k, r in latest.items() if k[:2] == (encoder, size)]


def table(args: argparse.Namespace) -> None:
    """Print the markdown table: test accuracy mean +- std over seeds (and how many), per
    encoder and training-set size."""
    latest = _latest(args.out)
    sizes = sorted({k[1] for k in latest})
    print("| encoder | parameters | " + " | ".join(f"{n:,}" for n in sizes) + " |")
    print("|---|---:|" + "---:|" * len(sizes))
    for encoder in sorted({k[0] for k in latest}):
        cells = []
        for n in sizes:
            accs = _accuracies(latest, encoder, n)
            sd = f" ± {statistics.stdev(accs):.1f}" if len(accs) > 1 else ""
            cells.append(f"{statistics.mean(accs):.1f}{sd} ({len(accs)})" if accs else "-")
        params = next(r["parameters"] for k, r in latest.items() if k[0] == encoder)
        print(f"| {encoder} | {params:,} | " + " | ".join(cells) + " |")


def plot(args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    latest = _latest(args.out)
    fig = Figure(figsize=(4.2, 3.0))
    ax = fig.add_subplot(1, 1, 1)
    for encoder in sorted({k[0] for k in latest}):
        sizes = sorted({k[1] for k in latest if k[0] == encoder})
        accs = [_accuracies(latest, encoder, n) for n in sizes]
        mean = [statistics.mean(a) for a in accs]
        err = [statistics.stdev(a) if len(a) > 1 else 0.0 for a in accs]
        ax.errorbar(sizes, mean, yerr=err, marker="o", capsize=3, label=encoder)
    ax.set_xscale("log")
    ax.set_xlabel("training images")
    ax.set_ylabel("test accuracy (%)")
    steps = sorted({r["steps"] for r in latest.values()})
    seeds = len({k[2] for k in latest})
    ax.set_title(f"Fashion-MNIST, {'/'.join(map(str, steps))} steps of 128, {seeds} seed(s)",
                 fontsize=9)  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=90)
    print(f"wrote {args.plot}")


def speed(args: argparse.Namespace) -> None:
    """Images/s of a training step (forward, backward, AdamW) and of inference (eval, no grad),
    every encoder's default fashion model, one batch of random images, side by side."""
    from attnlab.tasks.images import FashionTask

    task = FashionTask()
    cfg_cls = FashionTask.default_model_config
    from attnlab.train.merge import merge

    b = args.batch
    x = {"images": torch.randn(b, 1, 28, 28)}
    y = torch.randint(0, 10, (b,))
    print(machine())
    rows = []
    for encoder in args.encoders:
        cfg = merge(cfg_cls(), {"encoder": {"kind": encoder}})
        model = task.build_model(cfg)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step(model=model, opt=opt, bf16=False) -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = torch.nn.functional.cross_entropy(model(x).float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        def infer(model=model, bf16=False) -> None:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                model(x)

        row = {"encoder": encoder, "batch": b, "parameters": sum(p.numel() for p in model.parameters()),
               "threads": torch.get_num_threads()}  # fmt: skip
        for suffix, bf16 in [("", False)] + [("_bf16", True)] * args.bf16:
            model.train()
            t_train = time_call(lambda: step(bf16=bf16), min_time=0.5 if args.quick else 5)
            model.eval()
            t_eval = time_call(lambda: infer(bf16=bf16), min_time=0.5 if args.quick else 5)
            row[f"train_img_per_s{suffix}"] = round(b / t_train, 1)
            row[f"infer_img_per_s{suffix}"] = round(b / t_eval, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.speed_out:
        Path(args.speed_out).write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1))


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", default="runs/images", help="run directories")
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000, 0])
    p.add_argument("--encoders", nargs="+", default=["cnn", "patches", "hybrid"], choices=ENCODERS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--out", default="results/images.jsonl")
    p.add_argument("--plot", help="draw the plot from --out into this PNG (no training)")
    p.add_argument("--table", action="store_true", help="print the markdown table of --out")
    p.add_argument("--speed", action="store_true", help="measure images/s instead")
    p.add_argument("--speed-out", dest="speed_out", help="JSON file for --speed's rows")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--bf16", action="store_true", help="--speed: also under bf16 autocast")
    p.add_argument("--quick", action="store_true", help="short timings (a smoke test)")
    args, extra = p.parse_known_args()
    args.extra = extra
    if args.extra and (args.speed or args.plot or args.table):
        p.error(f"unrecognized arguments: {' '.join(args.extra)}")
    if args.speed:
        speed(args)
    elif args.plot:
        plot(args)
    elif args.table:
        table(args)
    else:
        t0 = time.time()
        run_sweep(args)
        print(f"sweep done in {(time.time() - t0) / 60:.1f} min")


if __name__ == "__main__":
    main()
