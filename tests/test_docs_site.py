"""The documentation site's generated pages (docs/hooks.py) and the README's links.

The site itself is built by ``make docs`` (``mkdocs build --strict``) in ``.ci/run``; these
tests check what the hooks generate without MkDocs: the CLI reference names every command and
every task with its options, and the pages copied from the repository keep working links.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def hooks():
    return _hooks()


def test_cli_reference_names_every_command_and_task(hooks):
    from attnlab.lab.tasks import TASKS

    text = hooks.cli_markdown()
    for command in hooks.command_parsers():
        assert f"## `attnlab {command}`" in text
        assert f"usage: attnlab {command}" in text
    for task in TASKS.names():
        assert f"### `{task}`" in text
    # the options come from the option dataclasses: a task's own and the trainer's
    assert "--train.max_time" in text and "--model.encoder.heads" in text
    assert "--task_options.corpus" in text  # pos's


def test_pages_from_the_repository_link_into_the_site(hooks):
    home = hooks.site_markdown("README.md")
    assert "](docs/" not in home and "](lab/text.md)" in home
    assert "](benchmarks.md)" in home
    bench = hooks.site_markdown("BENCHMARKS.md")
    assert "](docs/" not in bench


def test_benchmarks_links_of_nested_pages(hooks):
    page = "see [BENCHMARKS.md](../../BENCHMARKS.md) and [it](../BENCHMARKS.md#speed)"
    assert hooks.BENCHMARKS_LINK.sub(r"](\1benchmarks.md", page) == (
        "see [BENCHMARKS.md](../benchmarks.md) and [it](benchmarks.md#speed)"
    )


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)  # fmt: skip
def test_relative_links_resolve(page):
    """Every relative link of a page reads on GitHub: it names a file of the repository (the
    site's generated pages are reached through ``../BENCHMARKS.md``, which the hooks rewrite)."""
    missing = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        if not (page.parent / target).exists():
            missing.append(target)
    assert not missing, f"{page.name} links to files that do not exist: {missing}"
