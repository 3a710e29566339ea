"""Self-check of the benchmarks' stored-results checks (``stored.py``): no timing, no datasets;
about 20 seconds. Each check writes a small results file of its own in a temporary directory,
with rows made by another configuration beside the matching ones, and asserts that the script
uses only the matching rows and names the others. The scripts whose trainings are report jobs
(``rnn_vs_attention.py recall``, ``lra.py accuracy``, ``images.py``'s sweep, and
``graph_accuracy.py``, which keeps its rows as well): their checks train a tiny job, then assert
that it is read back, not trained again, that a changed option is a new job, and that the jobs
train what the script says (the report's own jobs, at the report's setting, where the script
repeats a claim's runs).

    python benchmarks/check_stored.py        # or: pytest benchmarks/check_stored.py
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import sys
import tempfile
from pathlib import Path

import pytest

from attnlab.lab.report import execute
from attnlab.lab.report.budgets import BUDGETS
from attnlab.lab.report.claims import ForgettingRNN
from attnlab.lab.report.claims_lra import KERNELS, EfficientKernels

sys.path.insert(0, str(Path(__file__).resolve().parent))
import graph_accuracy  # noqa: E402
import images  # noqa: E402
import lra  # noqa: E402
import rnn_vs_attention  # noqa: E402
import sentences  # noqa: E402
from stored import NOT_RECORDED, differences, run_differences, run_lacks  # noqa: E402


def _main(module, argv: list[str]) -> str:
    """stdout of ``module.main()`` run with ``argv``."""
    out, old = io.StringIO(), sys.argv
    sys.argv = [module.__file__, *argv]
    try:
        with contextlib.redirect_stdout(out):
            module.main() if module is images else module.main(argv)  # images reads sys.argv
    finally:
        sys.argv = old
    return out.getvalue()


def test_differences() -> None:
    cmd = ["-m", "attnlab", "train", "x", "--train.max_steps=600", "--out_dir=a"]
    assert differences({"command": cmd}, {"command": [*cmd[:-1], "--out_dir=b"]}) == []
    changed = differences({"command": cmd}, {"command": [*cmd[:4], "--train.max_steps=13000"]})
    assert changed == ["--train.max_steps: 600 stored, 13000 asked"]
    assert differences({"command": " ".join(cmd)}, {"command": cmd}) == []  # a string command
    assert differences({}, {"patience": 100}) == [f"patience: {NOT_RECORDED}, 100 asked"]
    assert differences(None, {"a": 1}) == [f"how it was made is {NOT_RECORDED}"]
    extra = differences({"command": cmd}, {"command": [*cmd, "--train.bf16"]})
    assert extra == ["--train.bf16: absent stored, true asked"]


def test_images_table_keeps_only_the_sweeps_rows(tmp_path: Path) -> None:
    def row(encoder: str, seed: int, steps: int, acc: float, command: str = "job") -> dict:
        job = images.sweep_job("fashion", encoder, 0, seed, steps)
        r = {"encoder": encoder, "train_size": 55000, "seed": seed, "steps": steps,
             "test_accuracy": acc, "dev_accuracy": acc, "parameters": 1}  # fmt: skip
        if command == "before jobs":  # a row of the script's own subprocesses: still read
            options = " ".join([*job.options, f"--train.seed={seed}"])
            return {**r, "command": f"-m attnlab train fashion --out_dir={tmp_path} {options}"}
        return {**r, "command": job.command()} if command else r

    out = tmp_path / "rows.jsonl"
    rows = [row("cnn", 0, 600, 0.80), row("cnn", 1, 600, 0.82, "before jobs"),
            row("cnn", 2, 13000, 0.99),
            row("cnn", 3, 600, 0.99, command=False), row("cnn", 0, 13000, 0.99)]  # fmt: skip
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = _main(images, ["--table", "--sizes", "0", "--encoders", "cnn", "--seeds", "0", "1",
                          "2", "3", "--steps", "600", "--out", str(out)])  # fmt: skip
    assert "| cnn | 1 | 81.0 ± 1.4 (2) |" in text, text  # seeds 0 and 1 at 600 steps only
    assert "Left out: 3 row(s)" in text
    assert "cnn n=55000 seed 2: --train.max_steps: 13000 stored, 600 asked" in text
    assert f"cnn n=55000 seed 3: command: {NOT_RECORDED}" in text
    with pytest.raises(SystemExit, match="no row matches"):
        _main(images, ["--table", "--sizes", "0", "--steps", "20000", "--out", str(out)])

    # a row whose run directory is still there: its config.json must be what the command
    # trains today (here the run was made with another default than today's; the precision it
    # saved is what "auto" chose there); where it is gone, its job key must be today's
    from attnlab.lab.train.config import resolve_config

    for seed, old_default in [(0, ["--model.encoder.stem_tail=0"]), (1, []), (2, None)]:
        job = images.sweep_job("fashion", "hybrid", 0, seed, 600)
        run = tmp_path / "jobs" / (job.key if seed == 1 else f"{seed:016x}")
        if old_default is not None:  # seed 2's directory is gone
            options = [*job.options, f"--train.seed={seed}", *old_default]
            cfg = resolve_config(task="fashion", overrides=options).to_dict()
            run.mkdir(parents=True)
            cfg["train"]["precision"] = "bf16"
            (run / "config.json").write_text(json.dumps(cfg))
        r = {"encoder": "hybrid", "train_size": 55000, "seed": seed, "steps": 600,
             "test_accuracy": 0.5, "dev_accuracy": 0.5, "parameters": 2,
             "command": job.command(), "run": str(run)}  # fmt: skip
        with out.open("a") as f:
            f.write(json.dumps(r) + "\n")
    text = _main(images, ["--table", "--sizes", "0", "--encoders", "hybrid", "--seeds", "0", "1",
                          "2", "--out", str(out)])  # fmt: skip
    assert "| hybrid | 2 | 50.0 (1) |" in text, text
    assert "hybrid n=55000 seed 0: model.encoder.stem_tail: 0 in the run, 2 asked" in text
    assert f"hybrid n=55000 seed 2: job {2:016x} stored, " in text
    assert "Not shown: 5 row(s)" in text


def test_images_sweep_is_report_jobs_read_back_not_trained_again(
    tmp_path: Path, monkeypatch
) -> None:
    from attnlab.lab.report.claims import DataEfficiency
    from attnlab.lab.report.jobs import Job

    # cnn and patches are claim 10's models; a point trains what the script's command trained
    assert [images.encoder_options(e) for e in ("cnn", "patches")] == [
        options for _, options in DataEfficiency.MODELS
    ]
    before = ("--model.encoder.kind=hybrid", "--train.max_steps=600", "--train.epochs=1000",
              "--train.batch_size=128", "--train.lr=1e-3", "--train.eval_every=300",
              "--task_options.train_size=1000", "--model.encoder.dim=8")  # fmt: skip
    job = images.sweep_job("fashion", "hybrid", 1000, 1, 600, ["--model.encoder.dim=8"])
    assert job.key == Job("fashion", before, 1).key  # the key covers the resolved config
    argv = ["--task", "digits", "--runs", str(tmp_path / "runs"), "--sizes", "64", "--encoders",
            "cnn", "patches", "--steps", "2", "--out", str(tmp_path / "rows.jsonl")]  # fmt: skip
    _main(images, argv)
    monkeypatch.setattr(execute, "run_one", lambda *a: pytest.fail("a finished job ran again"))
    _main(images, argv)
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and rows[:2] == rows[2:]  # the second sweep read the same runs back
    assert [(r["encoder"], r["train_size"], r["steps"]) for r in rows[:2]] == [
        ("cnn", 64, 2), ("patches", 64, 2)
    ]  # fmt: skip
    text = _main(images, ["--table", *argv])
    assert "| cnn |" in text and "| patches |" in text and "Left out" not in text, text


def test_run_differences_and_run_lacks(tmp_path: Path) -> None:
    from attnlab.lab.train.config import resolve_config

    options = ["--train.max_steps=3", "--train.epochs=1"]
    cfg = resolve_config(task="digits", overrides=options)
    (tmp_path / "config.json").write_text(json.dumps(cfg.to_dict()))
    assert run_differences(tmp_path, "digits", [*options, f"--out_dir={tmp_path}"]) == []
    assert run_differences(tmp_path, "digits", ["--train.max_steps=4", "--train.epochs=1"]) == [
        "train.max_steps: 3 in the run, 4 asked"
    ]
    assert run_lacks(tmp_path, ["--train.epochs=1"]) == []
    assert run_lacks(tmp_path, ["--train.epochs=2"]) == ["train.epochs: 1 in the run, 2 asked"]
    assert run_differences(tmp_path / "none", "digits", options) == [
        f"{tmp_path / 'none' / 'config.json'}: {NOT_RECORDED}"
    ]


def test_graph_table_leaves_out_another_budget(tmp_path: Path) -> None:
    base = {"dataset": "cora", "model": "gat", "seed": 0, "epochs": 300, "select": "acc",
            "variant": "pyg", "best_epoch": 200, "dev_accuracy": 0.8, "seconds": 1.0}  # fmt: skip
    rows = [{**base, "test_accuracy": 0.81, "max_epochs": 1000, "patience": 100},
            {**base, "test_accuracy": 0.99, "max_epochs": 2000, "patience": 100},
            {**base, "test_accuracy": 0.99}]  # fmt: skip
    out = tmp_path / "g.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = _main(graph_accuracy, ["--datasets", "cora", "--models", "gat:1", "--out", str(out)])
    assert "81.0 ± 0.0 (n=1)" in text, text  # the matching row only; nothing was trained
    assert "max_epochs: 2000 stored, 1000 asked" in text
    assert f"max_epochs: {NOT_RECORDED}, 1000 asked; patience: {NOT_RECORDED}" in text


def test_graph_accuracy_trains_report_jobs_and_reads_them_back(tmp_path: Path, monkeypatch) -> None:
    """A row's run is a report job at the script's recipe: trained once, then read back from
    its directory when asked again, even with its row gone; another setting is another job."""
    job = graph_accuracy.job("citeseer", "gat", 3, epochs=7, patience=5, select="acc+loss",
                             variant="original", dropout=0.7)  # fmt: skip
    cfg = job.config()
    assert cfg["train"]["precision"] == "fp32" and cfg["train"]["seed"] == 3
    assert (cfg["train"]["epochs"], cfg["train"]["patience"]) == (7, 5)
    assert (cfg["task_options"]["l2"], cfg["task_options"]["select"]) == (5e-4, "acc+loss")
    assert (cfg["model"]["dropout"], cfg["model"]["attention_dropout"]) == (0.7, 0.7)
    assert cfg["model"]["kind"] == "gat" and cfg["model"]["variant"] == "original"
    other = graph_accuracy.job("citeseer", "gat", 3, epochs=7, patience=5, select="acc+loss",
                               variant="original", dropout=0.7, l2=1e-3)  # fmt: skip
    assert other.key != job.key and other.config()["task_options"]["l2"] == 1e-3

    out = tmp_path / "g.jsonl"
    argv = ["--datasets", "karate", "--models", "graph_attention:1", "--epochs", "2", "--out",
            str(out)]  # fmt: skip
    _main(graph_accuracy, argv)
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["epochs"] == 2 and row["model"] == "graph_attention"
    assert (tmp_path / "g.runs" / "jobs" / row["job"] / "result.json").exists()
    out.unlink()  # the rows gone, the job stays
    monkeypatch.setattr(execute, "run_one", _never_runs)
    _main(graph_accuracy, argv)
    assert [json.loads(line) for line in out.read_text().splitlines()] == [row]


def _never_runs(*args) -> None:
    pytest.fail("a finished job ran again")


def _recording(ran: list):
    """A ``run_one`` that records the job and trains nothing (so it leaves no result)."""
    return lambda job, out, limit=None: ran.append(job)


def test_lra_accuracy_reads_its_jobs_back_and_the_chart_draws_this_commands(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))  # the generated trees
    # seed 1: the runner times a training step of seed 0's listops runs only
    small = ["--train", "64", "--dev", "32", "--test", "32", "--min-length", "20",
             "--max-length", "40", "--max-steps", "3", "--batch", "16", "--length", "40",
             "--extra=--task_options.max_depth=3", "--seed", "1", "--out", str(tmp_path)]  # fmt: skip
    _main(lra, ["accuracy", *small, "--kernels", "exact"])  # one tiny run
    acc = json.loads((tmp_path / "accuracy.json").read_text())
    assert list(acc) == ["exact"] and acc["exact"]["steps"] == 3, acc
    assert (tmp_path / "jobs" / acc["exact"]["job"] / "result.json").exists()
    monkeypatch.setattr(execute, "run_one", _never_runs)
    _main(lra, ["accuracy", *small, "--kernels", "exact"])
    assert json.loads((tmp_path / "accuracy.json").read_text()) == acc

    setup = {"length": 40, "batch": 16, "seed": 1}
    speed = {"exact": {"time_s": 1.0, "peak_bytes": 2**20, "speedup": 1.0, **setup},
             "linear": {"time_s": 0.5, "peak_bytes": 2**20, "speedup": 2.0, **setup},
             "local": {"time_s": 1.0, "peak_bytes": 2**20, "speedup": 1.0,
                       **{**setup, "length": 80}}}  # fmt: skip
    (tmp_path / "speed.json").write_text(json.dumps(speed))
    text = _main(lra, ["chart", *small, "--kernels", "exact", "linear", "local",
                       "--chart", str(tmp_path / "c.png")])  # fmt: skip
    assert "speed.json local: length: 80 stored, 40 asked" in text, text
    assert "has finished" in text and "  - linear: " in text and "  - local: " in text
    chart = (tmp_path / "chart.md").read_text()
    assert f"| exact | {acc['exact']['accuracy']:.1%} | 1.00 | 1 |" in chart, chart
    assert "| linear |" not in chart and (tmp_path / "c.png").exists()

    ran: list = []
    monkeypatch.setattr(execute, "run_one", _recording(ran))
    more = [*small, "--max-steps", "4"]  # the last one counts
    _main(lra, ["accuracy", *more, "--kernels", "exact"])
    assert [j.key for j in ran] != [acc["exact"]["job"]] and "--train.max_steps=4" in ran[0].options
    after = json.loads((tmp_path / "accuracy.json").read_text())
    assert "left no result" in after["exact"]["error"]  # recorded; the sweep goes on
    with pytest.raises(SystemExit, match="train.no_such"):  # before anything trains
        _main(lra, ["accuracy", *small, "--extra=--train.no_such=1"])
    assert len(ran) == 1


def test_lra_accuracy_runs_claim_14s_jobs_at_its_setting() -> None:
    """With the quick budget's sizes, lra.py's runs are the report's: one definition of each
    kernel's options (claims_lra.kernel_options)."""
    quick = dict(o.removeprefix("--").split("=", 1) for o in BUDGETS["quick"].options["listops"]
                 if "=" in o)  # fmt: skip
    args = argparse.Namespace(train=2000, dev=200, test=200, min_length=100, max_length=300,
                              max_steps=int(quick["train.max_steps"]), batch=32, seed=0,
                              extra=["--train.epochs=5"])  # fmt: skip
    claim = EfficientKernels().jobs(BUDGETS["quick"])
    mine = [lra.accuracy_job(args, spec) for spec in ["exact", *KERNELS]]
    assert [j.key for j in mine] == [runs[0].key for runs in claim.values()]
    bigbird = lra.accuracy_job(args, "bigbird:block=16").options
    assert "--model.encoder.attention.kernel_options.block=16" in bigbird


