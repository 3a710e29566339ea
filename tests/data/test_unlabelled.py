"""Unlabelled text for pre-training: the MASC and treebank readers (on snippets of their
layouts) and the corpora's splits (against the data mirror)."""

from pathlib import Path

import pytest

from attnlab.lab.data import resolve
from attnlab.lab.data.readers.nltk_words import parse_treebank_pos, parse_underscore
from attnlab.lab.data.unlabelled import UNLABELLED_CORPORA, load_unlabelled

needs_mirror = pytest.mark.usefixtures("data_mirror")

TREEBANK = """

[ Pierre/NNP Vinken/NNP ]
,/,
[ 61/CD years/NNS ]
old/JJ ./.

[ Mr./NNP Vinken/NNP ]
is/VBZ *-1/-NONE-
[ 1\\/2/CD ]
======================================
Rest/NN ./.
"""


def test_treebank_sentences_end_at_a_full_stop_or_a_paragraph():
    sentences = list(parse_treebank_pos(TREEBANK))
    assert [s for s, _ in sentences] == [
        ("Pierre", "Vinken", ",", "61", "years", "old", "."),
        ("Mr.", "Vinken", "is", "1/2"),  # trace dropped, slash unescaped, paragraph end
        ("Rest", "."),
    ]
    assert sentences[1][1] == ("NNP", "NNP", "VBZ", "CD")


def test_masc_splits_tokens_at_their_last_underscore():
    text = "Welcome_VB back_RB to_TO our_PRP$ show_NN !_. \n\nsnake_case_NN .\n"
    assert list(parse_underscore(text)) == [
        (("Welcome", "back", "to", "our", "show", "!"), ("VB", "RB", "TO", "PRP$", "NN", ".")),
        (("snake_case", "."), ("NN", "")),
    ]


@pytest.fixture(autouse=True)
def use_mirror(monkeypatch: pytest.MonkeyPatch, data_mirror_or_none: Path | None) -> None:
    monkeypatch.setattr(resolve, "_urlopen", lambda url, timeout: pytest.fail(url))
    if data_mirror_or_none is not None:
        monkeypatch.setenv("ATTNLAB_DATA", str(data_mirror_or_none))


@needs_mirror
@pytest.mark.parametrize(
    "name, sizes",
    [("masc", (29_271, 2_893, 2_369)), ("treebank", (3_197, 442, 370)),
     ("conll2000", (8_043, 893, 2_012))],
)  # fmt: skip
def test_corpora_split_by_document(name, sizes):
    corpus = load_unlabelled(name)
    assert (len(corpus.train), len(corpus.dev), len(corpus.test)) == sizes
    words = {w for s in corpus.train for w in s}
    assert all(isinstance(w, str) and w for w in words)
    if name == "treebank":
        assert not {"[", "]", "*-1"} & words


def test_unknown_corpus_lists_the_valid_ones():
    with pytest.raises(ValueError, match="brown"):
        load_unlabelled("wikipedia")
    assert "masc" in UNLABELLED_CORPORA
