"""Model configuration: one encoder dataclass per kind, their builders, the deprecated paths."""

from __future__ import annotations

import json

import pytest

from attnlab.attention_config import AttentionConfig
from attnlab.lab.models import (
    ENCODERS,
    CNNEncoder,
    CNNEncoderConfig,
    EncoderConfig,
    FCEncoder,
    FCEncoderConfig,
    RNNEncoder,
    RNNEncoderConfig,
    TransformerEncoderConfig,
    TransformerSequenceEncoder,
    build_encoder,
)
from attnlab.lab.models.cnn_attention import ConvAttentionEncoder
from attnlab.lab.models.encoder_config import ConvAttentionEncoderConfig
from attnlab.lab.models.encoders import SequenceEncoder
from attnlab.positional import Rotary

BUILT = {
    "transformer": (TransformerEncoderConfig, TransformerSequenceEncoder),
    "fc": (FCEncoderConfig, FCEncoder),
    "cnn": (CNNEncoderConfig, CNNEncoder),
    "rnn": (RNNEncoderConfig, RNNEncoder),
    "cnn-attention": (ConvAttentionEncoderConfig, ConvAttentionEncoder),
}


def test_every_registered_encoder_has_a_config_kind():
    assert list(EncoderConfig.kinds()) == ["transformer", "fc", "cnn", "rnn", "cnn-attention"]
    assert set(ENCODERS) == set(BUILT)


@pytest.mark.parametrize("kind", list(BUILT))
def test_each_kind_builds_its_encoder(kind):
    config_cls, encoder_cls = BUILT[kind]
    cfg = config_cls(depth=1)
    assert cfg.kind == kind and EncoderConfig.kinds()[kind] is config_cls
    enc = build_encoder(cfg, dim=16)
    assert type(enc) is encoder_cls and enc.dim == 16


def test_the_settings_reach_the_encoder():
    enc = build_encoder(
        TransformerEncoderConfig(
            heads=2, window=3, attention=AttentionConfig(score="dot", backend="reference")
        ),
        dim=16,
    )
    attn = enc.encoder.blocks[0].self_attn
    assert (enc.window, attn.heads, attn.score.name, attn.backend) == (3, 2, "dot", "reference")
    assert build_encoder(FCEncoderConfig(context=5), dim=8).context == 5
    assert build_encoder(RNNEncoderConfig(cell="gru"), dim=8).cell == "gru"
    assert build_encoder(CNNEncoderConfig(hidden=12), dim=8).out_dim == 12


@pytest.mark.parametrize("kind", ["transformer", "cnn-attention"])
@pytest.mark.parametrize("attention_dropout, want", [(None, 0.1), (0.0, 0.0), (0.3, 0.3)])
def test_attention_dropout_reaches_every_attention_layer(kind, attention_dropout, want):
    """It was dropped on the way: --model.encoder.attention_dropout=0 left 0.1 on the weights."""
    config_cls, _ = BUILT[kind]
    extra = {"maps": 4, "heads": 2} if kind == "cnn-attention" else {}
    cfg = config_cls(depth=2, dropout=0.1, attention_dropout=attention_dropout, **extra)
    enc = build_encoder(cfg, dim=16)
    layers = [m for m in enc.modules() if type(m).__name__ == "MultiHeadAttention"]
    assert len(layers) == 2 and all(m.dropout == want for m in layers)


def test_switch_kind_keeps_the_shared_fields():
    cfg = TransformerEncoderConfig(depth=3, dropout=0.3, heads=8)
    assert cfg.switch_kind("cnn") == CNNEncoderConfig(depth=3, dropout=0.3)
    assert cfg.switch_kind("transformer") == cfg and cfg.switch_kind("transformer") is not cfg
    assert FCEncoderConfig(hidden=7).switch_kind("rnn").hidden == 7
    with pytest.raises(ValueError, match="valid choices: transformer, fc, cnn, rnn"):
        cfg.switch_kind("lstm")


def test_a_config_is_only_its_own_kind():
    with pytest.raises(ValueError, match="use RNNEncoderConfig"):
        CNNEncoderConfig(kind="rnn")
    with pytest.raises(TypeError, match="heads"):
        CNNEncoderConfig(heads=8)  # no silently ignored settings
    with pytest.raises(ValueError, match="unknown encoder kind 'window'"):
        FCEncoderConfig(kind="window")  # the old name of fc is gone (train.legacy reads it)


