"""Input encoders: one-hot == embedding lookup, word dropout, character features."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.lab.models import (
    PAD_ID,
    UNK_ID,
    CharCNN,
    CharVocabulary,
    EmbeddingInput,
    OneHotInput,
    Vocabulary,
    encode_batch,
)
from attnlab.lab.models.chars import ROW_MULTIPLE

TRAIN = [["I", "saw", "a", "saw"], ["she", "walked", "quickly"]]


@pytest.fixture
def vocabs():
    return Vocabulary.build(TRAIN), CharVocabulary.build(
        TRAIN + [list("abcdefghijklmnopqrstuvwxyz")]
    )


def test_raw_one_hot_vectors_and_zero_padding():
    tokens = torch.tensor([[3, 1, 4], [2, 0, 0]])
    x = OneHotInput(5)({"tokens": tokens})
    assert x.shape == (2, 3, 5)
    expected = F.one_hot(tokens, 5).float() * (tokens != PAD_ID).unsqueeze(-1)
    torch.testing.assert_close(x, expected)


def test_one_hot_times_w_is_the_embedding_lookup():
    torch.manual_seed(0)
    layer = OneHotInput(7, dim=4)
    tokens = torch.tensor([[3, 1, 6, 0]])
    x = layer({"tokens": tokens})
    # the textbook form: the one-hot vector through the Linear layer (padding zeroed)
    textbook = layer.proj(F.one_hot(tokens, 7).float()) * (tokens != PAD_ID).unsqueeze(-1)
    torch.testing.assert_close(x, textbook)
    assert layer.out_dim == 4


def test_word_dropout_only_in_training_and_never_on_padding():
    torch.manual_seed(0)
    layer = EmbeddingInput(50, 8, word_dropout=0.5)
    tokens = torch.randint(2, 50, (4, 30))
    tokens[:, 20:] = PAD_ID
    batch = {"tokens": tokens}
    layer.eval()
    torch.testing.assert_close(layer(batch), layer(batch))
    layer.train()
    x = layer(batch)
    unk = layer.embed.weight[UNK_ID]
    is_unk = torch.isclose(x, unk).all(-1)  # (b, n)
    assert is_unk[:, :20].float().mean().item() == pytest.approx(0.5, abs=0.1)
    assert not is_unk[:, 20:].any() and (x[:, 20:] == 0).all()


def test_char_features_separate_unknown_words(vocabs):
    vocab, chars = vocabs
    torch.manual_seed(0)
    unseen = [["blorfing", "Blorfton"]]
    batch = encode_batch(unseen, vocab, char_vocab=chars)
    assert batch["tokens"].tolist() == [[UNK_ID, UNK_ID]]
    with_chars = EmbeddingInput(len(vocab), 16, char_vocab_size=len(chars)).eval()
    x = with_chars(batch)
    assert not torch.allclose(x[0, 0], x[0, 1])
    words_only = EmbeddingInput(len(vocab), 16).eval()
    y = words_only(batch)
    torch.testing.assert_close(y[0, 0], y[0, 1])  # both are just <unk>


def test_shape_features_separate_unknown_words(vocabs):
    vocab, _ = vocabs
    batch = encode_batch([["Blorfton", "blorfing"]], vocab, shapes=True)
    x = EmbeddingInput(len(vocab), 16, shape_dim=4).eval()(batch)
    assert not torch.allclose(x[0, 0], x[0, 1])


def test_char_cnn_ignores_character_padding():
    torch.manual_seed(0)
    cnn = CharCNN(30, char_dim=8, channels=12, kernel=3)
    chars = torch.randint(1, 30, (2, 3, 5))
    chars[0, 1, 3:] = 0  # a short word
    chars[1, 2] = 0  # a padding position: no characters
    wider = F.pad(chars, (0, 4))  # the batch's longest word grew
    out, out_wider = cnn(chars), cnn(wider)
    assert out.shape == (2, 3, 12)
    torch.testing.assert_close(out, out_wider)
    assert (out[1, 2] == 0).all()


@pytest.mark.parametrize("multiple", [ROW_MULTIPLE, 1])
def test_char_cnn_convolves_each_spelling_once_with_the_same_result(monkeypatch, multiple):
    """Each distinct spelling of the batch is convolved once, and those are padded to a multiple
    of ROW_MULTIPLE (a new count every batch would be a new oneDNN kernel every step); sharing
    and padding change nothing, forward or backward, against convolving every word slot."""
    from attnlab.lab.models import chars as module

    monkeypatch.setattr(module, "ROW_MULTIPLE", multiple)  # 1: the count itself, unpadded
    torch.manual_seed(0)
    cnn = CharCNN(30, char_dim=8, channels=12, kernel=3).double()
    chars = torch.randint(1, 30, (3, 50, 6))
    chars[0, 40:] = 0  # padding positions: no characters
    chars[2, 7:] = 0
    chars[1, 3, 2:] = 0
    chars[1, 10:20] = chars[0, 5]  # a word that recurs, across sentences and within one
    chars[2, 0] = chars[1, 3]  # a short one
    seen = []
    cnn.conv.register_forward_hook(lambda mod, args, out: seen.append(args[0].shape[0]))
    out = cnn(chars)
    distinct = 40 + 50 + 7 - 10 - 1  # the real words less the repeats
    assert seen == [-(-distinct // multiple) * multiple]
    every = cnn._features(chars.reshape(-1, 6)).view(3, 50, -1)  # every slot, no selection
    torch.testing.assert_close(out, every, rtol=0, atol=1e-12)
    weights = torch.randn_like(out)
    grads = torch.autograd.grad((out * weights).sum(), list(cnn.parameters()))
    ref = torch.autograd.grad((every * weights).sum(), list(cnn.parameters()))
    for g, r in zip(grads, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)


@pytest.mark.parametrize("collide", [False, True])
def test_unique_rows_is_torch_unique_even_when_hashes_collide(monkeypatch, collide):
    """The distinct rows, and which one each row is, exactly; with every hash equal (all rows
    collide) the check catches it and the answer is still exact."""
    from attnlab.lab.models import chars as module

    if collide:
        monkeypatch.setattr(
            module, "_hash_weights", lambda width, device: torch.zeros(width, dtype=torch.long)
        )
    torch.manual_seed(0)
    rows = torch.randint(0, 4, (200, 3))  # 64 possible rows: many repeats
    rows = torch.cat([rows, torch.zeros(200, 5, dtype=torch.long)], dim=1)
    distinct, which = module.unique_rows(rows)
    assert torch.equal(distinct[which], rows)
    want = torch.unique(rows, dim=0)
    assert len(distinct) == len(want)
    assert torch.equal(torch.unique(distinct, dim=0), want)  # the same set, each row once


def test_char_cnn_pools_the_max_over_real_characters_as_the_formula_says():
    """Padded slots are zeroed before a max_pool1d (after the ReLU nothing is below 0); the
    result and the gradients are the formula's max over the real characters only (float64,
    where ties do not occur), and a word without characters gets zeros."""
    torch.manual_seed(0)
    cnn = CharCNN(30, char_dim=8, channels=12, kernel=3).double()
    words = torch.randint(1, 30, (9, 7))
    words[0, 2:] = 0
    words[4, 5:] = 0
    words[8] = 0  # no characters
    got = cnn._features(words)
    h = F.relu(cnn.conv(cnn.embed(words).transpose(1, 2)))  # (w, f, c)
    real = (words != 0).unsqueeze(1)
    want = h.masked_fill(~real, float("-inf")).amax(dim=2)
    want = torch.where(real.any(dim=2), want, torch.zeros_like(want))
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert (got[8] == 0).all()
    weights = torch.randn_like(got)
    grads = torch.autograd.grad((got * weights).sum(), list(cnn.parameters()))
    ref = torch.autograd.grad((want * weights).sum(), list(cnn.parameters()))
    for g, r in zip(grads, ref, strict=True):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)


def test_missing_chars_is_a_clear_error(vocabs):
    vocab, chars = vocabs
    layer = EmbeddingInput(len(vocab), 8, char_vocab_size=len(chars))
    with pytest.raises(ValueError, match="chars"):
        layer({"tokens": torch.ones(1, 2, dtype=torch.long)})


def test_invalid_arguments():
    with pytest.raises(ValueError, match="char_vocab_size"):
        EmbeddingInput(10, 8, char_channels=4)
    with pytest.raises(ValueError, match="word_dropout"):
        EmbeddingInput(10, 8, word_dropout=1.0)
    with pytest.raises(ValueError, match="odd"):
        CharCNN(10, kernel=2)


def test_embed_init_draws_kims_uniform_and_keeps_padding_zero():
    torch.manual_seed(0)
    emb = EmbeddingInput(500, 300, embed_init=0.25).embed.weight
    assert emb[1:].abs().max() <= 0.25 and emb[1:].abs().max() > 0.24
    assert (emb[PAD_ID] == 0).all()
    assert abs(emb[1:].std().item() - 0.25 / 3**0.5) < 0.005  # U[-a, a]: std a / sqrt(3)
    with pytest.raises(ValueError, match="embed_init must be > 0"):
        EmbeddingInput(10, 4, embed_init=0.0)


def test_embed_init_is_an_input_config_setting():
    from attnlab.lab.models import InputConfig, build_inputs

    inputs = build_inputs(InputConfig(char_features=False, embed_init=0.1), vocab_size=50,
                          char_vocab_size=None)  # fmt: skip
    assert inputs.embed.weight.abs().max() <= 0.1
