"""Vocabularies and batch encoding: ids, unknown words, JSON round trips, padding."""

from __future__ import annotations

import json

import pytest
import torch

from attnlab.lab.models import (
    PAD_ID,
    UNK_ID,
    WORD_SHAPES,
    CharVocabulary,
    Vocabulary,
    encode_batch,
    word_shape,
)

SENTENCES = [["the", "cat", "sat"], ["the", "dog", "sat"], ["The", "cat", "ran"]]


def test_specials_come_first_then_tokens_by_frequency():
    v = Vocabulary.build(SENTENCES)
    assert v.tokens[:2] == ["<pad>", "<unk>"]
    assert v.index("<pad>") == PAD_ID == 0 and v.index("<unk>") == UNK_ID == 1
    # the (2) and sat (2) and cat (2) tie -> alphabetical; then the singletons alphabetically
    assert v.tokens[2:] == ["cat", "sat", "the", "The", "dog", "ran"]


def test_min_count_max_size_and_unknown_words():
    v = Vocabulary.build(SENTENCES, min_count=2)
    assert v.tokens[2:] == ["cat", "sat", "the"]
    assert v.encode(["the", "dog", "zebra"]) == [v.index("the"), UNK_ID, UNK_ID]
    assert "dog" not in v and "cat" in v
    small = Vocabulary.build(SENTENCES, max_size=4)
    assert len(small) == 4 and small.tokens == ["<pad>", "<unk>", "cat", "sat"]
    with pytest.raises(ValueError, match="max_size"):
        Vocabulary.build(SENTENCES, max_size=1)


def test_lowercase_merges_case_at_build_and_lookup():
    v = Vocabulary.build(SENTENCES, lowercase=True)
    assert "The" in v and v.index("The") == v.index("the")
    assert v.tokens[2] == "the"  # now the most frequent (3)


def test_specials_and_decode():
    v = Vocabulary.build(SENTENCES, specials=("<bos>", "<eos>"))
    assert v.tokens[:4] == ["<pad>", "<unk>", "<bos>", "<eos>"]
    ids = v.encode(["<bos>", "cat", "<eos>"])
    assert ids[0] == 2 and ids[2] == 3
    assert v.decode(ids) == ["<bos>", "cat", "<eos>"]


@pytest.mark.parametrize("cls", [Vocabulary, CharVocabulary])
def test_state_dict_round_trips_through_json(cls):
    v = cls.build(SENTENCES, lowercase=True, specials=("<x>",))
    restored = cls.from_state_dict(json.loads(json.dumps(v.state_dict())))
    assert restored == v
    assert restored.tokens == v.tokens


def test_loading_a_state_dict_with_the_wrong_class_fails():
    state = CharVocabulary.build(SENTENCES).state_dict()
    with pytest.raises(ValueError, match="char"):
        Vocabulary.from_state_dict(state)


def test_char_vocabulary_wraps_words_in_markers_and_keeps_affixes():
    c = CharVocabulary.build(SENTENCES)
    assert c.tokens[:4] == ["<pad>", "<unk>", "<w>", "</w>"]
    ids = c.encode_word("cat")
    assert ids[0] == 2 and ids[-1] == 3 and c.decode(ids[1:-1]) == ["c", "a", "t"]
    assert c.encode_word("cz")[2] == UNK_ID  # unseen character
    long = c.encode_word("catcatcatcat", max_chars=6)
    assert len(long) == 6 and long[0] == 2 and long[-1] == 3  # both ends kept
    assert c.encode(["cat", "sat"]) == [c.encode_word("cat"), c.encode_word("sat")]


def test_encode_batch_pads_with_zeros():
    v, c = Vocabulary.build(SENTENCES), CharVocabulary.build(SENTENCES)
    batch = encode_batch([["the", "cat"], ["zebra"], []], v, char_vocab=c, shapes=True)
    assert batch["lengths"].tolist() == [2, 1, 0]
    assert batch["tokens"].tolist() == [[v.index("the"), v.index("cat")], [UNK_ID, 0], [0, 0]]
    chars = batch["chars"]
    assert chars.shape == (3, 2, len("zebra") + 2)
    assert (chars[1, 1] == 0).all() and (chars[2] == 0).all()
    assert chars[1, 0, 0] == 2 and chars[1, 0, 6] == 3
    assert batch["shapes"][2].tolist() == [0, 0] and batch["shapes"].dtype == torch.long


@pytest.mark.parametrize(
    "token, shape",
    [
        ("walked", "lower"),
        ("Paris", "Capitalized"),
        ("NATO", "UPPER"),
        ("iPhone", "mixedCase"),
        ("1984", "digits"),
        ("3.5", "number-like"),
        (",", "punctuation"),
        ("well-known", "hyphenated"),
    ],
)
def test_word_shape(token, shape):
    assert WORD_SHAPES[word_shape(token)] == shape
