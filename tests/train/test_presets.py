"""``attnlab train TASK --preset NAME``: every task's ``tiny`` and ``default``, ``paper`` where
a task has a published recipe; applied before ``--config`` and the overrides; listed by
``--help``."""

from __future__ import annotations

import pytest

from attnlab.lab.cli import main
from attnlab.lab.tasks.presets import presets_of
from attnlab.lab.tasks.registry import BUILTIN_TASKS
from attnlab.lab.train import RunConfig, resolve_config

from . import toy_task  # noqa: F401  (registers the toy task)


@pytest.mark.parametrize("task", sorted(BUILTIN_TASKS))
def test_every_preset_of_every_task_resolves(task):
    names = list(presets_of(task))
    assert names[:2] == ["default", "tiny"]
    assert resolve_config(task=task, preset="default") == RunConfig.for_task(task)
    for name in names:
        cfg = resolve_config(task=task, preset=name)  # every name is an option of the task
        assert cfg.task == task
    tiny = resolve_config(task=task, preset="tiny").train
    assert (tiny.max_steps, tiny.epochs) == (20, 1)


def test_paper_only_where_a_task_has_one():
    assert "paper" in presets_of("cora") and "paper" in presets_of("citeseer")
    assert resolve_config(task="citeseer", preset="paper").task_options.l2 == 5e-4
    with pytest.raises(ValueError, match=r"task 'pos' has no preset 'paper'; its presets: "
                       r"default, tiny$"):  # fmt: skip
        resolve_config(task="pos", preset="paper")


def test_a_preset_comes_before_the_overrides():
    cfg = resolve_config(task="pos", preset="tiny", overrides=["--train.max_steps=5"])
    assert (cfg.train.max_steps, cfg.train.eval_every) == (5, 10)
    assert cfg.task_options.max_train_sentences == 300


def test_the_cli_trains_a_preset_and_help_lists_them(tmp_path, capsys):
    out = tmp_path / "toy"
    assert main(["train", "toy", "--preset", "tiny", "--train.device=cpu", f"--out_dir={out}"]) == 0
    assert capsys.readouterr().out.strip() == f"checkpoint: {out / 'best.pt'}"
    assert (out / "metrics.json").is_file()
    # resuming it as it is: already complete, exit 0, nothing trained
    assert main(["train", "toy", "--preset", "tiny", f"--out_dir={out}", "--resume"]) == 0
    said = capsys.readouterr().out
    assert "toy is already complete (train.epochs=1 reached; raise it to continue)" in said

    assert main(["train", "pos", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--preset NAME" in text and "  tiny     --train.epochs=1 --train.max_steps=20" in text
    assert "  default  the task's defaults" in text
    assert "--out_dir str  (default: runs/pos)" in text
    assert main(["train", "pos", "--preset", "paper"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("attnlab train: error: --preset: task 'pos' has no preset 'paper'; its "
                   "presets: default, tiny")  # fmt: skip


def test_options_of_one_docstring_entry_are_told_apart(capsys):
    assert main(["train", "listops", "--help"]) == 0
    text = capsys.readouterr().out
    assert "examples per split (respectively train, dev, test)." in text
