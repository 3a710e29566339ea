"""Frame accuracy on ``phones``: window-FC (k = 1, 11), CNN, BiLSTM and self-attention on the
same log-mel frames, and self-attention truncated to a window of w frames.

Usage::

    python benchmarks/phones_compare.py [--sentences 500] [--seed 0] [--epochs 6]
        [--runs compare windows] [--seeds 0] [--out results/phones_compare]

Makes the dataset first if it is missing (``attnlab data make phones --sentences N --seed S``:
needs festival). Each row is one ``attnlab train phones`` run (one process at a time; set
``OMP_NUM_THREADS`` yourself); the results go to ``OUT/results.json`` (appended as rows finish,
so a stopped run keeps its rows), ``OUT/table.md`` and ``OUT/windows_accuracy.json`` (test
accuracy per window w, as ``benchmarks/speech_windows.py --accuracy`` plots it, with the
settings it came from under ``"_config"``). Each row records its train command; a row already in
``results.json`` is not run again if its command is this one's, and stops the run, naming the
differences, if not; the table holds only the rows made with this command's options and lists
the others. Accuracy only: each run's training speed is in its
``metrics.json`` but not reported here (measure speed on a quiet machine).

The window w is the transformer's ``--model.encoder.window``: frame i attends to frames j with
``|i - j| <= w`` (2w + 1 frames, (2w + 1) x 10 ms of context).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stored import NOT_RECORDED, differences, keep_matching, left_out_note, refuse  # noqa: E402

#: the models compared, as ``attnlab train`` overrides; widths chosen for ~0.3 M parameters
#: where the kind allows (the FC baselines are what the homework prescribes)
MODELS: dict[str, list[str]] = {
    "fc k=1": ["--model.encoder.kind=fc", "--model.encoder.context=1",
               "--model.encoder.hidden=256", "--model.encoder.depth=2"],
    "fc k=11": ["--model.encoder.kind=fc", "--model.encoder.context=11",
                "--model.encoder.hidden=256", "--model.encoder.depth=2"],
    "cnn": ["--model.encoder.kind=cnn", "--model.encoder.depth=3",
            "--model.encoder.conv_kernel=5"],
    "bilstm": ["--model.encoder.kind=rnn", "--model.encoder.depth=2",
               "--model.encoder.hidden=80"],
    "self-attention": ["--model.encoder.kind=transformer"],
}  # fmt: skip
WINDOWS = (4, 8, 16, 32, 64)


def rows(which: list[str], windows: list[int]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if "compare" in which:
        out.update(MODELS)
    if "windows" in which:
        for w in windows:
            out[f"self-attention w={w}"] = [
                *MODELS["self-attention"],
                f"--model.encoder.window={w}",
            ]
        out.setdefault("self-attention", MODELS["self-attention"])
    return out


def overrides_of(name: str) -> list[str] | None:
    """The model overrides of the row ``name`` (``None``: not a row this script makes)."""
    if name.startswith("self-attention w="):
        return [*MODELS["self-attention"], f"--model.encoder.window={name.partition('=')[2]}"]
    return MODELS.get(name)


def train_command(args: argparse.Namespace, overrides: list[str], seed: int) -> list[str]:
    """The ``attnlab train phones`` options of one row (without ``--out_dir``)."""
    return ["-m", "attnlab", "train", "phones", f"--task_options.sentences={args.sentences}",
            f"--task_options.seed={args.seed}", f"--train.epochs={args.epochs}",
            f"--train.batch_size={args.batch_size}", f"--train.seed={seed}",
            *overrides]  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument("--seed", type=int, default=0, help="the dataset's seed")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="training seeds")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--runs", nargs="+", default=["compare", "windows"],
                   choices=["compare", "windows"])  # fmt: skip
    p.add_argument("--windows", type=int, nargs="+", default=list(WINDOWS),
                   help="attention windows w to run, in this order")  # fmt: skip
    p.add_argument("--only", nargs="*", default=None, help="run only these row names")
    p.add_argument("--out", default="results/phones_compare")
    args = p.parse_args()

    from attnlab.lab.speechgen import make_phones

    make_phones(args.sentences, seed=args.seed)  # no-op when it exists
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results_file = out / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    for name, overrides in rows(args.runs, args.windows).items():
        if args.only is not None and name not in args.only:
            continue
        for seed in args.seeds:
            key = f"{name} | seed {seed}"
            command = train_command(args, overrides, seed)
            if key in results:
                changes = differences({"command": results[key].get("command")},
                                      {"command": command})  # fmt: skip
                if changes:
                    refuse(f"{results_file}: {key}", changes, "give this run its own --out")
                continue
            run_dir = out / "runs" / f"{name.replace(' ', '_').replace('=', '')}-s{seed}"
            cmd = [sys.executable, *command, "--overwrite", f"--out_dir={run_dir}"]
            print(" ".join(cmd[1:]), flush=True)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            metrics = json.loads((run_dir / "metrics.json").read_text())
            results[key] = {
                "model": name, "seed": seed, "parameters": metrics["parameters"],
                "dev_accuracy": metrics["best_dev"]["accuracy"],
                "test_accuracy": metrics["test"]["accuracy"], "overrides": overrides,
                "command": command,
            }  # fmt: skip
            results_file.write_text(json.dumps(results, indent=1))
            print(f"  {key}: test frame accuracy {results[key]['test_accuracy']:.4f}", flush=True)

    def changes(key: str) -> list[str]:
        r = results[key]
        overrides = overrides_of(r["model"])
        if overrides is None:
            return [f"model {r['model']!r}: {NOT_RECORDED} in this script"]
        wanted = train_command(args, overrides, r["seed"])
        return differences({"command": r.get("command")}, {"command": wanted})

    kept, notes = keep_matching(results, changes, str)
    note = left_out_note(notes, results_file)
    results = {k: results[k] for k in kept}
    table = ["| model | parameters | seed | dev frame acc. | test frame acc. |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    for r in results.values():
        table.append(f"| {r['model']} | {r['parameters']:,} | {r['seed']} | "
                     f"{100 * r['dev_accuracy']:.1f}% | {100 * r['test_accuracy']:.1f}% |")  # fmt: skip
    (out / "table.md").write_text("\n".join(table) + "\n" + (f"\n{note}\n" if note else ""))
    # test accuracy per window, in the form benchmarks/speech_windows.py --accuracy plots
    windows: dict[str, list[float]] = {}
    for r in results.values():
        if r["model"] == "self-attention" or r["model"].startswith("self-attention w="):
            w = r["model"].partition("w=")[2] or "full"
            windows.setdefault(w, []).append(r["test_accuracy"])
    if windows:
        mean: dict = {w: sum(v) / len(v) for w, v in windows.items()}
        mean["_config"] = {"task": "phones", "sentences": args.sentences, "seed": args.seed,
                           "epochs": args.epochs, "batch_size": args.batch_size,
                           "seeds": sorted({r["seed"] for r in results.values()})}  # fmt: skip
        (out / "windows_accuracy.json").write_text(json.dumps(mean, indent=1))
    print("\n".join(table))
    if note:
        print("\n" + note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
