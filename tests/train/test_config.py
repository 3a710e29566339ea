"""Config dataclasses, ``--dotted.name=value`` overrides, files, dict round trips."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from attnlab.train import (
    RunConfig,
    TrainConfig,
    apply_overrides,
    from_dict,
    load_config_file,
    resolve_config,
    save_config,
    to_dict,
)
from attnlab.train.overrides import convert, merge, parse_override

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
         "--train.schedule=linear", "--train.bf16=true"],
    )  # fmt: skip
    t = cfg.train
    assert (t.lr, t.betas, t.eval_batch_size, t.schedule, t.bf16) == (
        3e-4, (0.9, 0.95), 64, "linear", True,
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
