"""Which positional encoding extrapolates: accuracy on ``positions`` at L, 2L and 4L.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/positions.py [--length 32] [--k 3] [--train 4000]
        [--epochs 15] [--seed 0] [--encodings none sinusoidal ...] [--out results/positions]
        [--chart docs/positions_chart.png]

Each encoding trains ``attnlab train positions`` at length L (the same small Transformer,
budget and seed; one process at a time), then ``attnlab eval RUN --data FILE`` scores it on
generated test files of L, 2L and 4L tokens (the marker anywhere, so at 2L it also falls beyond
every training position). A learned table has no vector beyond its ``max_len``: with
``max_len = L`` the evaluation fails, and the row records the error it gives; the row
``learned@4L`` sizes the table for 4L, so positions L..4L keep their untrained initial vectors.

Results: ``OUT/results.json`` (appended as rows finish, each with its train command and test
size; an encoding already there is skipped if they are this command's, and stops the run,
naming the differences, if not), ``OUT/table.md`` and the chart (the rows made with this
command's options; the others are listed in ``table.md``). Accuracy only: not a timing
benchmark.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stored import differences, keep_matching, left_out_note, refuse  # noqa: E402

from attnlab.lab.tasks.longrange import make_positions

ENCODINGS = ("none", "sinusoidal", "learned", "learned@4L", "relative", "rotary", "alibi",
             "floater", "recurrent")  # fmt: skip
SCALES = (1, 2, 4)


def attnlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attnlab", *args], capture_output=True, text=True)


def encoding_args(name: str, length: int) -> list[str]:
    if name == "none":
        return ["--model.encoder.positional=none"]
    if name == "learned":
        return ["--model.encoder.positional=learned", f"--model.encoder.max_len={length}"]
    if name == "learned@4L":
        return ["--model.encoder.positional=learned", f"--model.encoder.max_len={4 * length}"]
    return [f"--model.encoder.positional={name}"]


def write_test_file(path: Path, *, n: int, length: int, k: int, seed: int) -> Path:
    lines = (f"{label} {' '.join(tokens)}\n" for tokens, label in
             make_positions(n, length=length, k=k, seed=seed))  # fmt: skip
    path.write_text("".join(lines))
    return path


def evaluate(run: Path, data: Path) -> float | str:
    """Test accuracy of ``run`` on ``data``, or the error line ``eval`` printed."""
    done = attnlab("eval", str(run), "--data", str(data))
    if done.returncode != 0:
        line = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return line.removeprefix("attnlab eval: error: ").split(";")[0]  # its first clause
    return json.loads("{" + done.stdout.strip().split(": {", 1)[1])["accuracy"]


def setup(args: argparse.Namespace, name: str) -> dict:
    """What a row of encoding ``name`` was made with: its train command and the test files'
    size (their lengths, ``k`` and seeds follow from the command)."""
    train = [
        "train", "positions", f"--task_options.length={args.length}", f"--task_options.k={args.k}",
        f"--task_options.train={args.train}", f"--task_options.seed={args.seed}",
        f"--train.epochs={args.epochs}", f"--train.seed={args.seed}", "--train.log_every=0",
        *encoding_args(name, args.length), *args.extra,
    ]  # fmt: skip
    return {"train": train, "test_examples": args.test}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--length", type=int, default=32)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--train", type=int, default=4000)
    p.add_argument("--test", type=int, default=500)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--encodings", nargs="+", default=list(ENCODINGS))
    p.add_argument(
        "--extra",
        action="append",
        default=[],
        help="one more `attnlab train` override, as --extra=--train.lr=2e-3",
    )
    p.add_argument("--out", type=Path, default=Path("results/positions"))
    p.add_argument("--chart", type=Path, default=Path("docs/positions_chart.png"))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    L = args.length
    files = {s: write_test_file(args.out / f"test_{s}L.txt", n=args.test, length=s * L, k=args.k,
                                seed=args.seed + 100 + s) for s in SCALES}  # fmt: skip
    results_file = args.out / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    for name in args.encodings:
        made = setup(args, name)
        if name in results:
            changes = differences(results[name].get("setup"), made)
            if changes:
                refuse(f"{results_file}: {name}", changes, "give this run its own --out")
            continue
        run = args.out / name
        done = attnlab(*made["train"], f"--out_dir={run}", "--overwrite")
        if done.returncode != 0:
            results[name] = {"error": done.stderr.strip().splitlines()[-1]}
        else:
            results[name] = {f"{s}L": evaluate(run, files[s]) for s in SCALES}
        results[name]["setup"] = made
        results_file.write_text(json.dumps(results, indent=1))
        print(name, results[name], flush=True)
    kept, notes = keep_matching(
        results, lambda n: differences(results[n].get("setup"), setup(args, n)), str
    )
    results = {n: results[n] for n in kept}
    args.note = left_out_note(notes, results_file)
    if args.note:
        print(args.note)
    write_table(results, args, L)
    chart(results, args.chart, L)
    return 0


def write_table(results: dict, args: argparse.Namespace, L: int) -> None:
    head = f"| encoding | L={L} | 2L={2 * L} | 4L={4 * L} |\n|---|---|---|---|\n"
    rows = []
    for name, r in results.items():
        cells = [r.get(f"{s}L", r.get("error", "")) for s in SCALES]
        rows.append(f"| {name} | " + " | ".join(
            f"{c:.1%}" if isinstance(c, float) else f"error: {c}" for c in cells) + " |")  # fmt: skip
    note = f"\n{args.note}\n" if args.note else ""
    (args.out / "table.md").write_text(head + "\n".join(rows) + "\n" + note)


def chart(results: dict, out: Path, L: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, r in results.items():
        xs = [s * L for s in SCALES if isinstance(r.get(f"{s}L"), float)]
        ys = [r[f"{s}L"] for s in SCALES if isinstance(r.get(f"{s}L"), float)]
        if xs:
            ax.plot(xs, ys, marker="o", label=name + ("" if len(xs) == 3 else " (error beyond L)"))
    ax.axhline(0.1, color="grey", lw=0.8, ls=":", label="chance")
    ax.set_xscale("log", base=2)
    ax.set_xticks([L, 2 * L, 4 * L], [f"L={L}", f"2L={2 * L}", f"4L={4 * L}"])
    ax.set_ylabel("test accuracy")
    ax.set_title("positions: the token k places before the marker, trained at L")
    ax.legend(fontsize=7, ncol=2)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    raise SystemExit(main())
