"""The ``attnlab`` command line end to end, on a tiny budget of real data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from attnlab.lab.cli import main
from attnlab.lab.tasks import TASKS

MIRROR = os.environ.get("ATTNLAB_DATA") or str(Path(__file__).resolve().parents[2] / "shared/data")
needs_data = pytest.mark.skipif(
    not (Path(MIRROR) / "ud/en_atis-ud-train.conllu").is_file(),
    reason="needs the dataset mirror (set ATTNLAB_DATA)",
)

TINY = [
    "--task_options.corpus=ud-atis", "--task_options.max_train_sentences=300",
    "--train.epochs=4", "--train.batch_size=32", "--train.lr=5e-3", "--model.input.dim=32",
    "--model.encoder.depth=1", "--model.encoder.heads=2", "--model.encoder.ff_hidden=64",
]  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    os.environ.setdefault("ATTNLAB_DATA", MIRROR)
    out = tmp_path_factory.mktemp("cli") / "pos"
    if not (Path(MIRROR) / "ud/en_atis-ud-train.conllu").is_file():
        pytest.skip("needs the dataset mirror (set ATTNLAB_DATA)")
    assert main(["train", "pos", *TINY, f"--out_dir={out}"]) == 0
    return out


@needs_data
def test_train_writes_config_metrics_and_checkpoints(run_dir):
    for name in ("config.json", "metrics.csv", "metrics.json", "best.pt", "last.pt"):
        assert (run_dir / name).is_file(), name
    cfg = json.loads((run_dir / "config.json").read_text())
    assert cfg["task"] == "pos" and cfg["model"]["encoder"]["heads"] == 2
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert 0.5 < metrics["test"]["accuracy"] <= 1.0  # well above the majority tag (about 0.25)


@needs_data
def test_predict_text_json_and_stdin(run_dir, capsys, monkeypatch):
    assert main(["predict", str(run_dir), "I saw a saw ."]) == 0
    line = capsys.readouterr().out.strip()
    assert [p.rsplit("/", 1)[0] for p in line.split()] == ["I", "saw", "a", "saw", "."]
    assert main(["predict", str(run_dir), "--json", "show me flights"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["tokens"] == ["show", "me", "flights"] and len(obj["tags"]) == 3
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("list flights\nto boston\n"))
    assert main(["predict", str(run_dir), "-"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 2


@needs_data
def test_predict_in_batches_by_length_equals_one_batch(run_dir, monkeypatch):
    """Many inputs run in batches of similar lengths (predict_batch at a time): the records are
    those of one call with every input (no grad, float32: padding is masked), in input order."""
    from attnlab.lab.predictions import predict_in_batches
    from attnlab.lab.train import load_for_inference

    task, model, _ = load_for_inference(str(run_dir))
    words = [
        "show",
        "me",
        "the",
        "flights",
        "from",
        "boston",
        "to",
        "denver",
        "on",
        "monday",
        "morning",
        "please",
    ]
    inputs = [words[: 1 + (7 * k) % len(words)] for k in range(23)]  # lengths in no order
    calls = []
    predict = task.predict
    monkeypatch.setattr(task, "predict_batch", 5)
    monkeypatch.setattr(task, "predict", lambda m, xs: calls.append(xs) or predict(m, xs))
    batched = predict_in_batches(task, model, inputs, {})
    assert [len(c) for c in calls] == [5, 5, 5, 5, 3]
    sizes = [len(x) for c in calls for x in c]
    assert sizes == sorted(sizes)  # shortest to longest
    assert batched == predict(model, inputs)  # one call, every input
    assert [r["tokens"] for r in batched] == inputs


@needs_data
def test_eval_on_a_conllu_file_and_on_a_split(run_dir, capsys):
    assert main(["eval", str(run_dir), "--data", f"{MIRROR}/ud/en_atis-ud-dev.conllu"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out.split(": ", 1)[1])["tokens"] == 6644.0
    assert main(["eval", str(run_dir / "best.pt")]) == 0
    assert "pos test split" in capsys.readouterr().out


@needs_data
def test_eval_gives_the_runs_test_metrics_and_length_order_matches_file_order(run_dir, capsys):
    import torch

    from attnlab.lab.train.batching import eval_order
    from attnlab.lab.train.checkpoint import load_for_inference

    assert main(["eval", str(run_dir), "--split", "test"]) == 0
    got = json.loads(capsys.readouterr().out.split(": ", 1)[1])
    reported = json.loads((run_dir / "metrics.json").read_text())["test"]
    assert got == {k: round(v, 4) for k, v in reported.items()}
    # batched by length (less padding) against the file's order: the same predictions
    task, model, _ = load_for_inference(run_dir, setup=True)
    test = task.splits()["test"]
    order = eval_order(task, test)
    assert order != list(range(len(test)))  # the order does change
    with torch.no_grad():
        by_length = task.evaluate(model, (task.collate([test[i] for i in order[s : s + 16]])
                                          for s in range(0, len(test), 16)))  # fmt: skip
        in_order = task.evaluate(model, (task.collate(test[s : s + 16])
                                         for s in range(0, len(test), 16)))  # fmt: skip
    assert by_length["accuracy"] == in_order["accuracy"]
    assert by_length["loss"] == pytest.approx(in_order["loss"], rel=1e-5)


@needs_data
def test_show_writes_a_png(run_dir, tmp_path):
    png = tmp_path / "saw.png"
    assert main(["show", str(run_dir), "I", "saw", "a", "saw", ".", "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_task_and_option_list_the_valid_ones(capsys):
    assert main(["train", "nosuchtask"]) == 2
    assert "valid choices" in capsys.readouterr().err
    assert main(["train", "pos", "--train.nosuchoption=3"]) == 2
    err = capsys.readouterr().err
    assert "nosuchoption" in err and "lr" in err


def test_tasks_lists_the_registry(capsys):
    assert main(["tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == TASKS.names()
    described = [line for line in lines if len(line.split(maxsplit=1)) == 2]  # tests' toys: none
    starts = {len(line) - len(line.split(maxsplit=1)[1]) for line in described}
    assert len(starts) == 1, "the summaries do not start in one column"
    assert not any("``" in line for line in lines)


def test_space_separated_values():
    from attnlab.lab.commands import normalize_overrides

    assert normalize_overrides(["--attention.kernel", "performer", "--train.lr=1e-3"]) == [
        "--attention.kernel=performer",
        "--train.lr=1e-3",
    ]
    with pytest.raises(ValueError, match="expected an option"):
        normalize_overrides(["stray"])


# -- user errors and output (issue 8, item 12) ---------------------------------------------------


def test_data_list_is_an_aligned_table_with_a_header(capsys, monkeypatch, tmp_path):
    from attnlab.lab.data import DATASETS

    monkeypatch.setenv("ATTNLAB_DATA", str(tmp_path))
    assert main(["data", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[1 : 1 + len(DATASETS)]
    assert header.split() == ["NAME", "LOCAL", "LICENSE", "DESCRIPTION"]
    assert [row.split()[0] for row in rows] == list(DATASETS)
    for column in ("LOCAL", "LICENSE", "DESCRIPTION"):
        start = header.index(column)
        assert all(row[start - 2 : start] == "  " and row[start] != " " for row in rows), column
    assert f"mirror {tmp_path}" in lines[-1] and "$ATTNLAB_DATA" in lines[-1]


def test_an_invalid_json_config_names_the_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"train": {\n  "lr": 1e-3,\n}}\n')
    assert main(["train", "pos", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attnlab train: error: config file {bad}: invalid JSON at line 3")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["train", "pos", "--config", str(binary)]) == 2
    assert f"config file {binary}: not JSON text" in capsys.readouterr().err


def test_an_unusable_cache_names_attnlab_cache(tmp_path, capsys, monkeypatch):
    """No mirror, and ``ATTNLAB_CACHE`` is a file: the error names the variable (and nothing is
    downloaded: the cache directory is created before any download)."""
    cache = tmp_path / "not-a-directory"
    cache.write_text("")
    monkeypatch.setenv("ATTNLAB_DATA", "")
    monkeypatch.setenv("ATTNLAB_CACHE", str(cache))
    assert main(["data", "fetch", "ud-atis"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"$ATTNLAB_CACHE={cache}" in err and "writable directory" in err


def test_verbose_before_or_after_the_subcommand(capsys):
    for argv in (["-v", "tasks"], ["tasks", "-v"], ["tasks", "--verbose"]):
        assert main(argv) == 0
        assert "pos" in capsys.readouterr().out


def test_user_errors_exit_2_ctrl_c_130_and_bugs_keep_their_traceback(monkeypatch, capsys):
    import attnlab.lab.commands

    def raising(error):
        def command(*args, **kwargs):
            raise error

        return command

    monkeypatch.setattr(attnlab.lab.commands, "predict_command", raising(IsADirectoryError(21, "Is a directory", "x")))  # fmt: skip
    assert main(["predict", "ckpt", "a"]) == 2
    assert capsys.readouterr().err == "attnlab predict: error: x: Is a directory\n"
    monkeypatch.setattr(attnlab.lab.commands, "predict_command", raising(KeyboardInterrupt()))
    assert main(["predict", "ckpt", "a"]) == 130
    assert capsys.readouterr().err == "attnlab predict: interrupted\n"
    monkeypatch.setattr(attnlab.lab.commands, "predict_command", raising(ZeroDivisionError("bug")))
    with pytest.raises(ZeroDivisionError):  # a bug in attnlab: its traceback stays
        main(["predict", "ckpt", "a"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_eval_device_cuda_without_cuda_names_the_option(capsys):
    assert main(["eval", "no-such-run", "--device", "cuda"]) == 2
    assert "--device cuda: CUDA is not available" in capsys.readouterr().err


@needs_data
def test_eval_of_several_runs_is_their_ensemble(run_dir, capsys, tmp_path):
    assert main(["eval", str(run_dir)]) == 0
    single = json.loads(capsys.readouterr().out.split(": ", 1)[1])
    # a run ensembled with itself averages equal probabilities: the run's own metrics
    assert main(["eval", str(run_dir), str(run_dir / "best.pt")]) == 0
    out = capsys.readouterr().out
    assert "pos test split (ensemble of 2)" in out
    assert json.loads(out.split(": ", 1)[1]) == single
    # a member that encodes inputs differently is refused, naming both runs
    ckpt = torch.load(run_dir / "best.pt", weights_only=True)
    first = next(k for k, v in ckpt["task"].items() if isinstance(v, list) and len(v) > 2)
    ckpt["task"][first] = ckpt["task"][first][::-1]
    torch.save(ckpt, tmp_path / "other.pt")
    assert main(["eval", str(run_dir), str(tmp_path / "other.pt")]) == 2
    err = capsys.readouterr().err
    assert "other.pt" in err and "encode inputs differently" in err


@needs_data
def test_average_writes_a_checkpoint_that_eval_reads(run_dir, capsys, tmp_path):
    out = tmp_path / "avg.pt"
    assert main(["average", str(run_dir / "best.pt"), str(run_dir / "last.pt"), "--out",
                 str(out)]) == 0  # fmt: skip
    assert capsys.readouterr().out.startswith(f"{out}: the mean of 2 checkpoints (steps ")
    assert main(["eval", str(out)]) == 0
    assert "accuracy" in json.loads(capsys.readouterr().out.split(": ", 1)[1])
    # a name a run directory gives its own checkpoints is refused: resume would read it
    assert main(["average", str(run_dir), str(out), "--out", str(tmp_path / "last.pt")]) == 2
    assert "--out" in capsys.readouterr().err and not (tmp_path / "last.pt").exists()


# -- issue 37: sample inputs, prediction files, help that names the task's flags -----------------


@needs_data
def test_predict_index_picks_a_test_example_and_prints_its_gold(run_dir, capsys):
    assert main(["predict", str(run_dir), "--index", "3"]) == 0
    said, line = capsys.readouterr().out.strip().splitlines()
    assert said.startswith("pos test example 3: gold ") and "/" in line
    gold_words = [pair.rsplit("/", 1)[0] for pair in said.split(": gold ", 1)[1].split()]
    assert [pair.rsplit("/", 1)[0] for pair in line.split()] == gold_words
    assert main(["predict", str(run_dir), "--json", "--index", "0", "--index", "1"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["example"] for r in records] == ["test:0", "test:1"] and "gold" in records[0]
    assert main(["predict", str(run_dir), "--index", "99999"]) == 2
    err = capsys.readouterr().err
    assert "--index 99999: the pos test split has examples 0 to " in err


@needs_data
def test_predict_out_writes_csv_or_jsonl(run_dir, tmp_path, capsys):
    jsonl, table = tmp_path / "p.jsonl", tmp_path / "p.csv"
    assert main(["predict", str(run_dir), "show me flights", "to boston", "--out", str(jsonl)]) == 0
    assert capsys.readouterr().out.strip() == f"{jsonl}: 2 predictions"
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert rows[0]["tokens"] == ["show", "me", "flights"] and len(rows[1]["tags"]) == 2
    assert main(["predict", str(run_dir), "show me flights", "--out", str(table)]) == 0
    header, row = table.read_text().splitlines()
    assert header == "tokens,tags" and row.startswith("show me flights,")
    assert main(["predict", str(run_dir), "x", "--out", str(tmp_path / "p.txt")]) == 2
    assert "--out: expected a .csv or .jsonl file" in capsys.readouterr().err


def test_prediction_files_hold_a_classifier_s_probabilities(tmp_path):
    from attnlab.lab.predictions import write_predictions

    records = [{"file": "a.wav", "label": "7", "probabilities": {"7": 0.9, "1": 0.1}}]
    path = write_predictions(records, tmp_path / "p.csv")
    assert path.read_text().splitlines() == ["file,label,probabilities.7,probabilities.1",
                                             "a.wav,7,0.9,0.1"]  # fmt: skip


@needs_data
def test_predict_and_show_help_name_the_run_s_task_flags(run_dir, capsys):
    assert main(["show", str(run_dir), "--help"]) == 0
    text = capsys.readouterr().out
    assert "--layer" in text and "flags of the task 'pos' (show)" in text and "--index N" in text
    assert main(["predict", "--help"]) == 0
    assert "attnlab predict RUN --help" in capsys.readouterr().out


def test_show_help_of_a_graph_run_lists_node(tmp_path, capsys):
    from attnlab.lab.train import RunConfig, save_config

    save_config(RunConfig.for_task("karate", out_dir=str(tmp_path)))
    assert main(["show", str(tmp_path), "-h"]) == 0
    text = capsys.readouterr().out
    assert "flags of the task 'karate' (show)" in text and "--node NODES" in text


FSDD = Path(MIRROR) / "fsdd"


@pytest.mark.skipif(not FSDD.exists(), reason="needs FSDD in the data mirror")
def test_speech_predict_index_needs_no_wav(tmp_path, capsys):
    os.environ.setdefault("ATTNLAB_DATA", MIRROR)
    out = tmp_path / "fsdd"
    assert main(["train", "fsdd", "--preset", "tiny", f"--out_dir={out}"]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "--index", "2"]) == 0
    said, line = capsys.readouterr().out.strip().splitlines()
    assert said.startswith("fsdd test example 2: gold ") and said[-1].isdigit()
    assert ": " in line  # "FILE: LABEL (p)"
    png = tmp_path / "one.png"
    assert main(["show", str(out), "--index", "2", "--out", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
