"""Do two versions of attnlab give the same results? One short, seeded run per task family.

A refactor that must not change what the lab computes (issue 33: "a run's results with the
default options are unchanged, same seed, same metric to the last digit") is checked by running
this at both commits on the same machine and comparing, and by evaluating the first version's
checkpoints with the second (old checkpoints still load and give the same numbers)::

    python benchmarks/same_results.py run --out results/same-before      # at the old commit
    python benchmarks/same_results.py run --out results/same-after       # at the new one
    python benchmarks/same_results.py compare results/same-before results/same-after
    python benchmarks/same_results.py eval results/same-before           # old runs, new code

Each run is ``attnlab train TASK`` with the task's defaults shrunk to seconds (fewer examples,
steps, a narrower model where the default takes minutes), in its own process, with one
thread so that the arithmetic is reproducible. ``run`` writes ``DIR/RUN/`` (the run
directory, checkpoints included) and ``DIR/results.json`` (every run's test metrics and its
``metrics.csv`` rows); ``compare`` prints each metric of both and exits 1 on any difference;
``eval`` runs ``attnlab eval`` on each stored run with the current code and compares with what
the run reported. Data: the tests' tiny files (``tests/tasks/data``), the mirror
(``ATTNLAB_DATA``) for FSDD, solubility and the graphs, festival for ``phones`` (skipped
without it), scikit-learn's digits and Debian's Fashion-MNIST.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "tasks" / "data"
TRAIN = ["--train.device=cpu", "--train.log_every=0", "--train.seed=0"]
TEXT = [f"--task_options.train_file={DATA / 'tagged.train.txt'}",
        f"--task_options.dev_file={DATA / 'tagged.dev.conllu'}",
        f"--task_options.test_file={DATA / 'tagged.test.txt'}", "--task_options.corpus=files"]  # fmt: skip
SENTIMENT = [f"--task_options.train_file={DATA / 'sentiment.train.txt'}",
             f"--task_options.test_file={DATA / 'sentiment.test.txt'}"]  # fmt: skip
SMALL_TEXT = ["--model.input.dim=32", "--model.encoder.heads=2", "--model.encoder.ff_hidden=64",
              "--train.epochs=4", "--train.batch_size=4"]  # fmt: skip

#: run name -> (task, options); the defaults of each task with less data and fewer steps
RUNS: dict[str, tuple[str, list[str]]] = {
    "pos": ("pos", [*TEXT, *SMALL_TEXT]),
    "pos-rnn": (
        "pos",
        [
            *TEXT,
            "--model.input.dim=32",
            "--model.encoder.kind=rnn",
            "--train.epochs=4",
            "--train.batch_size=4",
        ],
    ),  # fmt: skip
    "pos-window": ("pos", [*TEXT, *SMALL_TEXT, "--model.encoder.window=1"]),
    "sst2": ("sst2", [*SENTIMENT, *SMALL_TEXT]),
    "sst2-cnn-attention": (
        "sst2",
        [
            *SENTIMENT,
            "--model.encoder.kind=cnn-attention",
            "--model.encoder.maps=8",
            "--train.epochs=4",
            "--train.batch_size=4",
        ],
    ),  # fmt: skip
    "mlm": (
        "mlm",
        [
            f"--task_options.train_file={DATA / 'tagged.train.txt'}",
            f"--task_options.dev_file={DATA / 'tagged.dev.conllu'}",
            "--task_options.min_count=1",
            *SMALL_TEXT,
        ],
    ),  # fmt: skip
    "fsdd": ("fsdd", ["--task_options.limit=40", "--train.epochs=2", "--train.batch_size=8"]),
    "phones": (
        "phones",
        ["--task_options.sentences=6", "--train.epochs=2", "--train.batch_size=4"],
    ),  # fmt: skip
    "digits-patches": ("digits", ["--task_options.train_size=200", "--train.epochs=2"]),
    "digits-hybrid": (
        "digits",
        ["--task_options.train_size=200", "--train.epochs=2", "--model.encoder.kind=hybrid"],
    ),  # fmt: skip
    "digits-pixels": (
        "digits",
        ["--task_options.train_size=100", "--train.epochs=1", "--model.encoder.kind=pixels"],
    ),  # fmt: skip
    "fashion": (
        "fashion",
        ["--task_options.train_size=256", "--train.max_steps=6", "--train.eval_every=3"],
    ),  # fmt: skip
    "freesolv": ("freesolv", ["--train.epochs=2"]),
    "freesolv-mask": ("freesolv", ["--train.epochs=2", "--model.structure=mask"]),
    "solubility": ("solubility", ["--train.epochs=1"]),
    "karate": ("karate", ["--train.epochs=30"]),
    "cora-gat": ("cora", ["--train.epochs=3"]),
    "cora-graph-attention": ("cora", ["--train.epochs=3", "--model.kind=graph_attention"]),
    "cora-full-lappe": ("cora", ["--train.epochs=3", "--model.kind=full_lappe"]),
    "g2p": (
        "g2p",
        [
            f"--task_options.dict_file={DATA / 'cmudict.tiny.dict'}",
            "--model.dim=32",
            "--model.heads=2",
            "--train.epochs=4",
            "--train.batch_size=8",
        ],
    ),  # fmt: skip
    "g2p-lstm": (
        "g2p",
        [
            f"--task_options.dict_file={DATA / 'cmudict.tiny.dict'}",
            "--model.kind=lstm",
            "--model.dim=32",
            "--train.epochs=2",
            "--train.batch_size=8",
        ],
    ),  # fmt: skip
    "listops": (
        "listops",
        [
            "--task_options.train=64",
            "--task_options.dev=16",
            "--task_options.test=16",
            "--task_options.min_length=10",
            "--task_options.max_length=60",
            "--train.epochs=2",
        ],
    ),  # fmt: skip
    "recall": (
        "recall",
        [
            "--task_options.train=64",
            "--task_options.dev=16",
            "--task_options.test=16",
            "--train.epochs=2",
        ],
    ),  # fmt: skip
    "positions": (
        "positions",
        [
            "--task_options.train=64",
            "--task_options.dev=16",
            "--task_options.test=16",
            "--train.epochs=2",
        ],
    ),  # fmt: skip
}


def _env() -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.setdefault("ATTNLAB_DATA", str(ROOT.parent / "shared" / "data"))
    return env


def _attnlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attnlab", *args], capture_output=True,
                          text=True, env=_env(), cwd=ROOT)  # fmt: skip


def _history(run: Path) -> list[dict[str, str]]:
    path = run / "metrics.csv"
    if not path.is_file():
        return []
    with path.open() as f:  # timings differ from run to run: left out
        return [{k: v for k, v in row.items() if k not in ("elapsed_s", "units_per_s")}
                for row in csv.DictReader(f)]  # fmt: skip


def run(out: Path, names: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name in names:
        task, options = RUNS[name]
        if task == "phones" and shutil.which("festival") is None:
            print(f"{name}: skipped (festival is not installed)")
            continue
        done = _attnlab("train", task, *options, *TRAIN, f"--out_dir={out / name}",
                        "--train.overwrite=true")  # fmt: skip
        if done.returncode != 0:
            print(f"{name}: failed\n{done.stderr[-2000:]}")
            results[name] = {"error": done.stderr.strip().splitlines()[-1:]}
            continue
        metrics = json.loads((out / name / "metrics.json").read_text())
        results[name] = {"task": task, "options": options, "test": metrics.get("test"),
                         "history": _history(out / name)}  # fmt: skip
        print(f"{name}: test {json.dumps(metrics.get('test'))}")
    (out / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0


def compare(a: Path, b: Path) -> int:
    left = json.loads((a / "results.json").read_text())
    right = json.loads((b / "results.json").read_text())
    differ = 0
    for name in sorted(set(left) | set(right)):
        x, y = left.get(name), right.get(name)
        if x is None or y is None:
            print(f"{name}: only in {a if y is None else b}")
            differ += 1
            continue
        same = x.get("test") == y.get("test") and x.get("history") == y.get("history")
        differ += not same
        print(f"{name}: {'same' if same else 'DIFFERENT'} test {json.dumps(x.get('test'))}"
              + ("" if same else f" vs {json.dumps(y.get('test'))}"))  # fmt: skip
    print(f"{differ} of {len(set(left) | set(right))} runs differ")
    return 1 if differ else 0


def evaluate(stored: Path) -> int:
    results = json.loads((stored / "results.json").read_text())
    differ = 0
    for name, result in sorted(results.items()):
        if "test" not in result:
            continue
        done = _attnlab("eval", str(stored / name))
        if done.returncode != 0:
            print(f"{name}: eval failed: {done.stderr.strip().splitlines()[-1:]}")
            differ += 1
            continue
        got = json.loads(done.stdout.strip().splitlines()[-1].split(": ", 1)[1])
        want = {k: round(float(v), 4) for k, v in (result["test"] or {}).items()}
        same = all(got.get(k) == v for k, v in want.items() if k in got)
        differ += not same
        print(f"{name}: {'same' if same else 'DIFFERENT'} {json.dumps(got)}"
              + ("" if same else f" (the run reported {json.dumps(want)})"))  # fmt: skip
    print(f"{differ} runs differ or fail")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="train every run (or --only NAME ...) into --out")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--only", nargs="+", choices=sorted(RUNS), default=None)
    c = sub.add_parser("compare", help="compare two `run` directories; exit 1 on a difference")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    e = sub.add_parser("eval", help="`attnlab eval` every stored run with this code")
    e.add_argument("stored", type=Path)
    args = p.parse_args(argv)
    if args.what == "run":
        return run(args.out, args.only or list(RUNS))
    if args.what == "compare":
        return compare(args.a, args.b)
    return evaluate(args.stored)


if __name__ == "__main__":
    sys.exit(main())
