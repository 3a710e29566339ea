"""Truncated self-attention on speech frames: training tokens/s and inference latency as the
window w varies (4, 8, 16, 32, 64, full), side by side, and the plot of accuracy and speed
against w.

Usage:
    python benchmarks/speech_windows.py [--quick] [--frames 100 1000] [--out results/speech_windows.json]
        [--accuracy results/fsdd_windows.json] [--plot results/speech_windows.png]

Models: the fsdd task's default model (width 96, 2 blocks, 4 heads, rotary) with
``--model.encoder.window=w`` (the local mask on the default attention path) and, beside it,
the banded ``local`` kernel (``--model.encoder.attention.kernel=local``), random weights; inputs: random 40-bin log-mel frames, a batch of
32 utterances of ``frames`` frames for training (one AdamW step: forward, backward, update;
tokens = frames), one utterance for latency (eval, no grad). A frame is 10 ms, so 100 frames is
an FSDD digit and 1,000 frames ten seconds of speech. ``--accuracy`` is a JSON
``{"4": 0.97, ..., "full": 0.98}`` of measured test accuracies (BENCHMARKS.md gives the
command) to draw beside the speeds; the settings they were measured with (its ``"_config"``, as
``fsdd_accuracy.py`` and ``phones_compare.py`` write it) are printed and named in the plot,
or said to be not recorded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

from attnlab.attention_config import AttentionConfig  # noqa: E402
from attnlab.lab.bench import time_call  # noqa: E402
from attnlab.lab.tasks.speech.fsdd import FsddTask  # noqa: E402

WINDOWS = [4, 8, 16, 32, 64, None]


def _model(window: int | None, kernel: bool = False):
    task = FsddTask()
    task.labels = [str(d) for d in range(10)]
    cfg = task.default_model_config()
    if kernel and window is not None:  # the banded local kernel instead of a masked dense path
        cfg.encoder.attention = AttentionConfig(kernel="local", kernel_options={"window": window})
    else:
        cfg.encoder.window = window
    cfg.frontend.specaugment = False
    cfg.frontend.subsample = "none"  # w counts 10 ms frames (the task's default is Conv2d x4)
    torch.manual_seed(0)
    return task.build_model(cfg)


def measure(window: int | None, frames: int, batch: int, min_time: float, kernel: bool) -> dict:
    model = _model(window, kernel)
    feats = torch.randn(batch, frames, 40)
    train_batch = {"features": feats, "lengths": torch.full((batch,), frames),
                   "labels": torch.randint(0, 10, (batch,))}  # fmt: skip
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        model.train()
        loss = torch.nn.functional.cross_entropy(model(train_batch), train_batch["labels"])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t_step = time_call(step, min_time=min_time)
    one = {"features": feats[:1], "lengths": torch.tensor([frames])}
    model.eval()
    with torch.no_grad():
        t_inf = time_call(lambda: model(one), min_time=min_time)
    return {"window": "full" if window is None else window, "frames": frames,
            "path": "local kernel" if kernel else "mask",
            "train_tokens_per_s": batch * frames / t_step, "latency_ms": 1000 * t_inf}  # fmt: skip


def plot(rows: list[dict], accuracy: dict | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [str(w) for w in ["4", "8", "16", "32", "64", "full"]]
    panels = 3 if accuracy else 2
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.4))
    x = range(len(labels))
    ax = 0
    if accuracy:
        axes[0].plot(x, [accuracy.get(k) for k in labels], "o-")
        setup = accuracy.get("_config")
        made = ", ".join(f"{k} {v}" for k, v in setup.items()) if setup else "settings not recorded"
        axes[0].set_title(f"test accuracy\n({made})", fontsize=7)
        ax = 1
    for frames, kind in sorted({(r["frames"], r["path"]) for r in rows}):
        sel = {str(r["window"]): r for r in rows if r["frames"] == frames and r["path"] == kind}
        sel.setdefault(
            "full", next(r for r in rows if r["frames"] == frames and r["window"] == "full")
        )
        name = f"n={frames}, {kind}"
        axes[ax].plot(x, [sel[k]["train_tokens_per_s"] for k in labels], "o-", label=name)
        axes[ax + 1].plot(x, [sel[k]["latency_ms"] for k in labels], "o-", label=name)
    axes[ax].set_title("training tokens/s")
    axes[ax + 1].set_title("inference latency (ms, batch 1)")
    for a in axes:
        a.set_xticks(list(x), labels)
        a.set_xlabel("window w (frames each side)")
    axes[ax].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, short timings (smoke run)")
    p.add_argument("--frames", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--out", default="results/speech_windows.json")
    p.add_argument("--accuracy", default="", help="JSON {window: test accuracy} to plot")
    p.add_argument("--plot", default="results/speech_windows.png")
    args = p.parse_args(argv)
    frames, batch, min_time = ([50], 4, 0.0) if args.quick else (args.frames, 32, 2.0)
    rows = []
    for n in frames:
        for w, kernel in [(w, False) for w in WINDOWS] + [(w, True) for w in WINDOWS[:-1]]:
            row = measure(w, n, batch, min_time, kernel)
            rows.append(row)
            print(f"n={n:5d} w={row['window']!s:>4} {row['path']:>12}: "
                  f"{row['train_tokens_per_s']:10.0f} train tok/s "
                  f"{row['latency_ms']:8.2f} ms latency", flush=True)  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine(), "batch": batch, "rows": rows}, indent=1))
    accuracy = json.loads(Path(args.accuracy).read_text()) if args.accuracy else None
    if accuracy is not None:
        print(f"accuracy from {args.accuracy}, made with: "
              f"{accuracy.get('_config') or 'settings not recorded'}")  # fmt: skip
    plot(rows, accuracy, Path(args.plot))
    print(f"wrote {out} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