def test_recall_reads_its_jobs_back_and_a_changed_option_is_a_new_job(
    tmp_path: Path, monkeypatch
) -> None:
    rec = ["recall", "--distances", "16", "--models", "lstm", "--train", "64", "--epochs", "1",
           "--out", str(tmp_path / "rec"), "--docs", str(tmp_path)]  # fmt: skip
    _main(rnn_vs_attention, rec)  # one tiny run
    (row,) = json.loads((tmp_path / "rec" / "recall.json").read_text())
    assert (row["model"], row["distance"]) == ("lstm", 16)
    assert (tmp_path / "rec" / "jobs" / row["job"] / "result.json").exists()
    md = (tmp_path / "rec" / "recall.md").read_text()
    assert f"| lstm | 16 | {row['accuracy']:.1%} |" in md, md
    monkeypatch.setattr(execute, "run_one", _never_runs)
    _main(rnn_vs_attention, rec)
    assert (tmp_path / "rec" / "recall.md").read_text() == md

    ran: list = []
    monkeypatch.setattr(execute, "run_one", _recording(ran))
    text = _main(rnn_vs_attention, [*rec, "--epochs", "2"])  # the last one counts
    assert [j.key for j in ran] != [row["job"]] and "--train.epochs=2" in ran[0].options
    assert "Failed: 1 run(s)" in text and "lstm@16: " in text  # the stub left no result