def test_from_dict_names_the_kind_and_its_fields():
    assert EncoderConfig.from_dict({"kind": "cnn", "conv_kernel": 5}) == CNNEncoderConfig(
        conv_kernel=5
    )
    cfg = EncoderConfig.from_dict({"attention": {"kernel": "linear"}})
    assert cfg == TransformerEncoderConfig(attention=AttentionConfig(kernel="linear"))
    with pytest.raises(ValueError, match="valid: kind, depth, dropout, context, hidden"):
        EncoderConfig.from_dict({"kind": "fc", "window": 3})
    with pytest.raises(ValueError, match="unknown encoder kind 'nope'"):
        EncoderConfig.from_dict({"kind": "nope"})


class _Identity(SequenceEncoder):
    def __init__(self, dim: int, *, depth: int = 1, dropout: float = 0.0) -> None:
        super().__init__()
        self.dim = self.out_dim = dim
        self.depth = depth

    def encode(self, x, lengths, *, need_weights):
        return x, None


def test_a_registered_encoder_without_a_config_uses_the_base_config():
    ENCODERS.register("test-identity", _Identity)
    try:
        cfg = EncoderConfig(kind="test-identity", depth=4)  # no warning: nothing newer to use
        assert type(cfg) is EncoderConfig and "test-identity" in EncoderConfig.kinds()
        enc = build_encoder(cfg, dim=6)
        assert isinstance(enc, _Identity) and enc.depth == 4
        assert TransformerEncoderConfig(depth=4).switch_kind("test-identity") == cfg
    finally:
        ENCODERS._items.pop("test-identity")


# ---- positional options: the encoding's own settings reach it --------------------------------
def test_positional_options_reach_the_rotary_encoding():
    cfg = TransformerEncoderConfig(
        heads=2, positional_options={"interleaved": True, "fraction": 0.5, "base": 500}
    )
    pe = build_encoder(cfg, dim=16).encoder.positional
    assert isinstance(pe, Rotary)
    assert (pe.interleaved, pe.rotary_dim, pe.head_dim, pe.base) == (True, 4, 8, 500.0)
    default = build_encoder(TransformerEncoderConfig(heads=2), dim=16).encoder.positional
    assert (default.interleaved, default.rotary_dim) == (False, 8)


@pytest.mark.parametrize(
    "overrides",
    [
        ['--model.encoder.positional_options={"interleaved": true, "rotary_dim": 4}'],
        [
            "--model.encoder.positional_options.interleaved=true",
            "--model.encoder.positional_options.rotary_dim=4",
        ],
    ],
    ids=["json", "one-at-a-time"],
)
def test_positional_options_from_the_command_line(overrides):
    from attnlab.lab.train import RunConfig, apply_overrides

    cfg = apply_overrides(RunConfig.for_task("pos"), overrides)
    assert cfg.model.encoder.positional_options == {"interleaved": True, "rotary_dim": 4}
    assert RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg  # config.json
    pe = build_encoder(cfg.model.encoder, dim=16).encoder.positional
    assert isinstance(pe, Rotary) and pe.interleaved and pe.rotary_dim == 4


def test_positional_options_are_checked_where_they_are_written():
    with pytest.raises(ValueError, match=r"'rotary' does not take \['interleave'\]; valid options: "
                       r"base, fraction, interleaved, rotary_dim"):  # fmt: skip
        TransformerEncoderConfig(positional_options={"interleave": True})
    with pytest.raises(ValueError, match="need a positional encoding; set positional"):
        TransformerEncoderConfig(positional=None, positional_options={"base": 10})
    with pytest.raises(ValueError, match="max_len is its own setting"):
        TransformerEncoderConfig(positional="learned", positional_options={"max_len": 8})
    with pytest.raises(ValueError, match="fraction"):  # Rotary's own check, when built
        build_encoder(TransformerEncoderConfig(positional_options={"fraction": 2.0}), dim=16)
    with pytest.raises(ValueError, match="positional_options .* built by name"):
        TransformerSequenceEncoder(
            16, positional=Rotary(4), positional_options={"interleaved": True}
        )
