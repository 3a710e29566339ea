"""The encoder-decoders of ``attnlab.lab.models.seq2seq``: shapes, gradients, causality, padding."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.models.seq2seq import Seq2SeqConfig, build_seq2seq

SRC_V, TGT_V = 20, 11
#: every model kind, tiny; rotary covers the "qk" positional path of the decoder
CONFIGS = {
    "transformer": Seq2SeqConfig(dim=32, heads=4, encoder_depth=2, decoder_depth=2, dropout=0.0),
    "transformer-rotary": Seq2SeqConfig(
        dim=32, heads=4, encoder_depth=1, decoder_depth=2, dropout=0.0, positional="rotary",
        tie_embeddings=False,
    ),
    "lstm": Seq2SeqConfig(kind="lstm", dim=32, encoder_depth=2, decoder_depth=2, dropout=0.0),
}  # fmt: skip


def make(name: str, dtype=torch.float64):
    torch.manual_seed(0)
    return build_seq2seq(CONFIGS[name], src_vocab=SRC_V, tgt_vocab=TGT_V).to(dtype).eval()


def batch(b: int = 3, m: int = 6, n: int = 5, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([m, m - 2, 1][:b])
    src = torch.randint(2, SRC_V, (b, m), generator=gen)
    src[torch.arange(m) >= lengths[:, None]] = 0
    tgt = torch.randint(3, TGT_V, (b, n), generator=gen)
    tgt[:, 0] = 1  # <bos>
    return src, lengths, tgt


@pytest.mark.parametrize("name", CONFIGS)
def test_shapes_and_every_parameter_gets_a_gradient(name):
    model = make(name).train()
    src, lengths, tgt = batch()
    logits = model(src, lengths, tgt)
    assert logits.shape == (3, 5, TGT_V) and torch.isfinite(logits).all()
    logits.sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    assert not missing


@pytest.mark.parametrize("name", CONFIGS)
def test_the_decoder_is_causal(name):
    """Logits at position t do not depend on target tokens after t."""
    model = make(name)
    src, lengths, tgt = batch()
    changed = tgt.clone()
    changed[:, 3:] = (changed[:, 3:] + 1) % TGT_V
    a, b = model(src, lengths, tgt), model(src, lengths, changed)
    torch.testing.assert_close(a[:, :3], b[:, :3])
    assert not torch.allclose(a[:, 3:], b[:, 3:])


@pytest.mark.parametrize("name", CONFIGS)
def test_source_padding_is_inert(name):
    """More padding, or other ids at padded positions, change nothing."""
    model = make(name)
    src, lengths, tgt = batch()
    wider = torch.cat([src, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    garbage = wider.clone()
    garbage[torch.arange(10) >= lengths[:, None]] = 5
    ref = model(src, lengths, tgt)
    torch.testing.assert_close(model(wider, lengths, tgt), ref)
    torch.testing.assert_close(model(garbage, lengths, tgt), ref)


@pytest.mark.parametrize("name", CONFIGS)
def test_incremental_decoding_equals_the_whole_prefix(name):
    model = make(name)
    src, lengths, tgt = batch()
    memory = model.encode(src, lengths)
    full = model.decode(memory, tgt, use_cache=False).logits
    state, steps = None, []
    for t in range(tgt.shape[1]):
        out = model.decode(memory, tgt[:, t : t + 1] if state is not None else tgt[:, :1],
                           state=state)  # fmt: skip
        state = out.state
        steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


def test_tied_embeddings_share_the_output_weight():
    tied = build_seq2seq(Seq2SeqConfig(dim=32), src_vocab=SRC_V, tgt_vocab=TGT_V)
    assert tied.out.weight is tied.tgt_embed.weight
    untied = build_seq2seq(Seq2SeqConfig(dim=32, tie_embeddings=False), src_vocab=SRC_V,
                           tgt_vocab=TGT_V)  # fmt: skip
    assert untied.out.weight is not untied.tgt_embed.weight


@pytest.mark.parametrize("name", ["transformer", "lstm"])
def test_cross_weights_are_distributions_over_real_letters(name):
    model = make(name)
    src, lengths, tgt = batch()
    out = model.decode(model.encode(src, lengths), tgt, use_cache=False, need_weights=True)
    for w in out.cross_weights:  # (b, h, n, m)
        torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
        assert (w[2, :, :, 1:] == 0).all()  # the third source has one letter


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "gru"}, "model.kind must be one of"),
        ({"dim": 30, "heads": 4}, "must divide model.dim"),
        ({"kind": "lstm", "dim": 31}, "even model.dim"),
        ({"dropout": 1.0}, "model.dropout"),
        ({"decoder_depth": 0}, "model.decoder_depth must be >= 1"),
    ],
)
def test_config_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Seq2SeqConfig(**kwargs)


@pytest.mark.parametrize("kind", ["transformer", "lstm"])
def test_both_models_follow_the_one_seq2seq_protocol(kind):
    from attnlab.lab.models import Seq2Seq
    from attnlab.lab.models.seq2seq import Seq2SeqConfig, build_seq2seq

    model = build_seq2seq(Seq2SeqConfig(kind=kind, dim=16, heads=2, encoder_depth=1,
                                        decoder_depth=1), src_vocab=9, tgt_vocab=7)  # fmt: skip
    assert isinstance(model, Seq2Seq)
