"""One's own sequence pairs, no code (issue 37): ``seq2seq`` reads ``source<TAB>target`` lines
(characters or words on each side), groups a source's lines as its references, cuts dev and
test by a seed and keeps them in the run; train -> eval -> predict -> show from the run alone;
a bad file is one line naming the file and line, and nothing is written."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from attnlab.lab.tasks.seq2seq.files import Seq2SeqDataOptions, read_pairs
from attnlab.lab.tasks.seq2seq.generic import UNK_TARGET, Seq2SeqOptions, Seq2SeqTask

TINY = ["--model.dim=16", "--model.heads=2", "--model.encoder_depth=1",
        "--model.decoder_depth=1", "--model.ff_hidden=32", "--train.max_steps=3",
        "--train.eval_every=3", "--train.batch_size=8", "--train.device=cpu",
        "--train.log_every=0"]  # fmt: skip
WORDS = {"one": "un", "two": "deux", "three": "trois", "red": "rouge", "cat": "chat",
         "dog": "chien", "big": "grand", "small": "petit"}  # fmt: skip


def phrases(path: Path, n: int = 40) -> Path:
    """``n`` two-word English phrases TAB their word-by-word French, one repeated with a second
    reference."""
    rng = random.Random(0)
    keys = sorted(WORDS)
    lines = []
    for _ in range(n):
        a, b = rng.sample(keys, 2)
        lines.append(f"{a} {b}\t{WORDS[a]} {WORDS[b]}")
    lines.append(f"{lines[0].split(chr(9))[0]}\tautre chose")
    path.write_text("\n".join(lines) + "\n\n")
    return path


def test_pairs_group_references_and_tokenize_each_side(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("ab\tx y\nab\tx z\n\ncd\t w \n")
    pairs = read_pairs(str(path), ("chars", "whitespace"))
    assert [p.source for p in pairs] == [("a", "b"), ("c", "d")]
    assert pairs[0].targets == (("x", "y"), ("x", "z")) and pairs[1].targets == (("w",),)
    assert pairs[1].where == f"{path}:4"


def test_unseen_target_tokens_of_dev_are_unk(tmp_path):
    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    train.write_text("ab\tx\nba\ty\naa\txx\nbb\tyy\n")
    dev.write_text("ab\tz\n")
    task = Seq2SeqTask()
    task.setup(Seq2SeqOptions(data=Seq2SeqDataOptions(train=str(train), dev=str(dev),
                                                      split=(0.0, 0.25))))  # fmt: skip
    assert task.splits()["dev"][0].prons == ((UNK_TARGET,),)
    assert task.phones[3:] == [UNK_TARGET, "x", "y"] and len(task.splits()["test"]) == 1


def test_seq2seq_round_trip_from_the_run_alone(cli, tmp_path):
    data = phrases(tmp_path / "fr.tsv")
    run = tmp_path / "run"
    ran = cli("train", "seq2seq", f"--data.train={data}", "--data.tokenizer=whitespace",
              "--data.split=0.2,0.2", *TINY, f"--out_dir={run}")  # fmt: skip
    assert ran.rc == 0, ran.err
    manifest = json.loads((run / "data" / "splits.json").read_text())
    distinct = len({line.split("\t")[0] for line in data.read_text().splitlines() if line})
    assert sum(manifest["examples"].values()) == distinct
    kept = [line for s in ("train", "dev", "test")
            for line in (run / "data" / f"{s}.tsv").read_text().splitlines()]  # fmt: skip
    assert sorted(kept) == sorted({line for line in data.read_text().splitlines() if line})
    data.unlink()  # the run must not need the original file

    ran = cli("eval", run, "--split", "test")
    assert ran.rc == 0 and ran.out.startswith('seq2seq test split: {"per"'), ran.err
    ran = cli("predict", run, "red cat", "--index", "0", "--beam", "2", "--json")
    assert ran.rc == 0, ran.err
    records = [json.loads(line) for line in ran.out.splitlines()]
    assert records[-1]["source"] == "red cat" and isinstance(records[-1]["target"], str)
    assert len(records[-1]["nbest"]) == 2
    ran = cli("show", run, "big dog", "--out", tmp_path / "s.png")
    assert ran.rc == 0 and (tmp_path / "s.png").is_file(), ran.err


@pytest.mark.parametrize(
    ("content", "fragments"),
    [
        ("ab\tx\nno tab here\n", ["bad.tsv:2: expected source<TAB>target (one tab), found no tab"]),
        ("ab\tx\ta\n", ["bad.tsv:1: expected source<TAB>target (one tab), found 2 tabs"]),
        ("ab\tx\n\t y\n", ["bad.tsv:2: empty source"]),
        ("\n\n", ["bad.tsv: no pairs (expected source<TAB>target lines)"]),
    ],
)  # fmt: skip
def test_bad_pair_files_are_one_line_and_nothing_is_written(cli, tmp_path, content, fragments):
    (tmp_path / "bad.tsv").write_text(content)
    run = tmp_path / "run"
    cli("train", "seq2seq", f"--data.train={tmp_path / 'bad.tsv'}", *TINY,
        f"--out_dir={run}").user_error("train", *fragments)  # fmt: skip
    assert not run.exists()


def test_seq2seq_without_files_says_what_to_give(cli, tmp_path):
    cli("train", "seq2seq", *TINY, f"--out_dir={tmp_path / 'run'}").user_error(
        "train", "'seq2seq' trains on your own pairs: give --data.train=FILE.tsv"
    )
