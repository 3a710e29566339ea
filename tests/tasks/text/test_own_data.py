"""A user's own files, no code (issue 37): ``--data.train/dev/test`` for the text tasks and the
generic ``text-tag`` / ``text-classify`` tasks; the seeded cut of dev and test, saved in the
run; train -> eval -> predict -> show from the run alone (the original file moved away); a bad
file is one line naming the file and the line, and nothing is written."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from attnlab.lab.tasks.text import PosTask, SST2Task
from attnlab.lab.tasks.text.files import DataOptions
from attnlab.lab.tasks.text.generic import TextClassifyOptions, TextClassifyTask, TextTagTask

from ..conftest import TINY_MODEL

TINY = ["--preset", "tiny", "--train.device=cpu", "--train.max_steps=3", "--train.eval_every=3",
        "--train.batch_size=8", *TINY_MODEL]  # fmt: skip
POSITIVE, NEGATIVE = ["good", "great", "fine", "lovely"], ["bad", "awful", "dull", "poor"]


def reviews(path: Path, n: int = 40, seed: int = 0) -> Path:
    """A CSV of ``n`` sentences labelled ``pos`` / ``neg`` in columns ``sentence``, ``stars``."""
    rng = random.Random(seed)
    lines = ["id,sentence,stars"]
    for i in range(n):
        label = rng.choice(["pos", "neg"])
        words = rng.sample(POSITIVE if label == "pos" else NEGATIVE, 2)
        lines.append(f"{i},a {' '.join(words)} film,{label}")
    path.write_text("\n".join(lines) + "\n")
    return path


def tagged(path: Path, n: int = 30) -> Path:
    """``n`` sentences as ``word<TAB>tag`` lines, a blank line between sentences."""
    rng = random.Random(1)
    words = [[("the", "DET"), (rng.choice(["dog", "cat"]), "NOUN"), (rng.choice(["runs", "sits"]), "VERB")]
             for _ in range(n)]  # fmt: skip
    path.write_text("".join("".join(f"{w}\t{t}\n" for w, t in s) + "\n" for s in words))
    return path


def test_text_classify_round_trip_from_the_run_alone(cli, tmp_path):
    data = reviews(tmp_path / "reviews.csv")
    run = tmp_path / "run"
    ran = cli("train", "text-classify", f"--data.train={data}", "--data.text_column=sentence",
              "--data.label_column=stars", *TINY, f"--out_dir={run}")  # fmt: skip
    assert ran.rc == 0, ran.err
    manifest = json.loads((run / "data" / "splits.json").read_text())
    assert manifest["examples"] == {"train": 32, "dev": 4, "test": 4}
    assert manifest["sources"]["dev"].startswith(f"cut from {data}")
    first = json.loads((run / "data" / "test.jsonl").read_text().splitlines()[0])
    assert set(first) == {"text", "label"} and first["label"] in ("pos", "neg")
    data.rename(tmp_path / "elsewhere.csv")  # the run must not need the original file

    ran = cli("eval", run, "--split", "test")
    assert ran.rc == 0 and ran.out.startswith("text-classify test split: {"), ran.err
    other = reviews(tmp_path / "more.csv", n=6, seed=3)
    ran = cli("eval", run, "--data", other)
    assert ran.rc == 0 and ran.out.startswith(f"{other}: "), ran.err
    ran = cli("predict", run, "a lovely film", "--index", "0", "--json")
    assert ran.rc == 0, ran.err
    records = [json.loads(line) for line in ran.out.splitlines()]
    assert records[0]["example"] == "test:0" and records[0]["gold"] == first["label"]
    assert set(records[1]["probabilities"]) == {"neg", "pos"}
    ran = cli("show", run, "--index", "1", "--out", tmp_path / "a.png")
    assert ran.rc == 0 and (tmp_path / "a.png").is_file(), ran.err


def test_text_tag_round_trip_from_the_run_alone(cli, tmp_path):
    data = tagged(tmp_path / "tags.tsv")
    run = tmp_path / "run"
    assert cli("train", "text-tag", f"--data.train={data}", *TINY, f"--out_dir={run}").rc == 0
    assert (run / "data" / "dev.tsv").read_text().count("\n\n") == 3  # 10% of 30 sentences
    data.unlink()
    ran = cli("predict", run, "the cat sits", "--index", "0")
    assert ran.rc == 0 and "text-tag test example 0: gold the/DET" in ran.out, ran.err
    assert cli("eval", run, "--split", "dev").rc == 0
    assert cli("show", run, "the dog runs", "--out", tmp_path / "t.png").rc == 0


def test_the_seeded_cut_is_reproducible_and_kept_in_the_run(tmp_path):
    data = reviews(tmp_path / "r.csv", n=50)

    def setup(seed: int) -> TextClassifyTask:
        task = TextClassifyTask()
        task.setup(TextClassifyOptions(data=DataOptions(
            train=str(data), split=(0.2, 0.1), seed=seed, text_column="sentence",
            label_column="stars")))  # fmt: skip
        return task

    a, b, c = setup(0), setup(0), setup(1)
    assert [len(a.splits()[s]) for s in ("train", "dev", "test")] == [35, 10, 5]
    assert a.splits() == b.splits() and a.splits()["dev"] != c.splits()["dev"]
    a.save_run_data(tmp_path / "run")
    data.unlink()
    again = TextClassifyTask()
    again.load_state_dict(a.state_dict())
    again.load_run_data(tmp_path / "run")
    again.setup(TextClassifyOptions(data=DataOptions(train=str(data))))  # the file is gone
    assert again.splits() == a.splits() and again.labels == ["neg", "pos"]


def test_given_dev_is_kept_and_only_test_is_cut(tmp_path):
    train, dev = reviews(tmp_path / "train.csv", n=20), reviews(tmp_path / "dev.csv", n=5, seed=4)
    task = TextClassifyTask()
    task.setup({"data": {"train": str(train), "dev": str(dev), "split": [0.25, 0.25],
                         "text_column": "sentence", "label_column": "stars"}})  # fmt: skip
    assert [len(task.splits()[s]) for s in ("train", "dev", "test")] == [15, 5, 5]


def test_a_directory_holds_the_splits(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name in ("my-train.tsv", "my-dev.tsv", "my-test.tsv"):
        tagged(folder / name, n=5)
    task = TextTagTask()
    task.setup({"data": {"train": str(folder)}})
    assert [len(task.splits()[s]) for s in ("train", "dev", "test")] == [5, 5, 5]
    assert task.labels == ["DET", "NOUN", "VERB"]


def test_pos_reads_conllu_xpos_and_sst2_reads_class_names_or_numbers(tmp_path):
    conllu = tmp_path / "t.conllu"
    conllu.write_text("".join(f"1\tA\ta\tDET\tDT\t_\t0\troot\t_\t_\n2\tcat{i}\tc\tNOUN\tNN\t_\t1\tx\t_\t_\n\n"
                              for i in range(10)))  # fmt: skip
    pos = PosTask()
    pos.setup({"data": {"train": str(conllu), "column": "xpos"}})
    assert pos.labels == ["DT", "NN"] and len(pos.splits()["dev"]) == 1
    table = tmp_path / "s.jsonl"
    table.write_text("".join(json.dumps({"text": f"w{i}", "label": lab}) + "\n"
                             for i, lab in enumerate(["positive", "negative", "1", "0"] * 3)))  # fmt: skip
    sst2 = SST2Task()
    sst2.setup({"data": {"train": str(table), "split": [0, 0]}})
    assert sst2.labels == ["negative", "positive"]
    assert [y for _, y in sst2.splits()["train"][:4]] == [1, 0, 1, 0]


@pytest.mark.parametrize(
    ("task", "files", "fragments"),
    [
        ("text-classify", {"train": "train.csv", "dev": "unseen.csv"},
         ["unseen.csv: label 'meh' is not one of the labels of the train file (neg, pos), at line 3"]),
        ("sst2", {"train": "sst.csv"}, ["sst.csv: label 'meh' is not one of the labels", "at line 5"]),
        ("text-classify", {"train": "nocol.csv"},
         ["nocol.csv:1: the header has no column 'label' (columns: text, stars)", "--data.label_column"]),
        ("text-classify", {"train": "empty.csv"}, ["empty.csv: empty file"]),
        ("text-tag", {"train": "t.tsv", "test": "newtag.tsv"},
         ["newtag.tsv:2: tag 'ADV' is not a tag of the train file", "(it has DET, NOUN, VERB); --data.unseen=keep keeps it"]),
        ("text-tag", {"train": "broken.conllu"}, ["broken.conllu:2: expected 10 tab-separated CoNLL-U"]),
        ("text-tag", {}, ["'text-tag' trains on your own files: give --data.train=FILE"]),
    ],
)  # fmt: skip
def test_bad_files_are_one_line_naming_file_and_line_and_nothing_is_written(
    cli, tmp_path, task, files, fragments
):
    rows = "\n".join(f"{w} film,{lab}" for w, lab in [("good", "pos"), ("bad", "neg")] * 10)
    (tmp_path / "train.csv").write_text(f"text,label\n{rows}\n")
    (tmp_path / "unseen.csv").write_text("text,label\nok film,pos\nmeh film,meh\n")
    (tmp_path / "sst.csv").write_text(
        "text,label\n" + "good,positive\n" * 3 + "meh,meh\n" + "bad,0\n" * 9
    )
    (tmp_path / "nocol.csv").write_text("text,stars\ngood,5\n")
    (tmp_path / "empty.csv").write_text("")
    tagged(tmp_path / "t.tsv")
    (tmp_path / "newtag.tsv").write_text("the\tDET\nquickly\tADV\n")
    (tmp_path / "broken.conllu").write_text("1\tA\ta\tDET\t_\t_\t0\troot\t_\t_\n2 cat\n")
    options = [f"--data.{split}={tmp_path / name}" for split, name in files.items()]
    run = tmp_path / "run"
    cli("train", task, *options, *TINY, f"--out_dir={run}").user_error("train", *fragments)
    assert not run.exists()


def test_unseen_keep_adds_the_dev_and_test_labels_as_classes_never_trained_on(tmp_path, caplog):
    tagged(tmp_path / "t.tsv", n=10)
    (tmp_path / "new.tsv").write_text("the\tDET\nquickly\tADV\n\na\tDET\n!\tPUNCT\n")
    tagger = TextTagTask()
    tagger.setup({"data": {"train": str(tmp_path / "t.tsv"), "test": str(tmp_path / "new.tsv"),
                           "unseen": "keep"}})  # fmt: skip
    assert tagger.labels == ["DET", "NOUN", "VERB", "ADV", "PUNCT"]  # train's, then the new
    assert "tag(s) 'ADV', 'PUNCT' of the dev/test files are not in the train file" in caplog.text
    (tmp_path / "dev.csv").write_text("id,sentence,stars\n0,ok film,meh\n1,good film,pos\n")
    classifier = TextClassifyTask()
    classifier.setup(
        {
            "data": {
                "train": str(reviews(tmp_path / "r.csv")),
                "dev": str(tmp_path / "dev.csv"),
                "text_column": "sentence",
                "label_column": "stars",
                "unseen": "keep",
            }
        }
    )
    assert classifier.labels[-1] == "meh" and classifier.splits()["dev"][0][1] == 2
    # a corpus task's digit labels are its classes' indices, never new classes
    (tmp_path / "sst.jsonl").write_text("".join(json.dumps({"text": f"w{i}", "label": lab}) + "\n"
                                        for i, lab in enumerate(["positive", "negative"] * 4)))  # fmt: skip
    (tmp_path / "sst-dev.jsonl").write_text(
        '{"text": "w", "label": "1"}\n{"text": "v", "label": "0"}\n'
    )
    sst2 = SST2Task()
    sst2.setup({"data": {"train": str(tmp_path / "sst.jsonl"), "dev": str(tmp_path / "sst-dev.jsonl"),
                         "split": [0, 0.25], "unseen": "keep"}})  # fmt: skip
    assert sst2.labels == ["negative", "positive"]
    assert [y for _, y in sst2.splits()["dev"]] == [1, 0]
    with pytest.raises(ValueError, match="data.unseen: error or keep, got 'skip'"):
        DataOptions(unseen="skip")


def test_help_lists_the_data_options_and_other_tasks_refuse_them(cli):
    ran = cli("train", "text-classify", "--help")
    assert "data (task_options.data): " in ran.out and "  --data.train str" in ran.out
    assert "  --data.split float,float  (default: [0.1, 0.1])" in ran.out
    cli("train", "karate", "--data.train=x.csv").user_error(
        "train", "the 'karate' task reads no files of yours"
    )


def test_resume_reads_the_splits_the_run_kept(cli, tmp_path):
    data = reviews(tmp_path / "r.csv")
    run = tmp_path / "run"
    assert cli("train", "text-classify", f"--data.train={data}", "--data.text_column=sentence",
               "--data.label_column=stars", *TINY, f"--out_dir={run}").rc == 0  # fmt: skip
    kept = (run / "data" / "dev.jsonl").read_text()
    data.unlink()
    ran = cli("train", "text-classify", f"--data.train={data}", "--data.text_column=sentence",
              "--data.label_column=stars", *TINY, "--train.max_steps=5", "--resume",
              f"--out_dir={run}")  # fmt: skip
    assert ran.rc == 0, ran.err
    assert (run / "data" / "dev.jsonl").read_text() == kept
