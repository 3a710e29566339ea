"""Config dataclasses, ``--dotted.name=value`` overrides, files, dict round trips."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from attnlab.lab.train import (
    RunConfig,
    TrainConfig,
    apply_overrides,
    from_dict,
    load_config_file,
    resolve_config,
    save_config,
    to_dict,
)
from attnlab.lab.train.overrides import convert, merge, parse_override

from .toy_task import ToyModelConfig, ToyOptions


@dataclass
class Enc:
    heads: int = 4
    window: int | None = None
    kind: Literal["transformer", "rnn"] = "transformer"
    sizes: tuple[int, ...] = (1, 2)
    scale: int | float = 1
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Model:
    dim: int = 8
    encoder: Enc = field(default_factory=Enc)
    names: list[str] = field(default_factory=list)


@dataclass
class Top:
    name: str = "x"
    flag: bool = False
    model: Model = field(default_factory=Model)
    extra: Any = field(default_factory=dict)


def test_nested_override_returns_a_new_object():
    cfg = Top()
    new = apply_overrides(cfg, ["--model.encoder.heads=8", "--model.dim=16", "--name=y"])
    assert (new.model.encoder.heads, new.model.dim, new.name) == (8, 16, "y")
    assert (cfg.model.encoder.heads, cfg.model.dim, cfg.name) == (4, 8, "x")  # untouched


@pytest.mark.parametrize(
    ("override", "path", "expected"),
    [
        ("--model.dim=3", ("model", "dim"), 3),
        ("--model.dim=1e3", ("model", "dim"), 1000),
        ("--model.dim=1_024", ("model", "dim"), 1024),
        ("--flag=yes", ("flag",), True),
        ("--flag=False", ("flag",), False),
        ("--flag", ("flag",), True),
        ("--model.encoder.window=none", ("model", "encoder", "window"), None),
        ("--model.encoder.window=5", ("model", "encoder", "window"), 5),
        ("--model.encoder.kind=rnn", ("model", "encoder", "kind"), "rnn"),
        ("--model.encoder.sizes=3,4,5", ("model", "encoder", "sizes"), (3, 4, 5)),
        ("--model.encoder.sizes=[6, 7]", ("model", "encoder", "sizes"), (6, 7)),
        ("--model.encoder.sizes=(8,)", ("model", "encoder", "sizes"), (8,)),
        ("--model.encoder.scale=2", ("model", "encoder", "scale"), 2),
        ("--model.encoder.scale=0.5", ("model", "encoder", "scale"), 0.5),
        ('--model.encoder.options={"p": 1}', ("model", "encoder", "options"), {"p": 1}),
        ("--model.names=a,b", ("model", "names"), ["a", "b"]),
        ("--name=123", ("name",), "123"),
        ("--extra.k=3", ("extra", "k"), 3),
        ("--extra.k=[1,2]", ("extra", "k"), [1, 2]),
        ("--extra.k=hello", ("extra", "k"), "hello"),
        ("--extra.sub.k=true", ("extra", "sub", "k"), True),
    ],
)
def test_type_conversion(override, path, expected):
    value: Any = apply_overrides(Top(), [override])
    for part in path:
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    assert value == expected
    assert type(value) is type(expected)


def test_train_config_types():
    cfg = apply_overrides(
        RunConfig(),
        ["--train.lr=3e-4", "--train.betas=0.9,0.95", "--train.eval_batch_size=64",
         "--train.schedule=linear", "--train.precision=bf16"],
    )  # fmt: skip
    t = cfg.train
    assert (t.lr, t.betas, t.eval_batch_size, t.schedule, t.precision) == (
        3e-4, (0.9, 0.95), 64, "linear", "bf16",
    )  # fmt: skip
    assert isinstance(t.betas[0], float)


@pytest.mark.parametrize(
    ("override", "level_names"),
    [
        ("--modle.dim=3", ["name", "flag", "model", "extra"]),
        ("--model.encoder.head=3", ["heads", "window", "kind", "sizes", "scale", "options"]),
    ],
)
def test_unknown_name_lists_the_valid_ones(override, level_names):
    with pytest.raises(ValueError, match="unknown setting") as err:
        apply_overrides(Top(), [override])
    message = str(err.value)
    assert all(name in message for name in level_names)
    assert "did you mean" in message


def test_unknown_train_field_suggests():
    with pytest.raises(ValueError, match=r"did you mean 'lr'.*weight_decay"):
        apply_overrides(RunConfig(), ["--train.lrr=1"])


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("--model.dim=abc", "model.dim"),
        ("--model.dim=2.5", "model.dim"),
        ("--flag=maybe", "true/false"),
        ("--model.encoder.kind=cnn", "valid choices: 'transformer', 'rnn'"),
        ("--model.encoder=3", "group of settings"),
        ("--model.dim.x=3", "single value"),
        ("--model.encoder.options=[1]", "mapping"),
    ],
)
def test_bad_values_name_the_field(override, match):
    with pytest.raises(ValueError, match=match):
        apply_overrides(Top(), [override])


def test_validation_runs_after_override():
    with pytest.raises(ValueError, match="exclusive"):
        apply_overrides(RunConfig(), ["--train.warmup_steps=5", "--train.warmup_fraction=0.1"])
    with pytest.raises(ValueError, match="batch_size"):
        apply_overrides(RunConfig(), ["--train.batch_size=0"])


def test_parse_override():
    assert parse_override("--a.b=c=d") == (["a", "b"], "c=d")
    assert parse_override("a=") == (["a"], "")
    with pytest.raises(ValueError, match="malformed"):
        parse_override("--a..b=1")


def test_convert_from_json_values_is_strict():
    assert convert(3, float) == 3.0 and isinstance(convert(3, float), float)
    assert convert([1, 2], tuple[float, float]) == (1.0, 2.0)
    with pytest.raises(ValueError):
        convert("3", int)  # a JSON string is not parsed
    with pytest.raises(ValueError):
        convert(True, int)
    with pytest.raises(ValueError):
        convert([1, 2, 3], tuple[int, int])


def test_merge_is_partial_and_strict():
    cfg = merge(Top(), {"model": {"encoder": {"heads": 2}}})
    assert cfg.model.encoder.heads == 2 and cfg.model.dim == 8
    with pytest.raises(ValueError, match="valid names.*heads"):
        merge(Top(), {"model": {"encoder": {"nope": 1}}})


def test_to_dict_from_dict_round_trip():
    cfg = apply_overrides(Top(), ["--model.encoder.sizes=4,5", "--extra.k=1"])
    data = to_dict(cfg)
    assert data["model"]["encoder"]["sizes"] == [4, 5]
    json.dumps(data)  # JSON-friendly
    assert from_dict(Top, data) == cfg


def test_run_config_for_task_uses_task_defaults():
    cfg = RunConfig.for_task("toy", out_dir="somewhere")
    assert isinstance(cfg.model, ToyModelConfig) and isinstance(cfg.task_options, ToyOptions)
    cfg = apply_overrides(cfg, ["--model.encoder.hidden=7", "--task_options.mode=tag"])
    assert cfg.model.encoder.hidden == 7 and cfg.task_options.mode == "tag"
    with pytest.raises(ValueError, match="valid names.*hidden, dropout"):
        apply_overrides(cfg, ["--model.encoder.heads=8"])
    again = RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg


def test_unknown_task_lists_tasks():
    with pytest.raises(ValueError, match="valid choices:.*toy"):
        RunConfig.for_task("no-such-task")


def test_load_config_file_json_and_toml(tmp_path):
    (tmp_path / "c.json").write_text(
        json.dumps({"task": "toy", "train": {"lr": 0.5, "betas": [0.8, 0.9]},
                    "model": {"encoder": {"hidden": 5}}})
    )  # fmt: skip
    cfg = load_config_file(tmp_path / "c.json")
    assert cfg.task == "toy" and cfg.train.lr == 0.5 and cfg.train.betas == (0.8, 0.9)
    assert cfg.model.encoder.hidden == 5 and cfg.model.dim == ToyModelConfig().dim
    (tmp_path / "c.toml").write_text(
        'task = "toy"\nout_dir = "runs/x"\n[train]\nepochs = 2\nschedule = "constant"\n'
        '[task_options]\nmode = "tag"\n'
    )
    cfg = load_config_file(tmp_path / "c.toml")
    assert (cfg.out_dir, cfg.train.epochs, cfg.train.schedule) == ("runs/x", 2, "constant")
    assert cfg.task_options.mode == "tag"
    (tmp_path / "bad.json").write_text(json.dumps({"train": {"epoch": 2}}))
    with pytest.raises(ValueError, match="did you mean 'epochs'"):
        load_config_file(tmp_path / "bad.json")


def test_resolve_config_precedence(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"task": "toy", "train": {"lr": 0.5, "epochs": 4}}))
    cfg = resolve_config(config_file=tmp_path / "c.json", overrides=["--train.lr=0.25"])
    assert (cfg.task, cfg.train.lr, cfg.train.epochs) == ("toy", 0.25, 4)
    cfg = resolve_config(overrides=["--task=toy", "--model.dim=4"])
    assert cfg.task == "toy" and cfg.model.dim == 4


def test_save_config_writes_resolved_json(tmp_path):
    cfg = RunConfig.for_task("toy", out_dir=str(tmp_path / "run"))
    path = save_config(cfg)
    assert path == tmp_path / "run" / "config.json"
    assert RunConfig.from_dict(json.loads(path.read_text())) == cfg


def test_train_config_defaults_are_valid():
    TrainConfig()
    assert to_dict(TrainConfig())["betas"] == [0.9, 0.999]


# ---- encoder kinds: one dataclass per kind, chosen by --model.encoder.kind ----------------------

#: the ``model`` section of a config.json written before the encoder kinds had their own
#: dataclasses (a pos run of the window-FC baseline, k = 1): every kind's fields, flat
OLD_MODEL_SECTION = {
    "input": {"kind": "embedding", "dim": 128, "char_features": True, "char_dim": 32,
              "char_channels": None, "char_kernel": 3, "shape_dim": 0, "word_dropout": 0.05,
              "dropout": 0.1},
    "encoder": {"kind": "window", "depth": 2, "dropout": 0.1, "heads": 4, "ff_hidden": 256,
                "norm_first": True, "positional": "rotary", "max_len": None,
                "local_window": None, "score": "scaled_dot", "normalize": "softmax",
                "backend": "auto", "kernel": None, "kernel_options": {}, "hidden": None,
                "context": 1, "conv_kernel": 3, "residual": True, "cell": "lstm",
                "bidirectional": True},
    "head": {"pooling": "mean", "dropout": 0.1},
}  # fmt: skip


def test_encoder_kind_switches_the_dataclass_whatever_the_order():
    from attnlab.lab.models import CNNEncoderConfig

    base = RunConfig.for_task("pos")
    for overrides in (
        ["--model.encoder.kind=cnn", "--model.encoder.hidden=12", "--model.encoder.depth=3"],
        ["--model.encoder.hidden=12", "--model.encoder.depth=3", "--model.encoder.kind=cnn"],
    ):
        enc = apply_overrides(base, overrides).model.encoder
        assert enc == CNNEncoderConfig(depth=3, hidden=12)
    # fields the kinds share keep their value (sentence tasks preset dropout 0.2)
    enc = apply_overrides(RunConfig.for_task("sst2"), ["--model.encoder.kind=rnn"]).model.encoder
    assert (enc.kind, enc.dropout) == ("rnn", 0.2)


def test_a_setting_of_another_kind_is_an_error_naming_the_kind():
    base = RunConfig.for_task("pos")
    with pytest.raises(ValueError, match="kind 'cnn'") as err:
        apply_overrides(base, ["--model.encoder.kind=cnn", "--model.encoder.heads=8"])
    message = str(err.value)
    assert "model.encoder.heads" in message
    assert "'heads' is a setting of kind 'transformer'" in message
    assert all(f in message for f in ("depth", "dropout", "hidden", "conv_kernel", "residual"))
    with pytest.raises(ValueError, match="valid choices: transformer, fc, cnn, rnn"):
        apply_overrides(base, ["--model.encoder.kind=lstm"])
    with pytest.raises(ValueError, match="kind 'rnn'.*cell"):
        load_config_file_from({"task": "pos", "model": {"encoder": {"kind": "rnn", "heads": 2}}})


def load_config_file_from(data):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.json"
        path.write_text(json.dumps(data))
        return load_config_file(path)


def test_attention_settings_are_one_section_set_in_any_order():
    base = RunConfig.for_task("pos")
    a = apply_overrides(
        base,
        ["--model.encoder.attention.kernel_options.features=8",
         "--model.encoder.attention.kernel=performer"],
    )  # fmt: skip
    b = apply_overrides(
        base,
        ['--model.encoder.attention.kernel_options={"features": 8}',
         "--model.encoder.attention.kernel=performer"],
    )  # fmt: skip
    assert a == b
    assert a.model.encoder.attention.kernel_options == {"features": 8}
    with pytest.raises(ValueError, match="need attention.kernel"):
        apply_overrides(base, ["--model.encoder.attention.kernel_options.features=8"])


@pytest.mark.parametrize(
    "overrides",
    [
        [],
        ["--model.encoder.kind=fc", "--model.encoder.context=5"],
        ["--model.encoder.kind=cnn", "--model.encoder.residual=false"],
        ["--model.encoder.kind=rnn", "--model.encoder.cell=gru"],
        ["--model.encoder.attention.kernel=performer", "--model.encoder.window=2",
         "--model.encoder.attention.kernel_options.features=16"],
    ],
)  # fmt: skip
def test_every_encoder_kind_round_trips_through_config_json(tmp_path, overrides):
    from attnlab.lab.models import ModelConfig

    cfg = apply_overrides(RunConfig.for_task("pos", out_dir=str(tmp_path)), overrides)
    data = json.loads(save_config(cfg).read_text())
    assert RunConfig.from_dict(data) == cfg
    assert ModelConfig.from_dict(data["model"]) == cfg.model  # the models' own reader agrees


def test_an_old_checkpoints_config_is_read_in_todays_spelling():
    """Layout-1 checkpoints (the flat encoder section, ``local_window``, attention settings at
    the encoder's top level, kind ``window``) load through :func:`attnlab.lab.train.legacy.upgrade`
    only; the config readers know today's spelling alone."""
    from attnlab.lab.models import FCEncoderConfig, TransformerEncoderConfig
    from attnlab.lab.train.legacy import upgrade

    def read(model):
        ckpt = {"version": 1, "config": {"task": "pos", "out_dir": "runs/pos", "model": model}}
        return RunConfig.from_dict(upgrade(ckpt)["config"])

    assert read(OLD_MODEL_SECTION).model.encoder == FCEncoderConfig(context=1)
    encoder = {**OLD_MODEL_SECTION["encoder"], "kind": "transformer", "kernel": "performer",
               "kernel_options": {"features": 16, "chunk": 32}, "local_window": 4, "heads": 2}  # fmt: skip
    enc = read({**OLD_MODEL_SECTION, "encoder": encoder}).model.encoder
    assert isinstance(enc, TransformerEncoderConfig)
    assert (enc.heads, enc.window, enc.attention.kernel) == (2, 4, "performer")
    assert enc.attention.kernel_options == {"features": 16, "block": 32}
    with pytest.raises(ValueError, match="unknown encoder kind 'window'"):  # today's names only
        RunConfig.from_dict({"task": "pos", "model": OLD_MODEL_SECTION})


def test_conflicting_overrides_are_refused():
    with pytest.raises(ValueError, match="cannot also be a group"):
        apply_overrides(Top(), ["--extra.k=1", "--extra.k.sub=2"])
    cfg = apply_overrides(Top(), ["--model.dim=3", "--model.dim=4"])
    assert cfg.model.dim == 4  # the last value of a name wins


# ---- train TASK --help ------------------------------------------------------------------------


def leaf_options(obj, where=""):
    """Every dotted option name of a resolved config (dataclass fields, recursively)."""
    import dataclasses

    for f in dataclasses.fields(obj):
        value, path = getattr(obj, f.name), f"{where}.{f.name}" if where else f.name
        if dataclasses.is_dataclass(value):
            yield from leaf_options(value, path)
        else:
            yield path


@pytest.mark.parametrize("task", ["pos", "sst2"])
def test_describe_options_lists_every_option_with_type_default_and_description(task):
    from attnlab.lab.train.overrides import describe_options

    cfg = RunConfig.for_task(task)
    text = describe_options(cfg)
    lines = text.splitlines()
    for name in leaf_options(cfg):
        [i] = [i for i, line in enumerate(lines) if line.split()[:1] == [f"--{name}"]]
        assert "(default: " in lines[i], name
        assert lines[i + 1].startswith("      ") and lines[i + 1].strip(), f"{name}: no description"
    assert f"--train.lr float  (default: {cfg.train.lr})" in text  # the task's recipe
    assert (
        "--model.encoder.kind transformer | fc | cnn | rnn | cnn-attention  (default: transformer)"
        in text
    )
    assert "--train.schedule cosine | linear | constant" in text


def test_describe_options_follows_the_chosen_kind():
    from attnlab.lab.train.overrides import describe_options

    cfg = apply_overrides(RunConfig.for_task("pos"), ["--model.encoder.kind=rnn"])
    text = describe_options(cfg)
    assert "--model.encoder.cell lstm | gru  (default: lstm)" in text
    assert "--model.encoder.heads" not in text and "model.encoder [kind 'rnn']" in text
    toy = describe_options(RunConfig.for_task("toy"))  # undocumented dataclasses still list
    assert "--model.encoder.hidden int  (default: 32)" in toy


def test_cli_train_task_help_lists_the_options(capsys):
    from attnlab.lab.cli import main

    assert main(["train", "pos", "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage: attnlab train" in out and "--train.lr float  (default: 0.002)" in out  # pos's
    assert "peak learning rate of AdamW." in out
    # the options given are applied first: here the kind (also by its old shorthand)
    assert (
        main(["train", "pos", "--attention.kernel=performer", "--model.encoder.kind=rnn", "-h"])
        != 0
    )
    assert "kind 'rnn'" in capsys.readouterr().err
    assert main(["train", "pos", "--model.encoder.kind=rnn", "-h"]) == 0
    assert "--model.encoder.cell lstm | gru" in capsys.readouterr().out


# -- --attention.X: every attention setting of the task's model (issue 33) --------------------

ATTENTION_OF = {  # task -> (extra options its attention needs, where its attention lives)
    "pos": ([], ["model.encoder.attention"]),
    "digits": ([], ["model.encoder.attention"]),
    "fsdd": ([], ["model.encoder.attention"]),
    "freesolv": (["--model.structure=none"], ["model.attention"]),
    "cora": (["--model.kind=full_lappe"], ["model.attention"]),
    "g2p": ([], ["model.attention"]),
    "listops": ([], ["model.encoder.attention"]),
}


@pytest.mark.parametrize("task", list(ATTENTION_OF))
def test_attention_alias_reaches_every_attention_config_of_the_model(task):
    from attnlab.lab.train.config import attention_paths

    extra, paths = ATTENTION_OF[task]
    cfg = resolve_config(task=task, overrides=[*extra, "--attention.kernel=performer",
                                               "--attention.kernel_options.features=16"])  # fmt: skip
    assert attention_paths(cfg.model) == paths
    for path in paths:
        attention = functools.reduce(getattr, path.split(".")[1:], cfg.model)
        assert (attention.kernel, attention.kernel_options) == ("performer", {"features": 16})


def test_attention_alias_after_the_kind_and_from_a_file(tmp_path):
    cfg = resolve_config(task="sst2", overrides=["--attention.kernel=linear",
                                                 "--model.encoder.kind=cnn-attention"])  # fmt: skip
    assert cfg.model.encoder.kind == "cnn-attention"
    assert cfg.model.encoder.attention.kernel == "linear"
    path = tmp_path / "c.json"
    path.write_text('{"task": "pos", "attention": {"score": "dot"}}')
    assert resolve_config(config_file=path).model.encoder.attention.score == "dot"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--attention.depth=5"], "unknown setting 'model.encoder.attention.depth' valid names at "
         "'model.encoder.attention' \\(AttentionConfig\\): score, normalize, backend"),
        (["--model.encoder.kind=rnn", "--attention.kernel=linear"],
         "--attention.kernel=linear: the 'pos' model has no attention settings \\(its config: "
         "ModelConfig, kind 'rnn'\\)"),
        (["--attention=linear"], "set one attention setting, e.g. --attention.kernel=linear"),
        (["--attention.kernel=nope"], "attention.kernel: unknown kernel 'nope'"),
    ],
)  # fmt: skip
def test_attention_alias_errors_name_what_is_wrong(overrides, message):
    with pytest.raises(ValueError, match=message):
        resolve_config(task="pos", overrides=overrides)
