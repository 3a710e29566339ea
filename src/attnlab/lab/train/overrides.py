"""``--dotted.name=value`` overrides of nested, typed config dataclasses (minGPT style).

The machinery behind ``--train.lr=1e-3`` and ``--model.encoder.heads=8``: a dotted path walks
nested dataclasses (and free-form dicts), the text is converted to the field's declared type,
and an unknown name raises a ``ValueError`` that lists the valid names at that level.

The overrides of one command line are gathered into one nested change and applied at once, as
a config file is (:func:`~attnlab.lab.train.merge.merge`), so their order never matters:
``--a.x=1 --a.y=2`` builds section ``a`` once with both values, and its validation sees the
final combination. The types understood, the sections chosen by ``kind`` and the conversions
live in :mod:`attnlab.lab.train.merge`; the ``--help`` text in :mod:`attnlab.lab.train.describe`.

**Why not a library.** tyro 1.0, draccus 0.11 and jsonargparse 4.53 all install, and each was
tried on this project's needs; none keeps today's behaviour:

* The model and task-option sections belong to the task chosen at run time (``RunConfig.model``
  is typed ``Any``; ``attnlab train pos`` and the tests' toy task have different dataclasses),
  and some sections are free-form dicts (``kernel_options``, a task's dict options) that take
  new keys one at a time (``--model.encoder.attention.kernel_options.features=128``). All three
  parse from static annotations; draccus rejects ``kernel_options.features=3`` ("unrecognized
  arguments") and tyro wants the whole dict as ``--x KEY VALUE`` pairs.
* Polymorphic encoders by ``--model.encoder.kind=cnn``: draccus's ``ChoiceRegistry`` fixes the
  key to ``type``, and with a registry-typed field even ``--model.encoder.kernel_options=...``
  fails unless ``type`` is repeated ("Expected a dict with a 'type' key"); tyro turns unions into
  positional subcommands (``model.encoder:cnn-encoder-config``) and then refuses
  ``--model.encoder.heads=8`` without that subcommand; jsonargparse selects by class path
  (``--model.encoder=CNNEncoderConfig``) and is order-dependent: ``--model.encoder=CNN...
  --model.encoder.heads=8`` silently yields the *transformer* config with 8 heads.
* Errors: an unknown option is argparse's "unrecognized arguments" (draccus), a 30-line
  union report (jsonargparse) or a SystemExit with a rich panel (tyro) instead of a
  ``ValueError`` naming the option and the valid names at its level, which the CLI, config
  files and ``RunConfig.from_dict`` share. Old spellings (``--attention.kernel``, flat
  ``encoder.kernel`` in old ``config.json`` files) need the same hooks in any case.

Re-tried after the one-trunk redesign (issue 33), with the model section typed concretely
(the task is known from the command line before parsing, so ``RunConfig`` can be given the
task's own ``ModelConfig``): tyro 1.0.17 parses ``--model.encoder.heads=8`` and names near
misses, but still refuses ``--model.encoder.attention.kernel_options.features=16`` (a
``dict[str, Any]`` is not parsed at all) and cannot switch ``--model.encoder.kind=cnn`` (the
field's type is fixed, so the config's own check fails); jsonargparse 4.53.0 cannot even take
the task's defaults (``No action for key "run.model.encoder.heads"``: the field is typed by
the base ``EncoderConfig``). Both shapes are the lab's on purpose (any kernel's options, any
encoder kind on one path), so a library would add typed per-kernel configs and subcommands
rather than delete code.

Keeping these ~600 lines (this module, ``merge.py`` and ``describe.py``) costs less than bending
one of them to these cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from attnlab.lab.train.describe import describe_options
from attnlab.lab.train.merge import CommandLineText, convert, from_dict, merge, to_dict

__all__ = [
    "apply_overrides",
    "override_tree",
    "parse_override",
    "merge",
    "to_dict",
    "from_dict",
    "convert",
    "describe_options",
]

C = TypeVar("C")


def parse_override(item: str) -> tuple[list[str], str]:
    """``"--train.lr=1e-3"`` -> ``(["train", "lr"], "1e-3")``; a bare ``--train.bf16`` means
    ``true``."""
    body = item.lstrip("-")
    name, sep, value = body.partition("=")
    if not name or any(not part for part in name.split(".")):
        raise ValueError(f"malformed override {item!r}; expected --section.name=value")
    return name.split("."), value if sep else "true"


def apply_overrides(cfg: C, overrides: Sequence[str]) -> C:
    """A copy of ``cfg`` with the ``--dotted.name=value`` overrides applied.

    The overrides are gathered into one nested change and merged at once (:func:`merge`), so
    their order does not matter (a later value of the same name wins), ``kind`` is applied
    before a section's other settings, and each section's validation sees its final values.

    Example:
        >>> cfg = apply_overrides(cfg, ["--train.lr=3e-4", "--model.encoder.heads=8"])

    Raises:
        ValueError: an unknown name (the message lists the valid names at that level), a value
            that does not convert to the field's type, or a failed ``__post_init__`` check.
    """
    return merge(cfg, override_tree(overrides))


def override_tree(overrides: Sequence[str]) -> dict[str, Any]:
    """The ``--dotted.name=value`` overrides as one nested dict of command-line text (what
    :func:`apply_overrides` merges), e.g. ``{"train": {"lr": "1e-3"}}``.

    Raises:
        ValueError: a malformed override, or a name given both a value and settings inside.
    """
    tree: dict[str, Any] = {}
    for item in overrides:
        parts, text = parse_override(item)
        node = tree
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if isinstance(child, CommandLineText):
                raise ValueError(
                    f"{item}: {'.'.join(parts[: i + 1])} was given a value by an earlier "
                    "override; it cannot also be a group"
                )
            node = node.setdefault(part, {})
        if isinstance(node.get(parts[-1]), dict):
            raise ValueError(
                f"{item}: earlier overrides set settings inside {'.'.join(parts)}; set the "
                "group or its settings, not both"
            )
        node[parts[-1]] = CommandLineText(text)
    return tree
