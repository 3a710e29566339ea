"""Masked-language-model pre-training (``mlm``) and fine-tuning from it (``--model.init``), on the
tiny corpus of ``data/`` (no mirror): BERT's masking, the loss on chosen positions only, the
weights a new run starts from, and ``attnlab pretrain mlm`` then ``attnlab train sst2`` end to
end."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attnlab.lab.cli import main
from attnlab.lab.models.masked_lm import MaskedLanguageModel
from attnlab.lab.tasks.text.masking import IGNORE, MaskingRule, mask_ids
from attnlab.lab.tasks.text.mlm import MASK, MLMTask
from attnlab.lab.train import Trainer, load_checkpoint, resolve_config

from .conftest import DATA, TINY_MODEL, classifier_options

TINY_PRETRAIN = ["--task_options.min_count=1", "--train.epochs=2", "--train.batch_size=4",
                 "--train.device=cpu", "--train.log_every=0"]  # fmt: skip


@pytest.fixture(scope="module")
def text_file(tmp_path_factory) -> Path:
    """Unlabelled text: the words of the tiny tagged corpus and of half the sentiment one
    (so the classifier has words the pre-training never saw), one sentence per line."""
    lines = [
        " ".join(t.rpartition("/")[0] for t in line.split())
        for line in (DATA / "tagged.train.txt").read_text().splitlines()
        if line.strip()
    ]
    lines += [line.split(" ", 1)[1] for line in
              (DATA / "sentiment.train.txt").read_text().splitlines()[:6]]  # fmt: skip
    path = tmp_path_factory.mktemp("text") / "text.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _task(text_file: Path, **options) -> MLMTask:
    task = MLMTask()
    task.setup({"train_file": str(text_file), "dev_file": str(text_file), "min_count": 1,
                **options})  # fmt: skip
    return task


# -- masking ---------------------------------------------------------------------------------


def _mask(ids: torch.Tensor, seed: int, **kwargs):
    gen = torch.Generator().manual_seed(seed)
    return mask_ids(ids, generator=gen, mask_id=2, random_ids=(3, 50_003), **kwargs)


def test_bert_masking_statistics():
    """15% of the words chosen (exactly round(0.15 n) per sentence); of those 80% <mask>,
    10% a random word, 10% unchanged; nothing else changes; labels at the chosen only."""
    ids = torch.arange(3, 103)  # 100 distinct words
    chosen = masked = randomised = kept = 0
    for seed in range(400):
        inputs, labels = _mask(ids, seed)
        pick = labels != IGNORE
        assert int(pick.sum()) == 15
        assert torch.equal(labels[pick], ids[pick])
        assert torch.equal(inputs[~pick], ids[~pick])
        chosen += int(pick.sum())
        masked += int((inputs[pick] == 2).sum())
        kept += int((inputs[pick] == ids[pick]).sum())
        randomised += int(((inputs[pick] != 2) & (inputs[pick] != ids[pick])).sum())
    assert chosen == 6000
    assert abs(masked / chosen - 0.8) < 0.02
    assert abs(randomised / chosen - 0.1) < 0.015
    assert abs(kept / chosen - 0.1) < 0.015


def test_masking_is_seeded_and_chooses_only_choosable_words():
    ids = torch.arange(3, 23)
    a, b, c = _mask(ids, 7), _mask(ids, 7), _mask(ids, 8)
    assert torch.equal(a.inputs, b.inputs) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.labels, c.labels)
    choosable = torch.zeros(20, dtype=torch.bool)
    choosable[[4, 9]] = True
    for seed in range(20):
        labels = _mask(ids, seed, choosable=choosable).labels
        assert set((labels != IGNORE).nonzero().flatten().tolist()) <= {4, 9}
    short = _mask(torch.tensor([5, 6]), 0).labels  # round(0.3) = 0, but at least one word
    assert int((short != IGNORE).sum()) == 1
    with pytest.raises(ValueError, match="sum to at most 1"):
        MaskingRule(mask=0.8, random=0.3)


def test_collate_masks_a_sentence_the_same_whatever_its_batch(text_file):
    task = _task(text_file)
    dev = task.splits()["dev"]
    whole = task.collate(dev[:6])
    again = task.collate(dev[:6])
    assert torch.equal(whole["tokens"], again["tokens"])
    assert torch.equal(whole["labels"], again["labels"])
    alone = task.collate(dev[3:4])
    n = int(alone["lengths"][0])
    assert torch.equal(alone["tokens"][0, :n], whole["tokens"][3, :n])
    assert torch.equal(alone["labels"][0, :n], whole["labels"][3, :n])
    # shown words: <mask> where masked, never the hidden word's characters
    assert (whole["tokens"] == task.vocab.index(MASK)).any()
    assert (whole["labels"] != IGNORE).sum() >= len(dev[:6])
    other = _task(text_file, seed=1).collate(dev[:6])
    assert not torch.equal(other["labels"], whole["labels"])


def test_the_loss_counts_the_chosen_positions_only(text_file):
    task = _task(text_file)
    model = task.build_model(task.default_model_config())
    assert isinstance(model, MaskedLanguageModel)
    assert model.head.decoder.weight is model.inputs.embed.weight  # tied
    model.eval()
    batch = task.collate(task.splits()["train"][:4])
    loss, units = task.loss(model, batch)
    chosen = batch["labels"] != IGNORE
    assert units == int(chosen.sum())
    full = model({k: v for k, v in batch.items() if k != "labels"})  # (b, n, V)
    expected = F.cross_entropy(full[chosen], batch["labels"][chosen], reduction="sum")
    torch.testing.assert_close(loss, expected)
    metrics = task.evaluate(model, [batch])
    assert set(metrics) == {"accuracy", "loss", "perplexity"}
    assert metrics["perplexity"] == pytest.approx(torch.exp(expected / units).item(), rel=1e-4)


# -- fine-tuning from it ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, text_file, no_mirror) -> Path:
    out = tmp_path_factory.mktemp("pretrain") / "mlm"
    args = ["pretrain", "mlm", f"--task_options.train_file={text_file}",
            f"--task_options.dev_file={text_file}", *TINY_MODEL, *TINY_PRETRAIN,
            f"--out_dir={out}"]  # fmt: skip
    assert main(args) == 0
    return out


def _fine_tuner(out: Path, init: str, *extra: str) -> Trainer:
    overrides = [*classifier_options(), *TINY_MODEL, f"--model.init={init}",
                 "--train.device=cpu", *extra]  # fmt: skip
    cfg = resolve_config(task="sst2", overrides=overrides)
    cfg.out_dir = str(out)
    return Trainer("sst2", cfg, progress=False)


def test_predict_index_hides_the_words_the_evaluation_hides(pretrained, capsys):
    from attnlab.lab.train.checkpoint import load_for_inference

    task = load_for_inference(pretrained, setup=True)[0]
    tokens, key = task.splits()["test"][0]
    shown, gold = task.example_input((tokens, key))
    batch = task.collate([(tokens, key)])
    hidden = (batch["labels"][0, : len(tokens)] != IGNORE).tolist()
    assert [t == "<mask>" for t in shown] == hidden and any(hidden)
    assert gold == " ".join(tokens)
    assert main(["predict", str(pretrained), "--index", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"mlm test example 0: gold {gold}"
    filled = out[1].split()
    assert len(filled) == len(tokens)
    assert [f for f, h in zip(filled, hidden) if not h] == [
        t for t, h in zip(tokens, hidden) if not h
    ]


def test_init_copies_the_encoder_and_remaps_the_embedding_by_word(pretrained, tmp_path):
    ckpt = load_checkpoint(pretrained / "best.pt")
    source = ckpt["model"]
    trainer = _fine_tuner(tmp_path / "ft", str(pretrained))
    try:
        target = trainer.model.state_dict()
        encoder = [n for n in target if n.startswith("encoder.")]
        assert encoder and all(torch.equal(target[n], source[n]) for n in encoder)
        mlm_vocab = MLMTask()
        mlm_vocab.load_state_dict(ckpt["task"])
        vocab, pre = trainer.task.vocab, mlm_vocab.vocab
        moved = [w for w in vocab.tokens[2:] if w in pre and pre.index(w) != vocab.index(w)]
        assert moved, "the test needs a word at different ids in the two vocabularies"
        for word in vocab.tokens:
            if word in pre:
                row = source["inputs.embed.weight"][pre.index(word)]
                assert torch.equal(target["inputs.embed.weight"][vocab.index(word)], row), word
        report = trainer.init_report
        hit, total = report.remapped["inputs.embed.weight"]
        assert total == len(vocab) and hit == sum(w in pre for w in vocab.tokens) < total
        assert {"head.proj.weight", "head.proj.bias"} <= set(report.fresh)
        assert "head.decoder.bias" in report.unused
    finally:
        trainer.close()


def test_words_the_pretraining_never_saw_keep_their_fresh_rows(pretrained, tmp_path):
    pre = MLMTask()
    pre.load_state_dict(load_checkpoint(pretrained / "best.pt")["task"])
    fresh = _fine_tuner(tmp_path / "a", "", "--train.seed=3")
    loaded = _fine_tuner(tmp_path / "b", str(pretrained), "--train.seed=3")
    try:
        vocab = loaded.task.vocab
        unseen = [w for w in vocab.tokens if w not in pre.vocab]
        assert unseen
        for word in unseen:
            i = vocab.index(word)
            assert torch.equal(
                loaded.model.inputs.embed.weight[i], fresh.model.inputs.embed.weight[i]
            )
        assert torch.equal(loaded.model.head.proj.weight, fresh.model.head.proj.weight)
    finally:
        fresh.close()
        loaded.close()


def test_resuming_never_reads_the_init_checkpoint_again(pretrained, tmp_path):
    """--resume continues from last.pt: the checkpoint named by model.init may be gone."""
    copy = tmp_path / "pre.pt"
    copy.write_bytes((pretrained / "best.pt").read_bytes())
    first = _fine_tuner(tmp_path / "ft", str(copy), "--train.max_steps=2", "--train.epochs=1")
    assert first.init_report is not None
    first.fit()
    steps = first.state.step
    copy.unlink()
    overrides = [*classifier_options(), *TINY_MODEL, f"--model.init={copy}",
                 "--train.device=cpu", "--train.max_steps=2", "--train.epochs=1"]  # fmt: skip
    cfg = resolve_config(task="sst2", overrides=overrides)
    cfg.out_dir = str(tmp_path / "ft")
    again = Trainer("sst2", cfg, resume=True, progress=False)
    try:
        assert again.init_report is None and again.state.step == steps > 0
    finally:
        again.close()


def test_init_refuses_a_shape_mismatch_naming_the_parameter(pretrained, tmp_path):
    expected = (
        r"parameter encoder\.encoder\.blocks\.0\.ff\.fc1\.weight: the checkpoint's has "
        r"shape \(64, 32\), this model's \(48, 32\)"
    )
    with pytest.raises(ValueError, match=expected):
        _fine_tuner(tmp_path / "ft", str(pretrained), "--model.encoder.ff_hidden=48")
    with pytest.raises(FileNotFoundError):
        _fine_tuner(tmp_path / "ft2", str(tmp_path / "nothing-here"))


def test_pretrain_then_fine_tune_end_to_end(pretrained, tmp_path, caplog, capsys):
    assert (pretrained / "best.pt").is_file()
    out = tmp_path / "sst2"
    args = ["train", "sst2", *classifier_options(), *TINY_MODEL, f"--model.init={pretrained}",
            "--train.max_steps=3", "--train.batch_size=4", "--train.device=cpu",
            f"--out_dir={out}"]  # fmt: skip
    with caplog.at_level(logging.INFO):
        assert main(args) == 0
    log = caplog.text
    assert "model.init:" in log and "inputs.embed.weight:" in log and "left fresh" in log
    assert (out / "best.pt").is_file()
    capsys.readouterr()
    assert main(["predict", str(pretrained), f"the {MASK} is great ."]) == 0
    filled = capsys.readouterr().out.split()
    assert len(filled) == 5 and filled[1] != MASK
    png = tmp_path / "mlm.png"
    assert main(["show", str(pretrained), "the film is great .", "--out", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_pretrain_names_only_pretraining_tasks(capsys):
    with pytest.raises(SystemExit):
        main(["pretrain", "sst2"])
    assert "invalid choice" in capsys.readouterr().err
