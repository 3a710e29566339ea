"""The Long Range Arena chart on ``listops``: test accuracy against training speed, peak memory
as the bubble size (Tay et al. 2021, Figure 3), for exact attention and every efficient kernel.

Usage::

    # 1. accuracy: every kernel trains the same small model with the same step budget
    OMP_NUM_THREADS=1 python benchmarks/lra.py accuracy [--kernels exact linear performer ...]
        [--max-steps 5000] [--batch 32] [--train 96000] [--min-length 500] [--max-length 2000]
        [--out results/lra]
    # 2. speed and memory: one fwd+bwd training step per kernel, side by side in one process
    #    (a quiet machine)
    OMP_NUM_THREADS=2 python benchmarks/lra.py speed [--length 2000] [--batch 8]
    # 3. the chart from both: docs/lra_chart.png
    python benchmarks/lra.py chart
    # 4. what shallow rules score on the same test trees (no training; seconds)
    python benchmarks/lra.py baselines [--train 20000 --max-length 300 ...]

The model is ``listops``'s default (width 64, 2 pre-norm blocks of 4 heads, feed-forward 128,
rotary positions, attention pooling); only ``--model.encoder.attention.kernel`` changes, with
the options of :func:`attnlab.lab.bench.attention.scaled_options` (``max_len`` = the longest
sequence, Reformer buckets of ~64 tokens; a kernel given as ``NAME:KEY=VALUE,...``, e.g.
``bigbird:block=16``, adds options of its own and names its results so).

``accuracy`` runs ``attnlab train listops`` per kernel (``--train.max_steps``), each run a job of
``attnlab report`` with the kernel's options of its claim 14 (``kernel_options`` of
:mod:`attnlab.lab.report.claims_lra`), run one after another by ``run_jobs``
(:mod:`attnlab.lab.report.run`) into ``OUT/jobs/KEY/`` (its log ``OUT/jobs/KEY.log``), KEY a
hash of its resolved configuration: a finished run is read back, not trained again, an
interrupted one resumes, a changed option is another run, and processes with different
``--kernels`` can share one ``--out``. Each result also holds what the report measures of a
listops run (the no-training rules' dev accuracy; the report times the step costs later, side
by side, and ``speed`` below does that here). It writes ``OUT/accuracy.json``: this command's kernels' test and dev
accuracy, steps, job key and train command, or the error of a run that failed. With the quick
budget's sizes (``--train 2000 --dev 200 --test 200 --min-length 100 --max-length 300
--max-steps 100 --extra=--train.epochs=5``, seed 0) its jobs are the report's seed-0 jobs of
claim 14, read back when ``--out`` is the report's directory.

``speed`` times a training step (forward, loss, backward) on the same batch of ``batch``
sequences of about ``length`` tokens for every kernel, and its peak tensor bytes; speed is
reported relative to exact attention measured in the same process; each row records its length,
batch and seed. ``chart`` takes the options of both runs (the accuracy run's data sizes,
lengths, steps, batch, seed and ``--extra``; the speed run's ``--length``): it draws the kernels
of ``--kernels`` whose accuracy job with these options has finished and whose speed row matches,
listing the others in ``OUT/chart.md``.

``baselines`` scores (with :mod:`attnlab.lab.tasks.longrange.baselines`, which the report's
claim 14 uses too) three rules fitted on the training trees (a table of the most frequent
answer per key) on the test trees: ``majority`` (one answer for all), ``operator`` (the answer
most frequent for the tree's top-level operator) and ``top level`` (keyed by the operator, what
its direct digit arguments give under it — their max, min, sum mod 10, or the sorted digits for
``[MED`` — and how many nested lists it has; an unseen key falls back to ``operator``). A model
above ``operator`` has learnt to read digits; one above ``top level`` evaluates nested lists.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import train_jobs  # noqa: E402
from stored import differences, keep_matching, left_out_note  # noqa: E402

from attnlab.attention_config import AttentionConfig
from attnlab.lab.bench.attention import scaled_options
from attnlab.lab.bench.measure import training_step_cost
from attnlab.efficient import KERNELS
from attnlab.lab.report import claims_lra
from attnlab.lab.report.budgets import LISTOPS_FP32
from attnlab.lab.report.jobs import Job, JobResult, read_result
from attnlab.lab.tasks import TASKS
from attnlab.lab.tasks.longrange import ListOpsSpec, load_listops, make_listops
from attnlab.lab.tasks.longrange.baselines import rule_accuracies

EXACT = "exact"


def kernels(names: list[str] | None) -> list[str]:
    return names or [EXACT, *KERNELS.names()]


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``"bigbird:block=16,random_blocks=2"`` -> ``("bigbird", {"block": 16, ...})``: a kernel
    and options of its own, on top of :func:`scaled_options` (the spec names its results)."""
    name, _, rest = spec.partition(":")
    opts: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(
                f"--kernels {spec!r}: expected NAME:KEY=VALUE[,KEY=VALUE], got {item!r}"
            )
        opts[key] = json.loads(value) if value[:1].isdigit() or value[:1] == "-" else value
    return name, opts


