"""Images: data efficiency of cnn / patches (ViT) / hybrid on Fashion-MNIST (or the 8x8
digits), and their speed.

Usage:
    # accuracy against training-set size: each point is an `attnlab report` job (claim 10,
    # `attnlab report --claims data`, is the sweep's subset: CNN and patches, the same encoder
    # options), trained into RUNS/jobs/KEY/ (KEY: a hash of the run's resolved configuration)
    # by attnlab.lab.report.run.run_jobs: a point that finished in --runs is read back, not
    # retrained; an interrupted one resumes; another configuration (other options, a changed
    # default) is another job. Once all have run, one row a point is appended to --out.
    python benchmarks/images.py --runs /tmp/images/runs --sizes 1000 5000 20000 0 \
        --encoders cnn patches hybrid --seeds 0 --steps 600 --out results/images.jsonl
    # any other --a.b=value option goes to every run (give such a sweep its own --out)
    python benchmarks/images.py --runs /tmp/images/rel --encoders hybrid --sizes 0 \
        --model.encoder.positional=relative2d --out results/images_rel.jsonl
    # --task digits: scikit-learn's 8x8 digits (claim 10's smoke and quick task), in seconds
    python benchmarks/images.py --task digits --runs /tmp/images/digits --sizes 64 128 0 \
        --encoders cnn patches --steps 100 --out /tmp/images/digits.jsonl
    # the plot from the jsonl (test accuracy vs train size, log x, error bars = std over seeds)
    # and its markdown table (mean +- std over seeds, seeds in brackets): give them the sweep's
    # own options; they use only the rows that sweep would have written (same train command;
    # encoder, size and seed among those given; where the row's run directory is still there,
    # its config.json what that command trains today), and list the others
    python benchmarks/images.py --plot docs/images_data_efficiency.png --sizes 1000 5000 20000 0 \
        --encoders cnn patches hybrid --seeds 0 --steps 600 --out results/images.jsonl
    python benchmarks/images.py --table --sizes 1000 5000 20000 0 --encoders cnn patches hybrid \
        --seeds 0 --steps 600 --out results/images.jsonl
    # speed: images/s, training step and inference, every encoder, same batch, one process
    # (Fashion-MNIST's models only)
    python benchmarks/images.py --speed [--batch 128] [--quick]

Budget rule of the accuracy runs (the same for every encoder and size): ``--steps`` AdamW
optimizer steps of batch 128 (lr 1e-3, weight decay 0.05, 5% warm-up, cosine decay), random
crop (+-2 px) and horizontal flips, dev evaluation every half of the run, the best dev
checkpoint tested on the 10,000 test images. Size 0 is the whole train split (60,000 less the
fixed 5,000-image validation split = 55,000). Subsets are nested and class-balanced
(``--task_options.train_size``). Digits: the task's own model and augmentation (crop +-1 px,
no flips), 1,258 training images at size 0, 180 dev and 359 test images. The runs train in this process, on one thread
unless ``OMP_NUM_THREADS`` says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402
from stored import differences, keep_matching, left_out_note, run_differences  # noqa: E402

from attnlab.lab.bench import time_call  # noqa: E402
from attnlab.lab.report.claims import DataEfficiency  # noqa: E402
from attnlab.lab.report.jobs import Job, job_dir  # noqa: E402
from attnlab.lab.report.run import run_jobs  # noqa: E402

ENCODERS = ["cnn", "patches", "hybrid", "pixels"]
#: the tasks, their names in the plot, and their whole train split (``--sizes 0``)
TASKS = {"fashion": "Fashion-MNIST", "digits": "8x8 digits"}
FULL = {"fashion": 55000, "digits": 1258}


def encoder_options(encoder: str) -> tuple[str, ...]:
    """The options that choose ``encoder``: claim 10's own for the models it compares (cnn,
    patches), so that its points and the sweep's train the same model."""
    own = (f"--model.encoder.kind={encoder}",)
    return next((options for _, options in DataEfficiency.MODELS if options[:1] == own), own)


def sweep_job(
    task: str, encoder: str, size: int, seed: int, steps: int, extra: Sequence[str] = ()
) -> Job:
    """One point of the sweep, ``attnlab train TASK`` of ``encoder`` on ``size`` images
    (0: all) under the budget rule (module docstring); ``extra`` options go last."""
    options = (*encoder_options(encoder), f"--train.max_steps={steps}", "--train.epochs=1000",
               "--train.batch_size=128", "--train.lr=1e-3",
               f"--train.eval_every={max(steps // 2, 1)}", f"--task_options.train_size={size}",
               *extra)  # fmt: skip
    return Job(task, options, seed, f"{encoder}, {size or 'all'} images")


