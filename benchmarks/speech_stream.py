"""Streaming inference over a long input: latency per 100 ms chunk and memory, minute by
minute, for a 10-minute recording made by concatenating FSDD files; both must stay flat.

Usage:
    python benchmarks/speech_stream.py [--quick] [--minutes 10] [--checkpoint CKPT]
        [--window 16] [--subsample none|conv2d] [--out results/speech_stream.json]

Without ``--checkpoint`` the model is the fsdd task's streaming configuration
(``--model.causal=true --model.encoder.window=W --model.frontend.normalize=global``) with random
weights and unit feature statistics: speed and memory do not depend on the weights. The input
is FSDD recordings (from ``$ATTNLAB_DATA``) concatenated until ``--minutes`` (noise if no
mirror). Reported per minute of input: chunk latency (median, 95th percentile, max), the
streamer's state (numbers held between chunks) and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

from attnlab.lab.tasks.speech.fsdd import FsddTask  # noqa: E402
from attnlab.lab.tasks.speech.stream import SpeechStreamer  # noqa: E402


def _model(args):
    if args.checkpoint:
        from attnlab.lab.train.checkpoint import load_for_inference

        task, model, _ = load_for_inference(args.checkpoint)
        return task, model
    task = FsddTask()
    task.labels = [str(d) for d in range(10)]
    cfg = task.default_model_config()
    cfg.causal, cfg.encoder.window = True, args.window
    cfg.frontend.normalize, cfg.frontend.subsample = "global", args.subsample
    task.stats = {"mean": [0.0] * cfg.frontend.n_mels, "std": [1.0] * cfg.frontend.n_mels}
    torch.manual_seed(0)
    return task, task.build_model(cfg).eval()


def _long_input(seconds: float, rate: int) -> torch.Tensor:
    from attnlab.lab.audio import read_wav
    from attnlab.lab.data.registry import dataset_path, get_dataset

    need = int(seconds * rate)
    parts, total = [], 0
    try:
        stems = sorted(get_dataset("fsdd").files)
        while total < need:
            for stem in stems:
                x = read_wav(dataset_path("fsdd", stem), rate)
                parts.append(x)
                total += x.shape[0]
                if total >= need:
                    break
    except (OSError, ValueError) as err:  # no mirror: noise of the same length
        print(f"no FSDD recordings ({err}); streaming noise instead", file=sys.stderr)
        return 0.1 * torch.randn(need)
    return torch.cat(parts)[:need]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="20 s of input (smoke run)")
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--checkpoint", default="")
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--subsample", default="none", choices=("none", "conv2d"))
    p.add_argument("--chunk-ms", type=float, default=100.0)
    p.add_argument("--out", default="results/speech_stream.json")
    args = p.parse_args(argv)
    seconds = 20.0 if args.quick else 60.0 * args.minutes
    task, model = _model(args)
    audio = _long_input(seconds, task.sample_rate)
    step = round(task.sample_rate * args.chunk_ms / 1000)
    streamer = SpeechStreamer(task, model)
    bucket = 10.0 if args.quick else 60.0  # seconds of input per report row
    rows, lat, next_report = [], [], bucket
    for start in range(0, audio.shape[0], step):
        t0 = time.perf_counter()
        hidden = streamer.push(audio[start : start + step])
        if streamer.pool is not None and streamer.pool.count:
            streamer.logits()
        lat.append(time.perf_counter() - t0)
        del hidden
        end_s = (start + step) / task.sample_rate
        if end_s >= next_report - 1e-9 or start + step >= audio.shape[0]:
            next_report += bucket
            ms = sorted(1000 * t for t in lat)
            row = {"input_s": round(end_s, 1), "chunks": len(ms),
                   "latency_ms_median": statistics.median(ms),
                   "latency_ms_p95": ms[int(0.95 * (len(ms) - 1))], "latency_ms_max": ms[-1],
                   "state_numbers": streamer.state_size(),
                   "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}  # fmt: skip
            rows.append(row)
            print(f"{row['input_s']:7.1f} s: chunk latency median {row['latency_ms_median']:.2f} ms, "
                  f"p95 {row['latency_ms_p95']:.2f}, max {row['latency_ms_max']:.2f}; state "
                  f"{row['state_numbers']} numbers; peak RSS {row['peak_rss_mb']:.0f} MB", flush=True)  # fmt: skip
            lat = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine(), "chunk_ms": args.chunk_ms,
                               "window": model.encoder.window, "rows": rows}, indent=1))  # fmt: skip
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
