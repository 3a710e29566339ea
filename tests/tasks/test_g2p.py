"""The ``g2p`` task: the split by word, a tiny end-to-end train / predict / show through the
command line on ``data/cmudict.tiny.dict``, and the refusal of bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from attnlab.lab.cli import main
from attnlab.lab.data.readers.cmudict import Lexicon, read_cmudict
from attnlab.lab.tasks.seq2seq import MAX_OUTPUT, G2PTask, split_lexicon

from .conftest import DATA

PNG = b"\x89PNG\r\n\x1a\n"
TINY_DICT = DATA / "cmudict.tiny.dict"
TINY_G2P = [
    f"--task_options.dict_file={TINY_DICT}", "--model.dim=32", "--model.heads=2",
    "--model.encoder_depth=1", "--model.decoder_depth=1", "--model.dropout=0.0",
    "--train.epochs=8", "--train.batch_size=8", "--train.lr=1e-2", "--train.warmup_fraction=0.05",
    "--train.device=cpu", "--train.log_every=0",
]  # fmt: skip


def synthetic_lexicon(n: int) -> Lexicon:
    """``n`` words, every third with two pronunciations."""
    entries = {
        f"w{i:04d}".replace("0", "o").replace("1", "l"): (("A",), ("B",)) if i % 3 else (("A",),)
        for i in range(n)
    }
    return Lexicon(entries, dropped=0, version="", stress=False)


def test_split_is_by_word_seeded_and_90_5_5():
    lex = synthetic_lexicon(1000)
    splits = split_lexicon(lex, seed=3)
    words = {name: {ex.word for ex in split} for name, split in splits.items()}
    assert [len(words[s]) for s in ("train", "dev", "test")] == [900, 50, 50]
    assert not (words["train"] & words["dev"] or words["train"] & words["test"]
                or words["dev"] & words["test"])  # fmt: skip
    assert set().union(*words.values()) == set(lex.entries)
    for split in splits.values():  # every alternate of a word travels with it
        assert all(ex.prons == lex.entries[ex.word] for ex in split)
    assert split_lexicon(lex, seed=3) == splits
    assert split_lexicon(lex, seed=4)["dev"] != splits["dev"]
    with pytest.raises(ValueError, match="summing to 1"):
        split_lexicon(lex, fractions=(0.9, 0.2, 0.1))


def test_task_trains_on_each_alternate_and_scores_words_once():
    task = G2PTask()
    task.setup({"dict_file": str(TINY_DICT)})
    lex = read_cmudict(TINY_DICT)
    words = {s: [ex.word for ex in task._splits[s]] for s in ("train", "dev", "test")}
    splits = task.splits()
    assert len(splits["train"]) == sum(len(lex.entries[w]) for w in words["train"])
    assert all(len(ex.prons) == 1 for ex in splits["train"])
    assert [ex.word for ex in splits["dev"]] == words["dev"]
    assert task.source["dropped_words"] == 2 and len(task.phones) == 3 + len(lex.phones())
    batch = task.collate(splits["dev"])
    assert set(batch) == {"src", "lengths", "tgt_in", "tgt_out", "refs"}
    assert (batch["tgt_in"][:, 0] == 1).all()  # <bos>
    assert ((batch["tgt_out"] == 2).sum(1) == 1).all()  # one <eos> per word


@pytest.fixture(scope="module")
def g2p_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("g2p") / "run"
    assert main(["train", "g2p", *TINY_G2P, f"--out_dir={out}"]) == 0
    return out


def test_train_reports_per_and_wer(g2p_run):
    metrics = json.loads((g2p_run / "metrics.json").read_text())
    test = metrics["test"]
    assert 0.0 <= test["wer"] <= 1.0 and test["per"] >= 0.0 and test["words"] == 3


def test_training_lowers_the_loss_and_predict_names_every_word(g2p_run, capsys):
    rows = (g2p_run / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    losses = [float(r.split(",")[header.index("train_loss")]) for r in rows[1:]]
    assert len(losses) == 8 and losses[-1] < 0.8 * losses[0]
    task = G2PTask()
    task.setup({"dict_file": str(TINY_DICT)})
    words = [ex.word for ex in task._splits["train"][:10]]
    assert main(["predict", str(g2p_run), *words]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == words
    phones = set(task.phones[3:])
    assert all(line.split("\t")[1].split() and set(line.split("\t")[1].split()) <= phones
               for line in lines)  # fmt: skip


def test_predict_index_takes_a_test_word_and_prints_its_pronunciations(g2p_run, capsys):
    task = G2PTask()
    task.setup({"dict_file": str(TINY_DICT)})
    word = task.splits()["test"][1]
    assert main(["predict", str(g2p_run), "--index", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    gold = " | ".join(" ".join(pron) for pron in word.prons)
    assert out[0] == f"g2p test example 1: gold {gold}"
    assert out[1].split("\t")[0] == word.word


def test_predict_json_lists_the_sorted_nbest(g2p_run, capsys):
    assert main(["predict", str(g2p_run), "Cats", "dog", "--beam", "3", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["word"] for r in records] == ["cats", "dog"]
    for r in records:
        assert len(r["nbest"]) == 3 and r["phones"] == r["nbest"][0]["phones"]
        scores = [h["score"] for h in r["nbest"]]
        assert scores == sorted(scores, reverse=True) and r["score"] == scores[0]


def test_show_draws_the_cross_attention(g2p_run, tmp_path, capsys):
    png = tmp_path / "cats.png"
    assert main(["show", str(g2p_run), "cats", "--out", str(png)]) == 0
    assert capsys.readouterr().out.strip() == str(png)
    assert png.read_bytes()[:8] == PNG


def test_attention_map_axes_are_phones_by_letters(g2p_run):
    from attnlab.lab.commands import load_for_inference

    task, model, _ = load_for_inference(str(g2p_run))
    attn = task.attention_map(model, "cats")
    assert attn.keys == list("cats") and attn.queries[-1] == "<eos>"
    assert [w.shape for w in attn.weights] == [(2, len(attn.queries), 4)]


@pytest.mark.parametrize(("word", "message"), [("  ", "empty word"), ("two words", "one word")])
def test_predict_refuses_bad_words(g2p_run, capsys, word, message):
    assert main(["predict", str(g2p_run), word]) == 2
    assert message in capsys.readouterr().err


def test_unseen_characters_are_unknown_with_a_warning(g2p_run, capsys):
    with pytest.warns(UserWarning, match=r"never seen in training.*<unk>"):
        assert main(["predict", str(g2p_run), "caté"]) == 0
    assert capsys.readouterr().out.startswith("caté\t")


def test_a_500_letter_word_stops_at_the_maximum_length(g2p_run, capsys):
    assert main(["predict", str(g2p_run), "ab" * 250, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert 1 <= len(record["phones"]) <= MAX_OUTPUT - 1  # the last token is <eos>


def test_predict_refuses_a_bad_beam(g2p_run, capsys):
    assert main(["predict", str(g2p_run), "cats", "--beam", "0"]) == 2
    assert "--beam must be a positive integer" in capsys.readouterr().err


def _tiny_task_and_model(**model):
    from attnlab.lab.models.seq2seq import Seq2SeqConfig

    task = G2PTask()
    task.setup({"dict_file": str(TINY_DICT)})
    tiny = {"dim": 32, "heads": 2, "encoder_depth": 1, "decoder_depth": 1, "dropout": 0.0}
    cfg = Seq2SeqConfig(**{**tiny, **model})
    return task, task.build_model(cfg)


def test_model_init_copies_every_weight_of_a_g2p_run(g2p_run):
    from attnlab.lab.train.checkpoint import load_checkpoint
    from attnlab.lab.train.init import init_from_checkpoint

    task, model = _tiny_task_and_model()
    report = init_from_checkpoint(task, model, g2p_run, log=False)
    source = load_checkpoint(g2p_run / "best.pt", map_location="cpu")["model"]
    assert not report.fresh and not report.unused
    state = model.state_dict()
    assert state.keys() == source.keys()
    assert all(torch.equal(state[k], source[k]) for k in state)


def test_model_init_starts_a_new_run_with_a_fresh_schedule(g2p_run, tmp_path):
    out = tmp_path / "stage2"
    argv = ["train", "g2p", *TINY_G2P, f"--model.init={g2p_run}", "--train.epochs=1",
            f"--out_dir={out}"]  # fmt: skip
    assert main(argv) == 0
    first = (g2p_run / "metrics.csv").read_text().splitlines()
    second = (out / "metrics.csv").read_text().splitlines()
    loss = first[0].split(",").index("train_loss")
    # one epoch from the trained weights starts where the first run ended, far below its start
    assert float(second[1].split(",")[loss]) < float(first[1].split(",")[loss])
    assert len(second) == 2  # its own one-epoch schedule, not the source's


def test_model_init_refuses_another_model_or_vocabulary(g2p_run):
    from attnlab.lab.train.init import init_from_checkpoint

    task, model = _tiny_task_and_model(dim=16, heads=2)
    with pytest.raises(ValueError, match=r"model.init=.*src_embed.weight.*shape"):
        init_from_checkpoint(task, model, g2p_run, log=False)
    task, model = _tiny_task_and_model(decoder_depth=2)
    with pytest.raises(ValueError, match=r"model has \d+ weight.*decoder.blocks.1"):
        init_from_checkpoint(task, model, g2p_run, log=False)
    task, model = _tiny_task_and_model()
    task.phones = task.phones[:-1]
    with pytest.raises(ValueError, match="the checkpoint's phones differ"):
        init_from_checkpoint(task, model, g2p_run, log=False)
    with pytest.raises(ValueError, match="no phones"):
        task.load_pretrained(model, model.state_dict(), {"vocab": {}})