def kernel_options(spec: str, length: int) -> tuple[str, dict[str, Any]]:
    """The kernel of ``spec`` and its options at ``length`` tokens (``speed``'s, in this process;
    the accuracy runs' are their command-line form, :func:`claims_lra.kernel_options`)."""
    name, own = parse_spec(spec)
    return name, {**(scaled_options(name, length) if name != EXACT else {}), **own}


def task_args(args: argparse.Namespace) -> list[str]:
    return [
        f"--task_options.train={args.train}", f"--task_options.dev={args.dev}",
        f"--task_options.test={args.test}", f"--task_options.min_length={args.min_length}",
        f"--task_options.max_length={args.max_length}", f"--task_options.seed={args.seed}",
    ]  # fmt: skip


def accuracy_job(args: argparse.Namespace, spec: str) -> Job:
    """Kernel ``spec``'s accuracy run: ``attnlab train listops OPTIONS``, the kernel's options
    and the precision (float32) claim 14's."""
    name, own = parse_spec(spec)
    kernel = () if name == EXACT else claims_lra.kernel_options(name, args.max_length, own)
    options = (
        *task_args(args), *kernel, f"--train.max_steps={args.max_steps}",
        "--train.epochs=1000", f"--train.batch_size={args.batch}", "--train.log_every=0",
        LISTOPS_FP32, *args.extra,
    )  # fmt: skip
    return Job("listops", options, args.seed, spec)


def accuracy_row(job: Job, result: JobResult) -> dict[str, Any]:
    return {"accuracy": result.metrics["test"]["accuracy"], "dev": result.dev,
            "steps": result.metrics["steps"], "job": job.key, "command": job.command()}  # fmt: skip


def run_accuracy(args: argparse.Namespace) -> dict:
    jobs = [accuracy_job(args, spec) for spec in kernels(args.kernels)]
    results = {}
    for job, result in zip(jobs, train_jobs(jobs, args.out)):
        failed = isinstance(result, str)
        results[job.label] = {"error": result} if failed else accuracy_row(job, result)
        print(job.label, results[job.label], flush=True)
    (args.out / "accuracy.json").write_text(json.dumps(results, indent=1))
    return results


def run_baselines(args: argparse.Namespace) -> dict:
    spec = ListOpsSpec(train=args.train, dev=args.dev, test=args.test, min_length=args.min_length,
                       max_length=args.max_length, seed=args.seed)  # fmt: skip
    splits = load_listops(spec)
    scores = rule_accuracies(splits["train"], splits["test"])  # the report's claim 14 uses it too
    results = {name: {"accuracy": acc} for name, acc in scores.items()}
    for name, r in results.items():
        print(name, r, flush=True)
    (args.out / "baselines.json").write_text(json.dumps(results, indent=1))
    return results


def speed_setup(args: argparse.Namespace) -> dict:
    """What a speed row was measured on (``--repeats`` only sets the timing's precision)."""
    return {"length": args.length, "batch": args.batch, "seed": args.seed}


def run_speed(args: argparse.Namespace) -> dict:
    spec = ListOpsSpec(train=args.batch, dev=0, test=0, min_length=args.length // 2,
                       max_length=args.length, seed=args.seed)  # fmt: skip
    examples = make_listops(spec)["train"]
    task = TASKS.get("listops")()
    results = {}
    for name in kernels(args.kernels):
        cfg = task.default_model_config()
        kernel, opts = kernel_options(name, args.length)
        if kernel != EXACT:
            cfg.encoder.attention = AttentionConfig(kernel=kernel, kernel_options=opts)
        try:
            model = task.build_model(cfg).train()
            batch = task.collate(examples)
            t, peak = training_step_cost(
                model, lambda model=model, batch=batch: task.loss(model, batch)[0],
                repeats=args.repeats,
            )  # fmt: skip
            results[name] = {"time_s": t, "peak_bytes": peak}
        except (ValueError, RuntimeError) as err:
            results[name] = {"error": str(err).splitlines()[0]}
        results[name].update(speed_setup(args))
        print(name, results[name], flush=True)
    exact = results.get(EXACT, {}).get("time_s")
    for r in results.values():
        if exact and "time_s" in r:
            r["speedup"] = exact / r["time_s"]
    (args.out / "speed.json").write_text(json.dumps(results, indent=1))
    return results


