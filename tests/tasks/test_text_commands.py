"""``attnlab train / eval / predict / show`` end to end on the tiny corpus of ``data/``.

A tagger (``pos`` with ``corpus=files``: word/TAG train, CoNLL-U dev, columns test) and a
sentence classifier (``sst2`` on local ``label sentence`` files), trained through the command
line without the dataset mirror (see ``conftest.py``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from attnlab.lab.cli import main

from .conftest import DATA, TINY_MODEL, TINY_TRAIN, classifier_options, tagger_options

PNG = b"\x89PNG\r\n\x1a\n"
TRAIN_TOKENS = 82  # tokens of tagged.train.txt (12 sentences, one per line)
DEV_TOKENS = 18  # tokens of tagged.dev.conllu (3 sentences)
TEST_TOKENS = 17  # tokens of tagged.test.txt (3 sentences)


def _metrics(out: str) -> dict:
    """The JSON metrics of an ``eval`` line ``WHERE: {...}``."""
    return json.loads("{" + out.strip().split(": {", 1)[1])


def test_the_corpus_sizes_the_tests_rely_on():
    train = (DATA / "tagged.train.txt").read_text().split()
    assert len(train) == TRAIN_TOKENS and all("/" in token for token in train)
    conllu = (DATA / "tagged.dev.conllu").read_text().splitlines()
    assert sum(line[:1].isdigit() for line in conllu) == DEV_TOKENS
    assert len((DATA / "tagged.test.txt").read_text().split()) == 2 * TEST_TOKENS


@pytest.fixture(scope="module")
def tagger(tmp_path_factory, no_mirror) -> Path:
    out = tmp_path_factory.mktemp("tagger") / "pos"
    # every word of its 12 sentences gets a vector (pos's default 2 would make most <unk>)
    args = ["train", "pos", *tagger_options(), *TINY_MODEL, *TINY_TRAIN,
            "--task_options.min_count=1", f"--out_dir={out}"]  # fmt: skip
    assert main(args) == 0
    return out


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, no_mirror) -> Path:
    out = tmp_path_factory.mktemp("classifier") / "sst2"
    args = ["train", "sst2", *classifier_options(), *TINY_MODEL, *TINY_TRAIN, f"--out_dir={out}"]
    assert main(args) == 0
    return out


# -- train ---------------------------------------------------------------------------------------


def test_train_writes_the_run_and_reports_the_test_split(tagger, capsys):
    for name in ("config.json", "metrics.csv", "metrics.json", "best.pt", "last.pt"):
        assert (tagger / name).is_file(), name
    cfg = json.loads((tagger / "config.json").read_text())
    assert cfg["task_options"]["corpus"] == "files"
    assert cfg["task_options"]["train_file"].endswith("tagged.train.txt")
    metrics = json.loads((tagger / "metrics.json").read_text())
    assert metrics["test"]["tokens"] == TEST_TOKENS


def test_train_without_files_needs_the_mirror(tmp_path, capsys):
    """The empty mirror is in force: the registered corpus is not found, and the error says so."""
    args = ["train", "sst2", *TINY_MODEL, "--train.epochs=1", f"--out_dir={tmp_path}"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "stsa.binary" in err and "ATTNLAB_DATA" in err


# -- eval ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("split", "tokens"), [("train", TRAIN_TOKENS), ("dev", DEV_TOKENS), ("test", TEST_TOKENS)]
)
def test_eval_on_a_split(tagger, capsys, split, tokens):
    assert main(["eval", str(tagger), "--split", split]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"pos {split} split: ")
    assert _metrics(out)["tokens"] == tokens


def test_the_tagger_learns_its_training_sentences(tagger, capsys):
    """25 epochs over 12 sentences: the tagger fits them (a majority tag would give 0.33)."""
    assert main(["eval", str(tagger / "best.pt"), "--data", str(DATA / "tagged.train.txt")]) == 0
    assert _metrics(capsys.readouterr().out)["accuracy"] >= 0.9


@pytest.mark.parametrize(
    ("name", "tokens"),
    [("tagged.train.txt", TRAIN_TOKENS), ("tagged.dev.conllu", DEV_TOKENS),
     ("tagged.test.txt", TEST_TOKENS)],
)  # fmt: skip
def test_eval_data_reads_every_tagging_format(tagger, capsys, name, tokens):
    assert main(["eval", str(tagger), "--data", str(DATA / name)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{DATA / name}: ")
    assert _metrics(out)["tokens"] == tokens


def test_eval_data_equals_eval_split(tagger, capsys):
    """The test file read by ``--data`` is the test split: the same metrics."""
    main(["eval", str(tagger), "--split", "test"])
    split = _metrics(capsys.readouterr().out)
    main(["eval", str(tagger), "--data", str(DATA / "tagged.test.txt")])
    assert _metrics(capsys.readouterr().out) == split


def test_eval_data_refuses_foreign_empty_and_missing_files(tagger, tmp_path, capsys):
    assert main(["eval", str(tagger), "--data", str(DATA / "sentiment.test.txt")]) == 2
    err = capsys.readouterr().err
    assert "sentiment.test.txt is not a tagging file" in err and "label sentence" in err
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    assert main(["eval", str(tagger), "--data", str(empty)]) == 2
    assert f"{empty}: empty file" in capsys.readouterr().err
    unknown = tmp_path / "unknown.txt"
    unknown.write_text("the/DET saw/SAW\n")
    assert main(["eval", str(tagger), "--data", str(unknown)]) == 2
    assert "['SAW'] are not in the model's tag set" in capsys.readouterr().err
    assert main(["eval", str(tagger), "--data", str(tmp_path / "missing.txt")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_classifier_eval_data_and_its_refusal_of_a_tagging_file(classifier, capsys):
    assert main(["eval", str(classifier), "--data", str(DATA / "sentiment.train.txt")]) == 0
    metrics = _metrics(capsys.readouterr().out)
    assert set(metrics) == {"accuracy", "loss"} and metrics["accuracy"] >= 0.9
    assert main(["eval", str(classifier), "--data", str(DATA / "tagged.dev.conllu")]) == 2
    err = capsys.readouterr().err
    assert "tagged.dev.conllu is not a sentence-classification file" in err
    assert main(["eval", str(classifier), "--split", "dev"]) == 2  # no dev file given
    assert "sst2 dev split: no examples" in capsys.readouterr().err


# -- predict -------------------------------------------------------------------------------------


def test_predict_tags_each_argument_as_eval_scores_them(tagger, capsys):
    """``word/TAG`` per argument; its accuracy on the test sentences is what ``eval`` reports."""
    gold = [
        [line.split() for line in block.splitlines()]
        for block in (DATA / "tagged.test.txt").read_text().strip().split("\n\n")
    ]
    sentences = [" ".join(word for word, _ in sentence) for sentence in gold]
    assert main(["predict", str(tagger), *sentences]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == len(gold)
    hits = 0
    for line, sentence in zip(lines, gold, strict=True):
        pairs = [token.rsplit("/", 1) for token in line.split()]
        assert [w for w, _ in pairs] == [w for w, _ in sentence]
        hits += sum(p == g for (_, p), (_, g) in zip(pairs, sentence, strict=True))
    main(["eval", str(tagger), "--data", str(DATA / "tagged.test.txt")])
    assert _metrics(capsys.readouterr().out)["accuracy"] == round(hits / TEST_TOKENS, 4)


def test_predict_json(tagger, classifier, capsys):
    assert main(["predict", str(tagger), "--json", "a red dog"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["tokens"] == ["a", "red", "dog"] and len(record["tags"]) == 3
    assert main(["predict", str(classifier), "--json", "a great film", "a dull film"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [set(r) for r in records] == [{"tokens", "label", "probabilities"}] * 2
    assert all(r["probabilities"][r["label"]] >= 0.5 for r in records)  # two classes
    assert {r["label"] for r in records} <= {"negative", "positive"}


def test_predict_reads_stdin(classifier, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("i loved this great film .\n\n a dull movie\n"))
    assert main(["predict", str(classifier), "-"]) == 0
    assert capsys.readouterr().out.splitlines() == ["positive", "negative"]


def test_predict_refuses_an_empty_input(tagger, capsys):
    assert main(["predict", str(tagger), "  "]) == 2
    assert "empty input" in capsys.readouterr().err


# -- show ----------------------------------------------------------------------------------------


def test_show_writes_a_png(tagger, classifier, tmp_path, capsys):
    for run in (tagger, classifier):
        png = tmp_path / f"{run.name}.png"
        assert main(["show", str(run), "I", "saw", "a", "saw", ".", "--out", str(png)]) == 0
        assert capsys.readouterr().out.strip() == str(png)
        assert png.read_bytes()[:8] == PNG


@pytest.fixture
def plotted(monkeypatch):
    """The arguments ``TaskCommands.draw`` gives :func:`attnlab.lab.viz.plot_attention`."""
    import attnlab.lab.viz

    calls: list[dict] = []
    monkeypatch.setattr(attnlab.lab.viz, "plot_attention",
                        lambda weights, tokens, out, **kw: calls.append(kw) or Path(out))  # fmt: skip
    return calls


def test_show_puts_the_prediction_in_the_title(tagger, classifier, plotted, tmp_path, capsys):
    for run in (tagger, classifier):
        capsys.readouterr()
        assert main(["predict", str(run), "I saw a saw ."]) == 0
        predicted = capsys.readouterr().out.strip()
        assert main(["show", str(run), "I", "saw", "a", "saw", ".", "--out", str(tmp_path / "x.png")]) == 0  # fmt: skip
        title = plotted[-1]["title"]
        assert title.splitlines() == [f"{run.name}: I saw a saw .", f"predicted: {predicted}"]
        assert plotted[-1]["masked"] is None  # full attention: no pair is masked


def test_show_masks_the_pairs_outside_the_window(tmp_path, plotted, capsys):
    """A windowed encoder never scores ``|i - j| > w``: those pairs are masked, not weight 0."""
    import torch

    out = tmp_path / "pos"
    args = ["train", "pos", *tagger_options(), *TINY_MODEL, *TINY_TRAIN, "--train.epochs=1",
            "--model.encoder.window=1", f"--out_dir={out}"]  # fmt: skip
    assert main(args) == 0
    assert main(["show", str(out), "I", "saw", "a", "saw", ".", "--out", str(tmp_path / "x.png")]) == 0  # fmt: skip
    i = torch.arange(5)
    assert torch.equal(plotted[-1]["masked"], (i[:, None] - i[None, :]).abs() > 1)
    assert plotted[-1]["masked_label"] == "masked pair (|i - j| > 1)"