def test_recall_runs_claim_11s_jobs_at_its_setting() -> None:
    """Claim 11 (self-attention against a BiLSTM) is this script's softmax and bilstm at
    distance 16, read out at the query: at the quick budget's sizes, the report's jobs."""
    args = argparse.Namespace(train=20000, epochs=1, seed=0, pooling="last")
    claim = ForgettingRNN().jobs(BUDGETS["quick"])
    mine = [rnn_vs_attention.recall_job(args, name, 16) for name in ("softmax", "bilstm")]
    assert [j.key for j in mine] == [runs[0].key for runs in claim.values()]


def test_sentences_report_leaves_out_other_overrides(tmp_path: Path) -> None:
    name = "CNN-rand (depth 0), max pool; U(±0.25) embeddings, lr 2e-3"
    folder = tmp_path / "full" / "trec"
    folder.mkdir(parents=True)
    other = [*sentences.overrides_of("trec", name, 1, False), "--train.max_steps=7"]
    for seed, overrides in [(0, sentences.overrides_of("trec", name, 0, False)), (1, other)]:
        row = {"task": "trec", "variant": name, "seed": seed, "test_accuracy": 0.9,
               "dev_accuracy": 0.9, "parameters": 1, "overrides": overrides}  # fmt: skip
        (folder / f"{sentences.slug(name)}_seed{seed}.json").write_text(json.dumps(row))
    text = _main(sentences, ["--tasks", "trec", "--only", name, "--seeds", "0", "1",
                             "--out", str(tmp_path), "--report"])  # fmt: skip
    assert "90.0 (90.0), 1 seed" in text, text
    assert "--train.max_steps: 7 stored, absent asked" in text
    with pytest.raises(SystemExit, match="another configuration"):
        sentences.run("trec", name, 1, tmp_path / "full", False)  # refuses before training


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        for name, check in list(globals().items()):
            if name.startswith("test_"):
                with pytest.MonkeyPatch.context() as mp:  # pytest's two fixtures used here
                    given = {"tmp_path": Path(tmp) / name, "monkeypatch": mp}
                    wanted = inspect.signature(check).parameters
                    if "tmp_path" in wanted:
                        given["tmp_path"].mkdir()
                    check(**{p: given[p] for p in wanted})
                print(f"ok  {name}")
