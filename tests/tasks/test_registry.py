"""The task registry: the lab's tasks listed by path and imported on first use; explicit
registration for tasks defined elsewhere; errors that list the valid names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from attnlab.lab.tasks import BUILTIN_TASKS, TASKS, Task, TaskRegistry
from attnlab.lab.tasks.text import PosTask, SentenceTask


def test_listing_the_tasks_imports_none_of_them():
    """``attnlab tasks`` needs no task module: registration is a table, not an import's side
    effect."""
    code = (
        "import sys; from attnlab.lab.tasks import TASKS; names = TASKS.names(); "
        "kinds = ('text', 'speech', 'graph', 'molecules'); "
        "assert not [k for k in kinds if f'attnlab.lab.tasks.{k}' in sys.modules], 'imported'; "
        "cls = TASKS.get('pos'); assert 'attnlab.lab.tasks.text' in sys.modules; "
        "assert 'attnlab.lab.tasks.graph' not in sys.modules, 'pos imported graph'; "
        "print(' '.join(names), cls.__name__, cls.name)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [*sorted(BUILTIN_TASKS), "PosTask", "pos"]


@pytest.mark.parametrize("name", sorted(BUILTIN_TASKS))
def test_every_builtin_task_resolves_to_its_task_class(name):
    cls = TASKS.get(name)
    assert issubclass(cls, Task) and cls.name == name and name in TASKS
    assert (cls.__doc__ or "").strip(), "attnlab tasks prints the first docstring line"
    if name in ("sst2", "sst5", "trec"):
        assert issubclass(cls, SentenceTask)


def test_unknown_name_lists_lazy_and_registered_tasks():
    reg = TaskRegistry({"lazy": "attnlab.lab.tasks.text:PosTask"})
    reg.register("eager", type("Eager", (PosTask,), {}))
    with pytest.raises(ValueError, match="unknown task 'nope'; valid choices: eager, lazy"):
        reg.get("nope")
    assert reg.names() == ["eager", "lazy"] and list(reg) == ["eager", "lazy"] and len(reg) == 2


def test_lazy_entries_are_checked():
    reg = TaskRegistry()
    with pytest.raises(ValueError, match="expected 'package.module:ClassName'"):
        reg.register_lazy("bad", "attnlab.lab.tasks.text.PosTask")
    reg.register_lazy("missing", "attnlab.lab.tasks.nosuchmodule:Task")
    with pytest.raises(ValueError, match="task 'missing': cannot import"):
        reg.get("missing")
    reg.register_lazy("notatask", "attnlab.lab.tasks.commands:AttentionMap")
    with pytest.raises(TypeError, match="expected a Task subclass"):
        reg.get("notatask")


def test_a_name_is_registered_once():
    reg = TaskRegistry({"pos": "attnlab.lab.tasks.text:PosTask"})
    with pytest.raises(ValueError, match="already registered"):
        reg.register("pos", type("Other", (PosTask,), {}))
    with pytest.raises(ValueError, match="already registered"):
        reg.register_lazy("pos", "attnlab.lab.tasks.text:PosTask")
    assert reg.get("pos") is PosTask
    with pytest.raises(ValueError, match="already registered"):
        reg.register("pos", type("Other", (PosTask,), {}))


def test_unregister_forgets_a_task_so_it_can_be_registered_again():
    reg = TaskRegistry({"lazy": "attnlab.lab.tasks.text:PosTask"})
    cls = type("Eager", (PosTask,), {})
    reg.register("eager", cls)
    reg.unregister("eager")
    reg.unregister("lazy")
    assert reg.names() == []
    assert reg.register("eager", cls) is cls and reg.get("eager") is cls
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        reg.unregister("nope")


def test_a_task_without_commands_trains_but_predict_says_why(tmp_path, capsys):
    """A task that implements Task alone (the trainer's interface) trains and evaluates its
    splits; predict / show / eval --data name TaskCommands, which they need."""
    import sys
    from pathlib import Path

    from attnlab.lab.cli import main
    from attnlab.lab.tasks import TaskCommands

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the toy task
    from train.toy_task import ToyTask  # registers "toy"

    assert not issubclass(ToyTask, TaskCommands)
    out = tmp_path / "run"
    assert main(["train", "toy", "--train.epochs=1", f"--out_dir={out}"]) == 0
    assert main(["eval", str(out)]) == 0
    capsys.readouterr()
    assert main(["predict", str(out), "a b"]) == 2
    err = capsys.readouterr().err
    assert "trains and evaluates its splits only" in err and "TaskCommands, which predict" in err
