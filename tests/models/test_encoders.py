"""Sequence encoders, parametrised over the registry: shapes, gradients, padding, locality.

Legend: ``b`` batch, ``n`` positions, ``d`` width.
"""

from __future__ import annotations

import pytest
import torch

from attnlab.attention_config import AttentionConfig
from attnlab.lab.models import (
    ENCODERS,
    EncoderConfig,
    FCEncoder,
    RNNEncoder,
    TransformerSequenceEncoder,
    valid_positions,
)

B, N, D = 3, 9, 16
LENGTHS = torch.tensor([9, 5, 0])  # full, padded, empty

#: small settings per registered encoder (defaults elsewhere)
SMALL = {
    "transformer": dict(depth=2, heads=2, ff_hidden=32, positional="relative"),
    "fc": dict(context=3, hidden=12, depth=2),
    "cnn": dict(channels=12, depth=2, kernel=3),
    "rnn": dict(hidden=6, depth=2, cell="lstm", bidirectional=True),
    "cnn-attention": dict(widths=(2, 3), maps=4, depth=1, heads=2, ff_hidden=16),
}


def make(name: str, **overrides):
    torch.manual_seed(0)
    return ENCODERS.get(name)(D, **{**SMALL.get(name, {}), **overrides})


def inputs(seed: int = 1) -> torch.Tensor:
    return torch.randn(B, N, D, generator=torch.Generator().manual_seed(seed))


def test_every_registered_encoder_has_small_settings():
    assert set(ENCODERS) == set(SMALL)


@pytest.mark.parametrize("name", ENCODERS.names())
def test_shapes_finite_and_zero_padding(name):
    enc = make(name).eval()
    hidden, weights = enc(inputs(), LENGTHS)
    assert hidden.shape == (B, N, enc.out_dim) and enc.dim == D
    assert hidden.isfinite().all()
    assert (hidden[~valid_positions(LENGTHS, N)] == 0).all()
    assert weights is None


@pytest.mark.parametrize("name", ENCODERS.names())
def test_every_parameter_gets_a_gradient(name):
    enc = make(name).train()
    x = inputs().requires_grad_()
    hidden, _ = enc(x, LENGTHS)
    hidden.pow(2).sum().backward()
    for pname, p in enc.named_parameters():
        assert p.grad is not None and p.grad.isfinite().all(), pname
        assert p.grad.abs().sum() > 0, pname
    assert (x.grad[2] == 0).all()  # the empty sequence influences nothing


@pytest.mark.parametrize("name", ENCODERS.names())
def test_padding_invariance(name):
    enc = make(name).eval()
    x = inputs()
    noisy = x.clone()
    pad = ~valid_positions(LENGTHS, N)
    noisy[pad] = 100 * torch.randn(int(pad.sum()), D)
    valid = ~pad
    torch.testing.assert_close(enc(noisy, LENGTHS).hidden[valid], enc(x, LENGTHS).hidden[valid])


@pytest.mark.parametrize("name", ENCODERS.names())
def test_a_sequence_alone_equals_the_same_sequence_in_a_padded_batch(name):
    enc = make(name).eval()
    x = inputs()
    batched = enc(x, LENGTHS).hidden[1, :5]
    alone = enc(x[1:2, :5], torch.tensor([5])).hidden[0]
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=1e-5)


