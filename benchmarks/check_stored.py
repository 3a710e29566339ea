"""Self-check of the benchmarks' stored-results checks (``stored.py``): no training, no timing,
no datasets; about 20 seconds. Each check writes a small results file of its own in a temporary
directory, with rows made by another configuration beside the matching ones, and asserts that
the script uses only the matching rows and names the others.

    python benchmarks/check_stored.py        # or: pytest benchmarks/check_stored.py
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

import pytest

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
    def row(encoder: str, seed: int, steps: int, acc: float, command: bool = True) -> dict:
        cmd = images.train_command(tmp_path / "r", encoder, 0, seed, steps)
        r = {"encoder": encoder, "train_size": 55000, "seed": seed, "steps": steps,
             "test_accuracy": acc, "dev_accuracy": acc, "parameters": 1}  # fmt: skip
        return {**r, "command": " ".join(cmd[1:])} if command else r

    out = tmp_path / "rows.jsonl"
    rows = [row("cnn", 0, 600, 0.80), row("cnn", 1, 600, 0.82), row("cnn", 2, 13000, 0.99),
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
    # trains today (here the run was made with another default than today's)
    from attnlab.lab.train.config import resolve_config

    for seed, old_default in [(0, ["--model.encoder.stem_tail=0"]), (1, [])]:
        cmd = images.train_command(tmp_path / f"h{seed}", "hybrid", 0, seed, 600)
        cfg = resolve_config(task="fashion", overrides=[*cmd[6:], *old_default])
        (tmp_path / f"h{seed}").mkdir()
        (tmp_path / f"h{seed}" / "config.json").write_text(json.dumps(cfg.to_dict()))
        r = {"encoder": "hybrid", "train_size": 55000, "seed": seed, "steps": 600,
             "test_accuracy": 0.5, "dev_accuracy": 0.5, "parameters": 2,
             "command": " ".join(cmd[1:])}  # fmt: skip
        with out.open("a") as f:
            f.write(json.dumps(r) + "\n")
    text = _main(images, ["--table", "--sizes", "0", "--encoders", "hybrid", "--seeds", "0", "1",
                          "--out", str(out)])  # fmt: skip
    assert "| hybrid | 2 | 50.0 (1) |" in text, text
    assert "hybrid n=55000 seed 0: model.encoder.stem_tail: 0 in the run, 2 asked" in text
    assert "Not shown: 5 row(s)" in text


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


def test_lra_accuracy_refuses_and_chart_leaves_out(tmp_path: Path) -> None:
    small = ["--train", "200", "--dev", "20", "--test", "20", "--min-length", "20",
             "--max-length", "40", "--max-steps", "5", "--length", "40",
             "--out", str(tmp_path)]  # fmt: skip
    args = argparse.Namespace(
        train=200, dev=20, test=20, min_length=20, max_length=40, max_steps=5, batch=32, seed=0,
        extra=[], length=40,
    )  # fmt: skip
    acc = {"exact": {"accuracy": 0.3, "dev": 0.3, "steps": 5,
                     "command": lra.accuracy_command(args, "exact")},
           "linear": {"accuracy": 0.9, "dev": 0.9, "steps": 50,
                      "command": lra.accuracy_command(
                          argparse.Namespace(**{**vars(args), "max_steps": 50}), "linear")},
           "local": {"accuracy": 0.9, "dev": 0.9, "steps": 5}}  # fmt: skip
    speed = {n: {"time_s": 1.0, "peak_bytes": 2**20, "speedup": 1.0, **lra.speed_setup(args)}
             for n in acc}  # fmt: skip
    (tmp_path / "accuracy.json").write_text(json.dumps(acc))
    (tmp_path / "speed.json").write_text(json.dumps(speed))
    text = _main(lra, ["chart", *small, "--chart", str(tmp_path / "c.png")])
    assert "accuracy.json linear: --train.max_steps: 50 stored, 5 asked" in text, text
    assert f"accuracy.json local: command: {NOT_RECORDED}" in text
    chart = (tmp_path / "chart.md").read_text()
    assert "| exact |" in chart and "| linear |" not in chart.split("Left out")[0]
    with pytest.raises(SystemExit, match="another configuration"):
        _main(lra, ["accuracy", *small, "--kernels", "linear"])  # refuses before training


def test_recall_keeps_only_this_commands_rows(tmp_path: Path) -> None:
    # (positions.py kept stored rows too; it is now `attnlab report --claims 7`, keyed jobs)
    rec = ["recall", "--distances", "16", "--models", "lstm", "--train", "10", "--epochs", "1",
           "--out", str(tmp_path / "rec"), "--docs", str(tmp_path)]  # fmt: skip
    rargs = argparse.Namespace(train=10, epochs=1, seed=0, pooling="attention")
    (tmp_path / "rec").mkdir()
    runs = {"lstm@16": {"accuracy": 0.5, "model": "lstm", "distance": 16, "pooling": "attention",
                        "command": rnn_vs_attention.recall_command(rargs, "lstm", 16)},
            "gru@16": {"accuracy": 0.9, "model": "gru", "distance": 16, "pooling": "attention",
                       "command": rnn_vs_attention.recall_command(
                           argparse.Namespace(**{**vars(rargs), "epochs": 50}),
                           "gru", 16)},
            "softmax@16": {"model": "softmax", "distance": 16, "accuracy": 0.9}}  # fmt: skip
    (tmp_path / "rec" / "recall_runs.json").write_text(json.dumps(runs))
    text = _main(rnn_vs_attention, rec)
    md = (tmp_path / "rec" / "recall.md").read_text()
    assert "| lstm | 16 | 50.0% |" in md and "| gru |" not in md, md
    assert "gru@16: --train.epochs: 50 stored, 1 asked" in text


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
                args = [Path(tmp) / name] if check.__code__.co_argcount else []
                for a in args:
                    a.mkdir()
                check(*args)
                print(f"ok  {name}")
