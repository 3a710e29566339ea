"""SequenceModel and build_model, over every encoder and output kind."""

from __future__ import annotations

import json

import pytest
import torch

from attnlab.attention_config import AttentionConfig
from attnlab.lab.models import (
    ENCODERS,
    CharVocabulary,
    CNNEncoderConfig,
    EncoderConfig,
    FCEncoderConfig,
    HeadConfig,
    InputConfig,
    ModelConfig,
    ModelOutput,
    SequenceModel,
    TokenHead,
    TransformerEncoderConfig,
    Vocabulary,
    build_model,
    encode_batch,
)

TRAIN = [["I", "saw", "a", "saw", "."], ["The", "dog", "ran", "quickly", "."], ["Go", "!"]]
L = 4


@pytest.fixture(scope="module")
def data():
    vocab, chars = Vocabulary.build(TRAIN), CharVocabulary.build(TRAIN)
    batch = encode_batch(TRAIN + [["unseen", "words"]], vocab, char_vocab=chars, shapes=True)
    return vocab, chars, batch


#: small settings of the encoder kinds that have them
SMALL = {"transformer": dict(heads=2, ff_hidden=32)}


def small(kind: str, **encoder) -> ModelConfig:
    return ModelConfig(
        input=InputConfig(dim=16, char_dim=8, shape_dim=4),
        encoder=EncoderConfig.from_dict(
            {"kind": kind, "depth": 1, **SMALL.get(kind, {}), **encoder}
        ),
        head=HeadConfig(pooling="attention"),
    )


def build(data, kind: str, output: str = "token", **encoder) -> SequenceModel:
    vocab, chars, _ = data
    torch.manual_seed(0)
    return build_model(
        small(kind, **encoder), vocab_size=len(vocab), char_vocab_size=len(chars),
        num_labels=L, output=output,
    )  # fmt: skip


@pytest.mark.parametrize("output", ["token", "sequence"])
@pytest.mark.parametrize("kind", ENCODERS.names())
def test_logits_shape_and_padding_invariance(data, kind, output):
    _, _, batch = data
    model = build(data, kind, output).eval()
    logits = model(batch)
    b, n = batch["tokens"].shape
    assert logits.shape == ((b, n, L) if output == "token" else (b, L))
    noisy = {k: v.clone() for k, v in batch.items()}
    pad = batch["tokens"] == 0
    noisy["tokens"][pad] = 3
    noisy["chars"][pad] = 5
    noisy["shapes"][pad] = 2
    again = model(noisy)
    if output == "token":
        torch.testing.assert_close(again[~pad], logits[~pad])
    else:
        torch.testing.assert_close(again, logits)


@pytest.mark.parametrize("kind", ENCODERS.names())
def test_every_parameter_gets_a_gradient(data, kind):
    _, _, batch = data
    model = build(data, kind, "sequence").train()
    model(batch).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.isfinite().all(), name


def test_need_weights_returns_encoder_and_pooling_attention(data):
    _, _, batch = data
    model = build(data, "transformer", "sequence").eval()
    out = model(batch, need_weights=True)
    assert isinstance(out, ModelOutput)
    torch.testing.assert_close(out.logits, model(batch))
    b, n = batch["tokens"].shape
    assert [w.shape for w in out.weights] == [(b, 2, n, n)]
    assert out.head_weights.shape == (b, n)
    assert model(batch, need_weights=True).weights is not None
    assert build(data, "rnn").eval()(batch, need_weights=True).weights is None


def test_one_hot_input_is_projected_to_the_encoder_width(data):
    vocab, _, batch = data
    cfg = ModelConfig(input=InputConfig(kind="onehot", dim=0), encoder=FCEncoderConfig())
    model = build_model(cfg, vocab_size=len(vocab), num_labels=L).eval()
    assert model.inputs.out_dim == len(vocab)
    assert isinstance(model.in_proj, torch.nn.Linear) and model.encoder.dim == 128
    assert model(batch).shape == (*batch["tokens"].shape, L)


def test_width_bridges_keep_padding_zero(data):
    _, _, batch = data
    base = build(data, "rnn", hidden=5)  # encoder out_dim 10
    assert base.head.dim == 10 and isinstance(base.out_proj, torch.nn.Identity)
    model = SequenceModel(base.inputs, base.encoder, TokenHead(7, L))
    assert isinstance(model.out_proj, torch.nn.Linear)
    memory, lengths, _ = model.encode(batch)
    assert memory.shape == (*batch["tokens"].shape, 7)
    assert (memory[batch["tokens"] == 0] == 0).all()


def test_default_config_builds_a_transformer_tagger(data):
    vocab, chars, batch = data
    model = build_model(
        ModelConfig(), vocab_size=len(vocab), char_vocab_size=len(chars), num_labels=L
    )
    assert model(batch).shape == (*batch["tokens"].shape, L)


@pytest.mark.parametrize(
    "encoder",
    [
        CNNEncoderConfig(hidden=12, residual=False),
        TransformerEncoderConfig(
            window=2, attention=AttentionConfig(kernel="performer", kernel_options={"features": 16})
        ),
    ],
)
def test_config_round_trips_through_json(encoder):
    cfg = ModelConfig(encoder=encoder)
    again = ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    with pytest.raises(ValueError, match="layers"):
        ModelConfig.from_dict({"encoder": {"layers": 3}})


def test_config_errors_name_the_fix(data):
    vocab, _, _ = data
    with pytest.raises(ValueError, match="char_vocab_size"):
        build_model(ModelConfig(), vocab_size=len(vocab), num_labels=L)
    with pytest.raises(ValueError, match="valid choices"):
        build_model(
            ModelConfig(encoder=EncoderConfig(kind="lstm")),
            vocab_size=9, char_vocab_size=9, num_labels=L,
        )  # fmt: skip
    with pytest.raises(ValueError, match="for N -> M build an encoder-decoder"):
        build_model(ModelConfig(), vocab_size=9, char_vocab_size=9, num_labels=L, output="seq2seq")