def changed_positions(enc, t: int, n: int = 12) -> list[int]:
    """Positions whose output changes when the input at ``t`` changes."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, n, D, generator=gen)
    y = x.clone()
    y[0, t] += torch.randn(D, generator=gen)  # not a constant shift: LayerNorm would hide it
    lengths = torch.tensor([n])
    diff = (enc(x, lengths).hidden - enc(y, lengths).hidden).abs().amax(-1)[0]
    return [i for i in range(n) if diff[i] > 1e-4]


def test_fc_k1_is_position_wise():
    enc = make("fc", context=1).eval()
    assert changed_positions(enc, 5) == [5]
    x = inputs()
    per_vector = torch.cat(
        [enc(x[:, t : t + 1], torch.ones(B, dtype=torch.long)).hidden for t in range(N)], 1
    )
    full = enc(x, torch.full((B,), N))
    torch.testing.assert_close(full.hidden, per_vector)


@pytest.mark.parametrize("k", [3, 5])
def test_fc_sees_exactly_its_context(k):
    enc = make("fc", context=k).eval()
    r = k // 2
    assert changed_positions(enc, 5) == list(range(5 - r, 5 + r + 1))
    assert changed_positions(enc, 0) == list(range(0, r + 1))  # zero padding at the edge


def test_fc_first_layer_is_a_convolution():
    enc = make("fc", context=3, depth=1).eval()
    x = inputs()
    lengths = torch.full((B,), N)
    lin = enc.mlp[0]  # (f, k*d), columns ordered [x_{t-1}; x_t; x_{t+1}]
    weight = lin.weight.view(-1, 3, D).permute(0, 2, 1)  # (f, d, k): a conv1d kernel
    ref = torch.relu(torch.nn.functional.conv1d(x.transpose(1, 2), weight, lin.bias, padding=1))
    torch.testing.assert_close(enc(x, lengths).hidden, ref.transpose(1, 2))


def test_cnn_receptive_field_grows_by_kernel_minus_one_per_layer():
    enc = make("cnn", depth=2, kernel=3).eval()
    assert changed_positions(enc, 5) == [3, 4, 5, 6, 7]


def test_transformer_local_window_limits_the_receptive_field():
    enc = make("transformer", depth=1, window=2).eval()
    assert changed_positions(enc, 6) == [4, 5, 6, 7, 8]
    full = make("transformer", depth=1).eval()
    assert changed_positions(full, 6) == list(range(12))


def test_transformer_causal_reads_left_to_right():
    enc = make("transformer", depth=2, causal=True).eval()
    assert changed_positions(enc, 6) == list(range(6, 12))
    local = make("transformer", depth=1, window=2, causal=True).eval()
    assert changed_positions(local, 6) == [6, 7, 8]
    out = enc(inputs(), LENGTHS, need_weights=True)
    for w in out.weights:  # no weight above the diagonal, rows of real queries sum to 1
        assert (w.triu(1) == 0).all()
        torch.testing.assert_close(w[0].sum(-1), torch.ones(2, N))
    built = EncoderConfig.from_dict({"kind": "transformer", "causal": True}).build(D)
    assert built.causal and not EncoderConfig.from_dict({"kind": "transformer"}).build(D).causal


def test_rnn_directions():
    forward_only = make("rnn", bidirectional=False, depth=1).eval()
    assert changed_positions(forward_only, 5) == list(range(5, 12))
    both = make("rnn", cell="gru").eval()
    assert changed_positions(both, 5) == list(range(12))
    assert both.out_dim == 12 and RNNEncoder(D).out_dim == D


@pytest.mark.parametrize("positional", [None, "sinusoidal", "rotary", "relative", "alibi"])
def test_transformer_weights_and_padding_with_each_positional(positional):
    enc = make("transformer", positional=positional).eval()
    x = inputs()
    out = enc(x, LENGTHS, need_weights=True)
    assert len(out.weights) == 2
    for w in out.weights:
        assert w.shape == (B, 2, N, N)
        assert (w[1, :, :, 5:] == 0).all()  # padded keys get no attention
        torch.testing.assert_close(w[1, :, :5].sum(-1), torch.ones(2, 5))
        assert (w[2] == 0).all()  # an empty sequence attends to nothing
    noisy = x.clone()
    noisy[1, 5:] = 50.0
    torch.testing.assert_close(enc(noisy, LENGTHS).hidden[1, :5], out.hidden[1, :5])


def test_transformer_forwards_attention_options():
    settings = AttentionConfig(score="dot", normalize="sigmoid", backend="reference")
    enc = make("transformer", attention=settings)
    attn = enc.encoder.blocks[0].self_attn
    assert attn.score.name == "dot" and attn.normalize.name == "sigmoid"
    assert attn.backend == "reference"


def test_attention_dropout_defaults_to_dropout_and_can_differ():
    enc = make("transformer", dropout=0.2)
    assert enc.encoder.blocks[0].self_attn.dropout == 0.2
    enc = make("transformer", dropout=0.2, attention_dropout=0.0)
    assert enc.encoder.blocks[0].self_attn.dropout == 0.0
    assert enc.encoder.blocks[0].ff.drop.p == 0.2


def test_impossible_combinations_fail_at_construction():
    with pytest.raises(ValueError, match="odd"):
        FCEncoder(D, context=2)
    with pytest.raises(ValueError, match="odd"):
        make("cnn", kernel=4)
    with pytest.raises(ValueError, match="cell"):
        RNNEncoder(D, cell="elman")
    with pytest.raises(ValueError, match="kernel"):
        TransformerSequenceEncoder(
            D, positional="relative", attention=AttentionConfig(kernel="linear")
        )
    with pytest.raises(ValueError, match="positional"):
        TransformerSequenceEncoder(D, positional="nope")
    with pytest.raises(ValueError, match="lengths"):
        make("fc")(inputs(), torch.ones(B))


def test_length_groups():
    """Long unequal sequences split where a length drops below 3/4 of its group's longest;
    short or similar ones stay one batch (None)."""
    from attnlab.lab.models.encoders import length_groups

    assert length_groups([100, 20, 5]) is None  # the longest is short: not worth a split
    assert length_groups([1000, 900, 800]) is None  # similar: one group
    assert length_groups([1000, 400, 900, 0, 300]) == [([0, 2], 1000), ([1, 4], 400), ([3], 1)]
    assert length_groups([2000, 100, 90, 0]) == [([0], 2000), ([1, 2, 3], 100)]
    # from 1,024 positions finer: 1,650 < 0.85 x 2,000, though not < 0.75 x 2,000
    assert length_groups([1650, 2000, 1800]) == [([1, 2], 2000), ([0], 1650)]
    assert length_groups([1000, 860, 800]) is None  # shorter: 0.75 of 1,000
    assert length_groups([]) is None


#: every positional encoding the transformer encoder takes
POSITIONALS = (
    None,
    "sinusoidal",
    "rotary",
    "relative",
    "alibi",
    "learned",
    "recurrent",
    "floater",
    "shaw",
)


@pytest.mark.parametrize(
    "options",
    [dict(positional=p) for p in POSITIONALS] + [dict(window=2), dict(causal=True)],
    ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()),
)
def test_transformer_in_length_groups_equals_one_batch(options, monkeypatch):
    """A batch of unequal lengths computed group by group (each group cut to its longest)
    equals the whole padded batch: the hidden states and every gradient (float64)."""
    import attnlab.lab.models.encoders as encoders

    lengths = torch.tensor([12, 4, 11, 0, 5, 7])
    x = torch.randn(6, 12, D, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    sized = dict(max_len=16) if options.get("positional") else {}
    enc = make("transformer", **sized, **options).double().train()  # dropout 0: deterministic
    results = []
    for min_length in (10**9, 4):  # one batch, then groups
        monkeypatch.setattr(encoders, "GROUP_MIN_LENGTH", min_length)
        enc.zero_grad()
        xi = x.clone().requires_grad_()
        hidden = enc(xi, lengths).hidden
        (hidden * torch.linspace(-1, 1, D, dtype=torch.float64)).sum().backward()
        grads = [xi.grad] + [p.grad for p in enc.parameters()]
        results.append((hidden.detach(), grads))
    assert encoders.length_groups(lengths.tolist()) is not None  # the groups did run
    torch.testing.assert_close(results[1][0], results[0][0])
    for got, want in zip(results[1][1], results[0][1]):
        torch.testing.assert_close(got, want)
