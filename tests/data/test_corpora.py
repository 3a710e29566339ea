"""Tests of attnlab.lab.data.corpora against the data mirror (counts from its README)."""

import hashlib
from collections import Counter
from pathlib import Path

import pytest

from attnlab.lab.data import resolve
from attnlab.lab.data.corpora import (
    SENTENCE_LABELS,
    UNIVERSAL_TAGS,
    UPOS_TAGS,
    brown_document_split,
    load_sentences,
    load_tagging,
    seeded_holdout,
)
from attnlab.lab.data.readers import list_zip_fileids, read_sentences
from attnlab.lab.data.registry import DatasetUnavailable

# Tests that read the mirror through $ATTNLAB_DATA (set by use_mirror); the ``data_mirror``
# fixture (tests/conftest.py) skips them when there is no mirror.
needs_mirror = pytest.mark.usefixtures("data_mirror")


def _no_network(url: str, timeout: float) -> None:
    raise AssertionError(f"the network was touched: {url}")


@pytest.fixture(autouse=True)
def use_mirror(monkeypatch: pytest.MonkeyPatch, data_mirror_or_none: Path | None) -> None:
    """Read from the mirror and never from the network."""
    monkeypatch.setattr(resolve, "_urlopen", _no_network)
    if data_mirror_or_none is not None:
        monkeypatch.setenv("ATTNLAB_DATA", str(data_mirror_or_none))


def _n_tokens(sentences: tuple) -> int:
    return sum(len(tokens) for tokens, _ in sentences)


# -- splitting rules (no data needed) ---------------------------------------------------------------


def test_brown_document_split_is_disjoint_complete_and_seeded() -> None:
    ids = [f"c{c}{i:02d}" for c in "abcdefghij" for i in range(1, 51)]  # 500 ids
    train, dev, test = brown_document_split(ids[::-1])  # input order does not matter
    assert (len(train), len(dev), len(test)) == (400, 50, 50)
    assert sorted(train + dev + test) == sorted(ids)
    assert (train, dev, test) == brown_document_split(ids)
    assert (train, dev, test) != brown_document_split(ids, seed=1)


def test_seeded_holdout_keeps_order_and_is_fixed() -> None:
    items = list(range(100, 200))
    rest, held = seeded_holdout(items)
    assert len(held) == 10 and sorted(rest + held) == items
    assert rest == sorted(rest) and held == sorted(held)
    assert seeded_holdout(items) == (rest, held)


def test_unknown_corpus_or_tagset() -> None:
    with pytest.raises(ValueError, match="corpus must be one of .*brown.*got 'penn'"):
        load_tagging("penn")
    with pytest.raises(ValueError, match="tagset must be one of .*got 'ptb'"):
        load_tagging("brown", "ptb")
    with pytest.raises(ValueError, match="ud-atis has no native"):
        load_tagging("ud-atis", "native")
    with pytest.raises(ValueError, match="name must be one of .*sst2.*got 'imdb'"):
        load_sentences("imdb")


# -- tagging corpora ----------------------------------------------------------------------------------


@needs_mirror
def test_brown_universal() -> None:
    brown = load_tagging("brown")
    splits = (brown.train, brown.dev, brown.test)
    assert brown.tagset_name == "universal"
    assert sum(map(len, splits)) == 57340
    assert sum(map(_n_tokens, splits)) == 1161192
    assert brown.tags() == sorted(UNIVERSAL_TAGS)
    assert all(len(tokens) == len(tags) for split in splits for tokens, tags in split)
    assert load_tagging("brown") is brown  # cached


def test_brown_split_is_by_document_and_pinned(data_mirror: Path) -> None:
    fileids = list_zip_fileids(data_mirror / "nltk" / "brown.zip", "brown", r"c[a-r]\d\d")
    assert len(fileids) == 500
    train, dev, test = brown_document_split(fileids)
    assert not (set(train) & set(dev) or set(train) & set(test) or set(dev) & set(test))
    # Pin the split: a change in the algorithm (or in Python's shuffle) must not go unnoticed.
    assert dev[:3] == ["ca01", "ca08", "ca32"]
    assert hashlib.sha256(" ".join(test).encode()).hexdigest()[:12] == "d446600934ae"
    brown = load_tagging("brown")
    assert (len(brown.train), len(brown.dev), len(brown.test)) == (45397, 6005, 5938)


@needs_mirror
def test_brown_native_tags() -> None:
    brown = load_tagging("brown", "native")
    assert brown.tagset_name == "brown"
    assert len(brown.tags()) == 472
    assert brown.train[0][1][:3] == load_tagging("brown", "native").train[0][1][:3]
    assert {"AT", "NP-TL", "NN-HL", "PPS+BEZ"} <= set(brown.tags())


@needs_mirror
def test_ud_atis() -> None:
    atis = load_tagging("ud-atis")
    assert atis.tagset_name == "upos"
    assert (len(atis.train), len(atis.dev), len(atis.test)) == (4274, 572, 586)
    assert (_n_tokens(atis.train), _n_tokens(atis.dev), _n_tokens(atis.test)) == (
        48655,
        6644,
        6580,
    )
    assert set(atis.tags()) <= set(UPOS_TAGS)


@needs_mirror
def test_ud_ewt_needs_its_unmirrored_train_file() -> None:
    with pytest.raises(DatasetUnavailable, match="en_ewt-ud-train.conllu.*unset ATTNLAB_DATA"):
        load_tagging("ud-ewt")


@needs_mirror
@pytest.mark.parametrize(("tagset", "name"), [("universal", "universal"), ("native", "ptb")])
def test_conll2000(tagset: str, name: str) -> None:
    conll = load_tagging("conll2000", tagset)
    assert conll.tagset_name == name
    assert (len(conll.train), len(conll.dev), len(conll.test)) == (8043, 893, 2012)
    if tagset == "universal":
        assert set(conll.tags()) <= set(UNIVERSAL_TAGS)
    else:
        assert {"NN", "NNP", "VBZ", "DT", "IN", "."} <= set(conll.tags())
    # dev is the end of train.txt, whose first sentence starts "Confidence in the pound".
    assert conll.train[0][0][:3] == ("Confidence", "in", "the")


# -- sentence classification -----------------------------------------------------------------------


@needs_mirror
@pytest.mark.parametrize(
    ("name", "sizes"),
    [("sst2", (6920, 872, 1821)), ("sst5", (8544, 1101, 2210)), ("trec", (4907, 545, 500))],
)
def test_sentence_corpora(name: str, sizes: tuple[int, int, int]) -> None:
    corpus = load_sentences(name)
    assert (len(corpus.train), len(corpus.dev), len(corpus.test)) == sizes
    assert corpus.labels == SENTENCE_LABELS[name]
    for split in (corpus.train, corpus.dev, corpus.test):
        assert {label for _, label in split} == set(range(len(corpus.labels)))
        assert all(tokens for tokens, _ in split)
    assert load_sentences(name) is corpus  # cached


def test_trec_dev_is_a_fixed_part_of_train(data_mirror: Path) -> None:
    trec = load_sentences("trec")
    full = read_sentences(data_mirror / "sentences" / "TREC.train.all")
    # Compare as multisets: TREC's train file repeats 63 questions, so content can overlap.
    assert Counter(trec.train + trec.dev) == Counter(full)
    assert (list(trec.train), list(trec.dev)) == seeded_holdout(full)
    first = ("How", "many", "points", "make", "up", "a", "perfect", "fivepin", "bowling", "score")
    assert trec.dev[0] == ((*first, "?"), SENTENCE_LABELS["trec"].index("NUM"))
