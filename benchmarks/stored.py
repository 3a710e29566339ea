"""Old results against the command given now.

A benchmark that reads back what an earlier invocation wrote (rows of a results file, a
finished run directory) uses it only when it was made with the configuration of the command
it is given now; otherwise it refuses (when it would skip work because of it) or leaves the
row out of its table and says so (when it prints), naming every difference. A row that does
not record how it was made counts as different ("not recorded"): nothing shows that it answers
the command.

* :func:`differences`: two settings dicts; a value that is a list of ``--a.b=value`` options
  (a command) is compared option by option, ``--out_dir`` and ``--overwrite`` ignored.
* :func:`run_differences`: a finished ``attnlab train`` run's ``config.json`` against the
  config its options resolve to now (so a changed default shows up too).
* :func:`run_lacks`: the settings of ``options`` that a run's ``config.json`` does not have.
* :func:`refuse`, :func:`keep_matching`, :func:`left_out_note`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

NOT_RECORDED = "not recorded"
#: options that say where a run lives, not what it computes
IGNORED_OPTIONS = ("--out_dir", "--overwrite", "--train.overwrite")


def _options(command: str | Sequence[str]) -> dict[str, str]:
    """``["-m", "attnlab", "--a.b=1", "--flag"]`` -> ``{"#0": "-m", "#1": "attnlab", "--a.b":
    "1", "--flag": "true"}`` (positional words keyed by their place)."""
    items = command.split() if isinstance(command, str) else list(command)
    out, place = {}, 0
    for item in items:
        if item.startswith("--"):
            key, eq, value = item.partition("=")
            if key not in IGNORED_OPTIONS:
                out[key] = value if eq else "true"
        else:
            out[f"#{place}"] = item
            place += 1
    return out


def _is_command(value: Any) -> bool:
    return isinstance(value, list) and any(str(v).startswith("--") for v in value)


def differences(stored: dict | None, wanted: dict) -> list[str]:
    """Each setting where ``stored`` (what a row records) differs from ``wanted`` (what the
    command given now would make), as ``"name: X stored, Y asked"``; ``stored`` None (the row
    records nothing) gives one difference."""
    if stored is None:
        return [f"how it was made is {NOT_RECORDED}"]
    out = []
    for key in dict.fromkeys([*wanted, *stored]):
        old, new = stored.get(key), wanted.get(key)
        if key not in stored or (old is None and _is_command(new)):
            out.append(f"{key}: {NOT_RECORDED}" + ("" if _is_command(new) else
                                                   f", {json.dumps(new)} asked"))  # fmt: skip
        elif _is_command(old) or _is_command(new):
            a, b = _options(old or []), _options(new or [])
            out += [f"{k}: {a.get(k, 'absent')} stored, {b.get(k, 'absent')} asked"
                    for k in dict.fromkeys([*b, *a]) if a.get(k) != b.get(k)]  # fmt: skip
        elif old != new:
            out.append(f"{key}: {json.dumps(old)} stored, {json.dumps(new)} asked")
    return out


def _lookup(tree: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def _config_json(run_dir: Path) -> dict | None:
    path = Path(run_dir) / "config.json"
    return json.loads(path.read_text()) if path.is_file() else None


def run_differences(run_dir: str | Path, task: str, options: Sequence[str]) -> list[str]:
    """Where the run in ``run_dir`` (its ``config.json``) differs from what ``attnlab train
    TASK OPTIONS`` resolves to now (today's defaults included); bookkeeping settings (where it
    lives, how often it logs and saves) are not compared, nor the precision a run saved where
    ``auto`` is asked (what ``auto`` chose on the run's machine)."""
    from attnlab.lab.commands import normalize_overrides
    from attnlab.lab.train.checkpoint import config_changes
    from attnlab.lab.train.config import resolve_config

    stored = _config_json(Path(run_dir))
    if stored is None:
        return [f"{Path(run_dir) / 'config.json'}: {NOT_RECORDED}"]
    cfg = resolve_config(task=task, overrides=normalize_overrides(list(options)))
    wanted = json.loads(json.dumps(cfg.to_dict()))  # tuples as lists, as config.json has them
    ran = _lookup(stored, "train.precision")
    if wanted["train"].get("precision") == "auto" and ran is not None:
        wanted["train"]["precision"] = ran  # the run saved what "auto" chose on its machine
    return [f"{name}: {json.dumps(_lookup(stored, name))} in the run, "
            f"{json.dumps(_lookup(wanted, name))} asked"
            for name in config_changes(stored, wanted)]  # fmt: skip


def run_lacks(run_dir: str | Path, options: Sequence[str]) -> list[str]:
    """The settings of ``options`` (``--a.b=value``) that the run in ``run_dir`` was not made
    with: its own config with ``options`` applied, compared with its own config."""
    from attnlab.lab.commands import normalize_overrides
    from attnlab.lab.train.checkpoint import config_changes
    from attnlab.lab.train.config import RunConfig
    from attnlab.lab.train.overrides import apply_overrides

    stored = _config_json(Path(run_dir))
    if stored is None:
        return [f"{Path(run_dir) / 'config.json'}: {NOT_RECORDED}"]
    own = RunConfig.from_dict(stored)
    applied = apply_overrides(own, normalize_overrides(list(options)))
    a, b = own.to_dict(), applied.to_dict()
    return [f"{name}: {json.dumps(_lookup(a, name))} in the run, "
            f"{json.dumps(_lookup(b, name))} asked" for name in config_changes(a, b)]  # fmt: skip


def refuse(what: str, changes: Sequence[str], fix: str) -> NoReturn:
    """Stop: ``what`` was made with another configuration than this command's."""
    raise SystemExit(
        f"{what} was made with another configuration than this command's "
        f"({'; '.join(changes)}); {fix}"
    )


def keep_matching(
    rows: Iterable[Any], changes_of: Callable[[Any], list[str]], label: Callable[[Any], str]
) -> tuple[list[Any], list[str]]:
    """The rows whose ``changes_of(row)`` is empty, and one note per other row:
    ``"label(row): change; change"``."""
    kept, notes = [], []
    for row in rows:
        changes = changes_of(row)
        if changes:
            notes.append(f"{label(row)}: {'; '.join(changes)}")
        else:
            kept.append(row)
    return kept, notes


def left_out_note(notes: Sequence[str], source: str | Path) -> str:
    """The lines that say which rows of ``source`` a table leaves out, and why ("" if none)."""
    if not notes:
        return ""
    head = (f"Left out: {len(notes)} row(s) of {source} made with another configuration than "
            "this command's:")  # fmt: skip
    return "\n".join([head, *(f"  - {n}" for n in notes)])
