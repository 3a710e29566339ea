"""MkDocs hooks: pages made from the code and the repository at build time, never hand-copied.

* ``reference/cli.md``: every command's ``--help`` (from :func:`attnlab.lab.cli.build_parser`)
  and every task's options (the text of ``attnlab train TASK --help``, from the option
  dataclasses through :func:`attnlab.lab.train.describe.describe_options`), at the marker
  ``<!-- cli-reference -->``.
* ``index.md`` (the home page): the repository's ``README.md``, and ``benchmarks.md``: its
  ``BENCHMARKS.md``, their links rewritten for the site.

``tests/test_docs_site.py`` checks the generated text covers every command and task.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- cli-reference -->"


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """``{command: its parser}`` in the order ``attnlab --help`` lists them."""
    from attnlab.lab.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _help(parser: argparse.ArgumentParser) -> str:
    """``parser``'s help wrapped at 80 columns (argparse wraps at the terminal's width)."""
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"
    try:
        return parser.format_help().rstrip()
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def cli_markdown() -> str:
    """The CLI reference: ``attnlab --help``, each command's help, each task's options."""
    from attnlab.lab.cli import build_parser
    from attnlab.lab.tasks import TASKS
    from attnlab.lab.train import resolve_config
    from attnlab.lab.train.describe import describe_options

    parts = ["## `attnlab`", "", "```text", _help(build_parser()), "```", ""]
    for name, parser in command_parsers().items():
        parts += [f"## `attnlab {name}`", "", "```text", _help(parser), "```", ""]
    parts += [
        "## Options of each task",
        "",
        "Set as `--NAME=VALUE` after `attnlab train TASK` (or in a `--config` file). "
        "Defaults are each task's own; `attnlab train TASK --help` prints the same.",
        "",
    ]
    for task in TASKS.names():
        doc = (TASKS.get(task).__doc__ or "").strip().splitlines()
        cfg = resolve_config(task=task, config_file=None, overrides=[])
        parts += [
            f"### `{task}`",
            "",
            doc[0] if doc else "",
            "",
            "```text",
            describe_options(cfg, width=76).rstrip(),
            "```",
            "",
        ]
    return "\n".join(parts)


def site_markdown(name: str) -> str:
    """A top-level Markdown file of the repository with its links made relative to the site's
    root (``docs/x.md`` -> ``x.md``, ``BENCHMARKS.md`` -> ``benchmarks.md``, ``README.md`` ->
    ``index.md``)."""
    text = (ROOT / name).read_text()
    text = re.sub(r"\]\(docs/", "](", text)
    text = re.sub(r"\]\(BENCHMARKS\.md", "](benchmarks.md", text)
    return re.sub(r"\]\(README\.md", "](index.md", text)


def on_files(files, config):  # noqa: ANN001 (MkDocs' hook signature)
    from mkdocs.structure.files import File

    for page, name in (("index.md", "README.md"), ("benchmarks.md", "BENCHMARKS.md")):
        files.append(File.generated(config, page, content=site_markdown(name)))
    return files


#: a page's link to the repository's BENCHMARKS.md (``../BENCHMARKS.md`` from ``docs/``), which
#: reads on GitHub; on the site it goes to the generated ``benchmarks.md`` one level down
BENCHMARKS_LINK = re.compile(r"\]\(((?:\.\./)*)\.\./BENCHMARKS\.md")


#: Sphinx roles the docstrings use (``:class:`~attnlab.x.Y```), which mkdocstrings shows as typed
SPHINX_ROLE = re.compile(r":(?:class|meth|func|data|attr|mod|obj|math):(<code>)~?")


def on_page_content(html: str, page, config, files):  # noqa: ANN001
    """The API reference without Sphinx's role markers (the code they mark stays code)."""
    return SPHINX_ROLE.sub(r"\1", html) if page.file.src_uri == "reference/api.md" else html


def on_page_markdown(markdown: str, page, config, files):  # noqa: ANN001
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_markdown())
    return BENCHMARKS_LINK.sub(r"](\1benchmarks.md", markdown)
