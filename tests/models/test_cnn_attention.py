"""ConvAttentionEncoder: Kim's multi-width CNN front end, with Transformer blocks on top.

The registry-wide properties (shapes, zero padding, gradients, padding invariance, a sequence
alone = in a padded batch) run in test_encoders.py; here: the exact CNN, receptive fields,
attention weights, the config and the errors.

Legend: ``b`` batch, ``n`` positions, ``d`` width.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.lab.models import EncoderConfig, build_encoder, valid_positions
from attnlab.lab.models.cnn_attention import ConvAttentionEncoder
from attnlab.lab.models.encoder_config import ConvAttentionEncoderConfig

B, N, D = 3, 9, 8
LENGTHS = torch.tensor([9, 5, 0])


def make(**kw) -> ConvAttentionEncoder:
    torch.manual_seed(0)
    settings = dict(widths=(2, 3), maps=4, depth=1, heads=2, ff_hidden=16)
    return ConvAttentionEncoder(D, **{**settings, **kw}).eval()


def inputs(seed: int = 1) -> torch.Tensor:
    return torch.randn(B, N, D, generator=torch.Generator().manual_seed(seed))


def test_depth_0_is_kims_cnn_centred_windows_zero_padded():
    enc = make(widths=(3, 4, 5), maps=5, depth=0)
    x = inputs()
    lengths = torch.full((B,), N)
    ref = []
    for w, conv in zip((3, 4, 5), enc.convs):
        # Kim's valid convolution over the sentence with (w-1)//2 zeros before, w//2 after
        padded = F.pad(x.transpose(1, 2), ((w - 1) // 2, w // 2))  # (b, d, n + w - 1)
        ref.append(torch.relu(F.conv1d(padded, conv.weight, conv.bias)))  # (b, maps, n)
    ref = torch.cat(ref, 1).transpose(1, 2)  # (b, n, 15)
    out = enc(x, lengths)
    assert out.weights is None and enc.out_dim == 15 and enc.blocks is None
    torch.testing.assert_close(out.hidden, ref)


def changed(enc, t: int, n: int = 12) -> list[int]:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, n, D, generator=gen)
    y = x.clone()
    y[0, t] += torch.randn(D, generator=gen)
    lengths = torch.tensor([n])
    diff = (enc(x, lengths).hidden - enc(y, lengths).hidden).abs().amax(-1)[0]
    return [i for i in range(n) if diff[i] > 1e-5]


def test_receptive_field_cnn_alone_is_the_widest_window_and_attention_sees_all():
    # width 4: output t sees inputs t-1 .. t+2, so input 5 reaches outputs 3 .. 6
    assert changed(make(widths=(3, 4), depth=0), 5) == [3, 4, 5, 6]
    assert changed(make(depth=1), 5) == list(range(12))


def test_attention_weights_ignore_padding():
    enc = make(depth=2)
    x = inputs()
    out = enc(x, LENGTHS, need_weights=True)
    assert len(out.weights) == 2
    for w in out.weights:  # (b, h, i, j)
        assert w.shape == (B, 2, N, N)
        assert (w[1, :, :, 5:] == 0).all() and (w[2] == 0).all()
        torch.testing.assert_close(w[1, :, :5].sum(-1), torch.ones(2, 5))
    noisy = x.clone()
    noisy[1, 5:] = 100.0
    torch.testing.assert_close(enc(noisy, LENGTHS).hidden[1, :5], out.hidden[1, :5])
    assert (out.hidden[~valid_positions(LENGTHS, N)] == 0).all()


def test_config_builds_it_and_reads_the_command_line_spelling():
    cfg = EncoderConfig.from_dict({"kind": "cnn-attention", "widths": [2, 3], "maps": 6,
                                   "heads": 3, "depth": 0})  # fmt: skip
    assert type(cfg) is ConvAttentionEncoderConfig
    enc = build_encoder(cfg, dim=D)
    assert isinstance(enc, ConvAttentionEncoder)
    assert (enc.widths, enc.out_dim, enc.blocks) == ((2, 3), 12, None)
    default = ConvAttentionEncoderConfig()
    assert (default.widths, default.maps, default.depth) == ((3, 4, 5), 100, 1)
    switched = EncoderConfig.from_dict({"kind": "transformer", "dropout": 0.3})
    assert switched.switch_kind("cnn-attention").dropout == 0.3


def test_positional_encoding_is_optional_and_keeps_padding_invariance():
    enc = make(positional="sinusoidal")
    x = inputs()
    noisy = x.clone()
    noisy[1, 5:] = 7.0
    torch.testing.assert_close(enc(noisy, LENGTHS).hidden[1, :5], enc(x, LENGTHS).hidden[1, :5])


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(widths=()), "widths"),
        (dict(widths=(3, 0)), "widths"),
        (dict(maps=0), "maps"),
        (dict(depth=-1), "depth"),
        (dict(maps=5, heads=4), "heads=4 must divide"),
    ],
)
def test_bad_settings_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        make(**kw)


def test_trains_end_to_end_from_the_command_line(tmp_path, capsys):
    """``attnlab train sst2 --model.encoder.kind=cnn-attention`` on the 12 fixture sentences:
    the run records the kind, fits its training sentences, and predicts from the checkpoint."""
    import json
    from pathlib import Path

    from attnlab.lab.cli import main

    data = Path(__file__).resolve().parents[1] / "tasks" / "data"
    out = tmp_path / "run"
    torch.manual_seed(0)
    args = [
        "train", "sst2", f"--out_dir={out}",
        f"--task_options.train_file={data / 'sentiment.train.txt'}",
        f"--task_options.dev_file={data / 'sentiment.train.txt'}",
        f"--task_options.test_file={data / 'sentiment.test.txt'}",
        "--model.encoder.kind=cnn-attention", "--model.encoder.widths=[2,3]",
        "--model.encoder.maps=8", "--model.encoder.heads=2", "--model.encoder.depth=1",
        "--model.input.dim=16", "--model.input.char_features=false",
        "--model.head.pooling=max", "--model.head.dropout=0.0", "--model.input.word_dropout=0",
        "--train.epochs=15", "--train.batch_size=4", "--train.lr=1e-2", "--train.log_every=0",
        "--train.device=cpu",
    ]  # fmt: skip
    assert main(args) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["model"]["encoder"]["kind"] == "cnn-attention"
    assert config["model"]["encoder"]["widths"] == [2, 3]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["best_score"] == 1.0  # dev = the training sentences: fitted
    capsys.readouterr()
    assert main(["predict", str(out), "a great film", "a dull film"]) == 0
    assert set(capsys.readouterr().out.split()) <= {"negative", "positive"}