def chart(args: argparse.Namespace) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # only this command's accuracy jobs and the speed rows made with its options: the others
    # are listed, not drawn
    acc, missing = {}, []
    for spec in kernels(args.kernels):
        job = accuracy_job(args, spec)
        result = read_result(args.out, job)
        if result is None:
            missing.append(f"  - {spec}: {args.out / 'jobs' / job.key}")
        else:
            acc[spec] = accuracy_row(job, result)
    speed = json.loads((args.out / "speed.json").read_text())
    setup = speed_setup(args)
    fast, speed_notes = keep_matching(
        speed, lambda n: differences({k: speed[n][k] for k in setup if k in speed[n]}, setup),
        lambda n: f"speed.json {n}",
    )  # fmt: skip
    speed = {n: speed[n] for n in fast}
    if missing:
        missing.insert(0, "No accuracy run with these options has finished (`lra.py accuracy` "
                          f"with them trains it), for {len(missing)} kernel(s):")  # fmt: skip
    note = "\n".join(filter(None, [left_out_note(speed_notes, args.out), *missing]))
    if note:
        print(note)
    names = [n for n in acc if "accuracy" in acc[n] and "speedup" in speed.get(n, {})]
    if not names:
        raise SystemExit(f"{args.out}: no kernel has accuracy and speed rows made with this "
                         "command's options")  # fmt: skip
    rows = ["| kernel | test accuracy | speed (x exact) | peak memory (MiB) |", "|---|---|---|---|"]
    for n in acc:
        a, s = acc[n], speed.get(n, {})
        rows.append(f"| {n} | {a['accuracy']:.1%} |")
        rows[-1] += (
            f" {s['speedup']:.2f} | {s['peak_bytes'] / 2**20:.0f} |" if "speedup" in s else " | |"
        )
    (args.out / "chart.md").write_text("\n".join(rows) + "\n" + (f"\n{note}\n" if note else ""))
    peak = max(speed[n]["peak_bytes"] for n in names)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    # One colour per kernel, named in the legend: labels on the bubbles collide where several
    # kernels run at about exact attention's speed.
    colours = plt.get_cmap("tab20").colors
    colours = colours[0::2] + colours[1::2]  # the ten strong colours first
    for i, n in sorted(enumerate(names), key=lambda item: -speed[item[1]]["peak_bytes"]):
        x, y = speed[n]["speedup"], 100 * acc[n]["accuracy"]
        ax.scatter(x, y, s=2000 * speed[n]["peak_bytes"] / peak, alpha=0.45, label=n,
                   color=colours[i % len(colours)], edgecolors="black", linewidths=0.5)  # fmt: skip
        ax.plot(x, y, "k.", markersize=2)
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda k: names.index(labels[k]))
    legend = ax.legend([handles[k] for k in order], [labels[k] for k in order], fontsize=7,
                       loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)  # fmt: skip
    for handle in legend.legend_handles:
        handle.set_sizes([40])
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator([0.125, 0.25, 0.5, 1, 2]))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}x"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("training speed relative to exact attention (log scale)")
    ax.set_ylabel("listops test accuracy (%)")
    ax.set_title("LRA listops: accuracy, speed, memory (bubble area = peak memory)", fontsize=9)
    args.chart.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(args.chart, dpi=120)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=["accuracy", "speed", "chart", "baselines"])
    p.add_argument("--kernels", nargs="+", default=None,
                   help=f"default: {EXACT} and all; NAME:KEY=VALUE[,...] adds options of the "
                   "kernel's own, e.g. bigbird:block=16 (results are named by the spec)")  # fmt: skip
    p.add_argument("--train", type=int, default=96_000)
    p.add_argument("--dev", type=int, default=2_000)
    p.add_argument("--test", type=int, default=2_000)
    p.add_argument("--min-length", type=int, default=500)
    p.add_argument("--max-length", type=int, default=2_000)
    p.add_argument("--max-steps", type=int, default=5_000)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--extra",
        action="append",
        default=[],
        help="one more `attnlab train` override, as --extra=--train.lr=2e-3",
    )
    p.add_argument("--length", type=int, default=2_000, help="speed: longest sequence")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("results/lra"))
    p.add_argument("--chart", type=Path, default=Path("docs/lra_chart.png"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.part == "accuracy":
        run_accuracy(args)
    elif args.part == "speed":
        run_speed(args)
    elif args.part == "baselines":
        run_baselines(args)
    else:
        chart(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