def run_sweep(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    points = [(encoder, size, seed) for size in args.sizes for encoder in args.encoders
              for seed in args.seeds]  # fmt: skip
    jobs = [sweep_job(args.task, *point, args.steps, args.extra) for point in points]
    threads = torch.get_num_threads()
    if "OMP_NUM_THREADS" not in os.environ:  # one thread a run, as each run's process had
        torch.set_num_threads(1)
    try:
        results = run_jobs(jobs, args.runs)
    finally:
        torch.set_num_threads(threads)
    for (encoder, size, seed), job, result in zip(points, jobs, results):
        m = result.metrics
        row = {"encoder": encoder, "train_size": size or FULL[args.task], "seed": seed,
               "steps": m["steps"], "test_accuracy": m["test"]["accuracy"],
               "dev_accuracy": m["best_dev"]["accuracy"], "parameters": m["parameters"],
               "train_minutes": round(m["train_time_s"] / 60, 1), "command": job.command(),
               "run": str(job_dir(Path(args.runs), job))}  # fmt: skip
        with out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


def _latest(args: argparse.Namespace) -> tuple[dict[tuple[str, int, int], dict], str]:
    """The rows of ``args.out`` that the sweep of these arguments would have written, by
    (encoder, train size, seed) (a later line replaces an earlier), and the note naming the
    rows left out: another train command than this sweep's, or, where the row's run directory
    is still there, a ``config.json`` other than what that command trains today (where it is
    gone, another job key than today's)."""
    rows = [json.loads(line) for line in Path(args.out).read_text().splitlines() if line]
    full = FULL[args.task]
    sizes = {n or full for n in args.sizes}
    asked = [r for r in rows if r["encoder"] in args.encoders and r["train_size"] in sizes
             and r["seed"] in args.seeds]  # fmt: skip

    def changes(r: dict) -> list[str]:
        size = 0 if r["train_size"] == full else r["train_size"]
        job = sweep_job(args.task, r["encoder"], size, r["seed"], args.steps, args.extra)
        stored = r.get("command")
        if isinstance(stored, str):  # rows of before the jobs: "-m attnlab train ... --out_dir=D"
            stored = stored.removeprefix("-m ")
        found = differences({"command": stored}, {"command": job.command().split()})
        run_dir = r.get("run") or next((o[len("--out_dir="):] for o in str(stored).split()
                                        if o.startswith("--out_dir=")), None)  # fmt: skip
        if found or not run_dir:
            return found
        if (Path(run_dir) / "config.json").is_file():
            return run_differences(run_dir, args.task, [*job.options, f"--train.seed={r['seed']}"])
        if "run" in r and Path(run_dir).name != job.key:
            return [f"job {Path(run_dir).name} stored, {job.key} asked (today's defaults differ)"]
        return []

    kept, notes = keep_matching(
        asked, changes, lambda r: f"{r['encoder']} n={r['train_size']} seed {r['seed']}"
    )
    note = left_out_note(notes, args.out)
    if len(asked) < len(rows):
        note += (f"\nNot shown: {len(rows) - len(asked)} row(s) of other encoders, sizes or "
                 "seeds than --encoders/--sizes/--seeds.")  # fmt: skip
    if not kept:
        raise SystemExit(f"{args.out}: no row matches this command\n{note}")
    latest = {(r["encoder"], r["train_size"], r["seed"]): r for r in kept}
    return latest, note.strip()


def _accuracies(latest: dict, encoder: str, size: int) -> list[float]:
    """Test accuracies (%) of ``encoder`` at ``size``, one per seed."""
    return [r["test_accuracy"] * 100 for k, r in latest.items() if k[:2] == (encoder, size)]


def table(args: argparse.Namespace) -> None:
    """Print the markdown table: test accuracy mean +- std over seeds (and how many), per
    encoder and training-set size, from the rows this sweep's arguments would have written."""
    latest, note = _latest(args)
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
    if note:
        print("\n" + note)


def plot(args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    latest, note = _latest(args)
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
    ax.set_title(f"{TASKS[args.task]}, {'/'.join(map(str, steps))} steps of 128, {seeds} seed(s)",
                 fontsize=9)  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=90)
    print(f"wrote {args.plot}")
    if note:
        print(note)


def speed(args: argparse.Namespace) -> None:
    """Images/s of a training step (forward, backward, AdamW) and of inference (eval, no grad),
    every encoder's default fashion model, one batch of random images, side by side."""
    from attnlab.lab.tasks.images import FashionTask

    task = FashionTask()
    cfg_cls = FashionTask.default_model_config
    from attnlab.lab.train.merge import merge

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


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--task", default="fashion", choices=list(TASKS),
                   help="the sweep's images (--speed: fashion only)")  # fmt: skip
    p.add_argument("--runs", default="runs/images", help="the jobs' directory (RUNS/jobs/KEY)")
    p.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000, 0])
    p.add_argument("--encoders", nargs="+", default=["cnn", "patches", "hybrid"], choices=ENCODERS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--out", default="results/images.jsonl")
    p.add_argument(
        "--plot",
        help="draw the plot from --out into this PNG (no training); "
        "only the rows the sweep of the other options would have written",
    )
    p.add_argument(
        "--table",
        action="store_true",
        help="print the markdown table of --out (the same rows as --plot)",
    )
    p.add_argument("--speed", action="store_true", help="measure images/s instead")
    p.add_argument("--speed-out", dest="speed_out", help="JSON file for --speed's rows")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--bf16", action="store_true", help="--speed: also under bf16 autocast")
    p.add_argument("--quick", action="store_true", help="short timings (a smoke test)")
    args, extra = p.parse_known_args(argv)
    args.extra = extra
    if args.extra and args.speed:
        p.error(f"unrecognized arguments: {' '.join(args.extra)}")
    if args.speed and args.task != "fashion":
        p.error("--speed measures the fashion models only; drop --task")
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
