"""Every code block of README.md and docs/ runs here, so the documentation cannot rot.

A fenced block may be preceded by a comment that says how it is tested:

* ``<!-- test: run -->``: run in the fast suite (Python blocks run so by default);
* ``<!-- test: slow -->``: run only under ``-m slow`` (minutes to hours);
* ``<!-- test: skip (reason) -->``: not run (the Makefile itself, ``pip install``).

A ``bash`` block without a comment is a recipe (hours of training, or a file of your own such as
``a.wav``): it is not run, but every ``attnlab`` command in it, and in every other bash block,
is checked as the command line would take it: the subcommand and its arguments parse, a
``train`` names a task and every ``--a.b=value`` option resolves against that task's options.
The blocks of one page run in order in one scratch directory (a page trains a run, then shows
it) and, for Python, in one namespace.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGES = [p for p in PAGES if "report" not in p.relative_to(ROOT).parts[1:2]]  # generated pages
FENCE = re.compile(r"(?:<!-- test: (?P<mode>\w+)(?P<why>[^>]*)-->\n)?```(?P<lang>\w*)\n(?P<code>.*?)```", re.S)  # fmt: skip
MODES = ("run", "slow", "skip")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    mode: str  # run | slow | skip | check
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for m in FENCE.finditer(text):
        lang = m["lang"] or "text"
        if lang not in ("python", "bash", "sh"):
            continue
        line = text.count("\n", 0, m.start("code"))
        default = "run" if lang == "python" else "check"
        found.append(Block(page, line, "bash" if lang == "sh" else lang, m["mode"] or default,
                           m["code"]))  # fmt: skip
    return found


ALL = [b for page in PAGES for b in blocks(page)]


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_the_pages_have_code():
    assert len(ALL) > 25, "the fence pattern finds the pages' code blocks"
    assert {b.mode for b in ALL} <= {*MODES, "check"}, "an unknown <!-- test: MODE -->"
    skipped = [b for b in ALL if b.mode == "skip"]
    assert all("(" in b.page.read_text().splitlines()[b.line - 2] for b in skipped), (
        "a skipped block gives its reason: <!-- test: skip (why) -->"
    )


def test_readme_first_screen_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; the issue asks for <= 150"


# ---- checking every attnlab command line ----------------------------------------------------
def commands(code: str) -> list[list[str]]:
    """The ``attnlab`` command lines of a bash block, as argv lists (without ``attnlab``):
    continuation lines joined, ``NAME="..."`` assignments expanded, env prefixes, ``torchrun
    ... -m attnlab`` and ``[--optional]`` brackets unwrapped."""
    env: dict[str, str] = {}
    argvs = []
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(os.path.expandvars(_expand(line, env)), comments=True)
        if len(words) == 1 and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            name, value = words[0].split("=", 1)
            env[name] = value
            continue
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words = words[1:]
        if words[:1] == ["torchrun"] and "attnlab" in words:
            words = ["attnlab", *words[words.index("attnlab") + 1 :]]
        if words[:1] == ["attnlab"]:
            argvs.append([re.sub(r"^\[(--[\w-]+)\]$", r"\1", w) for w in words[1:]])
    return argvs


def _expand(line: str, env: dict[str, str]) -> str:
    return re.sub(r"\$(\w+)", lambda m: env.get(m[1], m[0]), line)


def check_command(argv: list[str]) -> None:
    """Parse ``argv`` as ``attnlab`` would; for train, resolve every option against the task."""
    from attnlab.lab.cli import build_parser

    parser = build_parser()
    try:
        ns, rest = parser.parse_known_args(argv)
    except SystemExit as exit:  # argparse's error (its message went to stderr)
        raise AssertionError(f"`attnlab {shlex.join(argv)}` does not parse") from exit
    if getattr(ns, "help", False):
        return
    if ns.command in ("train", "pretrain"):
        from attnlab.lab.commands import normalize_overrides
        from attnlab.lab.train import resolve_config

        resolve_config(task=ns.task, config_file=None, overrides=normalize_overrides(rest))
    elif rest and not getattr(ns, "takes_rest", False):
        raise AssertionError(f"`attnlab {shlex.join(argv)}`: unknown arguments {rest}")


CHECKED = [(b, argv) for b in ALL if b.lang == "bash" and b.mode != "skip" for argv in commands(b.code)]  # fmt: skip


def test_the_checks_find_commands():
    assert len(CHECKED) > 60, "commands() finds the attnlab lines of the pages"
    recipes = [b for b in ALL if b.lang == "bash" and b.mode == "check"]
    assert all(commands(b.code) for b in recipes), "a recipe block has attnlab commands to check"


@pytest.mark.parametrize(("block", "argv"), CHECKED, ids=[f"{b.where}:{a[0]}" for b, a in CHECKED])
def test_command_is_valid(block, argv):
    check_command(argv)


def test_a_wrong_option_is_caught():
    """The check is not vacuous: a misspelt option or task fails it."""
    with pytest.raises(Exception, match="encoder"):
        check_command(["train", "pos", "--model.encoder.hedas=4"])
    with pytest.raises(AssertionError):
        check_command(["eval", "runs/x", "--no-such-flag"])


# ---- running the blocks ---------------------------------------------------------------------
def _pages_with(modes: tuple[str, ...]) -> list[Path]:
    return [p for p in PAGES if any(b.page == p and b.mode in modes for b in ALL)]


def _run_page(page: Path, modes: tuple[str, ...], tmp_path: Path, monkeypatch) -> None:
    runnable = [b for b in ALL if b.page == page and b.mode in modes]
    if any(b.lang == "bash" for b in runnable) and not os.environ.get("ATTNLAB_DATA"):
        pytest.skip("the page's commands read datasets: set ATTNLAB_DATA to the mirror")
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    namespace: dict = {"__name__": "__docs__"}
    for block in runnable:
        if block.lang == "python":
            exec(compile(block.code, block.where, "exec"), namespace)  # noqa: S102
            continue
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
        assert done.returncode == 0, (
            f"{block.where} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


@pytest.mark.parametrize("page", _pages_with(("run",)), ids=_id)
def test_page_runs(page, tmp_path, monkeypatch):
    _run_page(page, ("run",), tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("page", _pages_with(("slow",)), ids=_id)
def test_page_runs_slow_blocks(page, tmp_path, monkeypatch):
    _run_page(page, ("run", "slow"), tmp_path, monkeypatch)
