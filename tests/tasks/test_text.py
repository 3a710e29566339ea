"""The text tasks' own options and the commands' methods, without training."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.models import ModelConfig
from attnlab.lab.tasks import TASKS
from attnlab.lab.tasks.text import PosTask, SentenceOptions, SST2Task, TaggingOptions

from .conftest import DATA


def _files(**kw) -> TaggingOptions:
    return TaggingOptions(corpus="files", **{k: str(DATA / v) for k, v in kw.items()})


def test_pos_reads_local_files_of_three_formats():
    task = PosTask()
    task.setup(_files(train_file="tagged.train.txt", dev_file="tagged.dev.conllu",
                      test_file="tagged.test.txt"))  # fmt: skip
    splits = task.splits()
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [12, 3, 3]
    assert splits["train"][0] == (
        ("I", "saw", "a", "saw", "."),
        ("PRON", "VERB", "DET", "NOUN", "."),
    )
    assert task.labels == [".", "ADJ", "ADP", "ADV", "CONJ", "DET", "NOUN", "NUM", "PRON", "VERB"]


def test_missing_split_files_give_empty_splits_and_max_train_sentences_applies():
    task = PosTask()
    task.setup(TaggingOptions(corpus="files", train_file=str(DATA / "tagged.train.txt"),
                              max_train_sentences=5))  # fmt: skip
    assert [len(v) for v in task.splits().values()] == [5, 0, 0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (TaggingOptions(corpus="files"), "corpus='files' needs task_options.train_file"),
        (TaggingOptions(train_file="x.txt"), "read only with task_options.corpus='files'"),
        (TaggingOptions(corpus="nope"), "task_options.corpus must be one of"),
        ({"corpus": "files", "trian_file": "x"}, r"unknown task option\(s\) \['trian_file'\]"),
    ],
)
def test_pos_options_errors_name_the_option(options, message):
    with pytest.raises(ValueError, match=message):
        PosTask().setup(options)


def test_sentence_task_reads_local_files_with_its_corpus_labels():
    task = SST2Task()
    task.setup(SentenceOptions(train_file=str(DATA / "sentiment.train.txt"), lowercase=True))
    assert task.labels == ["negative", "positive"]
    assert [len(v) for v in task.splits().values()] == [12, 0, 0]
    with pytest.raises(ValueError, match="dev_file/test_file are read only with"):
        SST2Task().setup(SentenceOptions(test_file=str(DATA / "sentiment.test.txt")))


def test_sentence_labels_outside_the_classes_are_refused(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 fine .\n7 what ?\n")
    with pytest.raises(ValueError, match=r"bad.txt: label 7 is outside the 2 classes of sst2"):
        SST2Task().setup(SentenceOptions(train_file=str(bad)))


def _restored(cls, options):
    """A task as the commands get it: trained vocabularies restored, no data loaded."""
    trained = cls()
    trained.setup(options)
    task = cls()
    task.load_state_dict(trained.state_dict())
    torch.manual_seed(0)
    return task, task.build_model(ModelConfig()).eval()


def test_parse_input_splits_words_and_refuses_empty_text():
    task = TASKS.get("pos")()
    assert task.parse_input("  I saw\ta saw . ") == ["I", "saw", "a", "saw", "."]
    with pytest.raises(ValueError, match=r"'pos': empty input ' \\t '"):
        task.parse_input(" \t ")


def test_read_examples_refuses_foreign_and_empty_files(tmp_path):
    tagger, _ = _restored(PosTask, _files(train_file="tagged.train.txt"))
    classifier, _ = _restored(
        SST2Task, SentenceOptions(train_file=str(DATA / "sentiment.train.txt"))
    )
    with pytest.raises(ValueError, match="sentiment.test.txt is not a tagging file"):
        tagger.read_examples(DATA / "sentiment.test.txt")
    for name in ("tagged.dev.conllu", "tagged.train.txt", "tagged.test.txt"):
        with pytest.raises(ValueError, match=f"{name} is not a sentence-classification file"):
            classifier.read_examples(DATA / name)
    empty = tmp_path / "empty.conllu"
    empty.write_text("# just a comment\n\n")
    for task in (tagger, classifier):
        with pytest.raises(ValueError, match="empty.conllu: empty file"):
            task.read_examples(empty)


def test_records_render_as_text_and_json():
    tagger, model = _restored(PosTask, _files(train_file="tagged.train.txt"))
    (record,) = tagger.predict(model, [tagger.parse_input("a red saw")])
    assert set(record) == {"tokens", "tags"} and len(record["tags"]) == 3
    assert tagger.format_text(record) == " ".join(
        f"{w}/{t}" for w, t in zip(record["tokens"], record["tags"])
    )
    assert tagger.format_json(record).startswith('{"tokens": ["a", "red", "saw"], "tags": [')
    assert tagger.format_text({"label": "positive", "tokens": ["x"]}) == "positive"


def test_attention_map_labels_both_axes_with_the_words():
    tagger, model = _restored(PosTask, _files(train_file="tagged.train.txt"))
    attn = tagger.attention_map(model, ["I", "saw", "a", "saw", "."])
    assert attn.queries == attn.keys == ["I", "saw", "a", "saw", "."]
    assert len(attn.weights) == ModelConfig().encoder.depth
    for w in attn.weights:
        assert w.shape == (ModelConfig().encoder.heads, 5, 5)
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]))  # rows are distributions
