"""ListOps (Nangia & Bowman 2018) as in the Long Range Arena (Tay et al. 2021): a seeded
generator, its own answers, and the data set written once to the cache.

An example is a nested list of operations on the digits 0-9, e.g. ``[MAX 2 9 [MIN 4 7 ] 0 ]``
(= 9), and its answer, a digit (10-way classification of the whole sequence, N -> 1):

========  =====================================================================
``[MIN``  smallest argument
``[MAX``  largest argument
``[MED``  ``int(numpy.median(args))``, as LRA's ``to_value``: the middle value of an odd
          number of arguments, the mean of the two middle ones rounded down for an even
          number (``[MED 1 4 ]`` = 2, not the lower median 1)
``[SM``   sum modulo 10
========  =====================================================================

The generator follows LRA's ``lra_benchmarks/data/listops.py``: a node at depth ``< max_depth``
is an operator with probability 0.25 (else a digit), an operator takes 2 to ``max_args``
arguments, and a tree is kept when ``min_length < length < max_length``, where the length counts
operators, digits and closing brackets (the tokens here: LRA's extra binary-tree parentheses are
left out, so the length *is* the model's sequence length). Repeated trees are dropped; the first
``train``, ``dev``, ``test`` distinct trees form the splits. Randomness comes from one
``random.Random(seed)``, so the data set is a function of :class:`ListOpsSpec`.

:func:`load_listops` writes it once, atomically (a temporary directory renamed into place), to
``CACHE/listops/<spec.dirname()>/`` (``CACHE`` = ``$ATTNLAB_CACHE``), one ``label tokens`` line
per example; the directory name holds the generator version and every parameter.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from attnlab.lab.data.resolve import cache_dir

__all__ = [
    "END",
    "GENERATOR_VERSION",
    "OPERATORS",
    "ListOpsSpec",
    "Tree",
    "generate_tree",
    "load_listops",
    "make_listops",
    "tree_tokens",
    "tree_value",
]

#: bump when the generator's output for a given spec changes (names the cache directory)
GENERATOR_VERSION = 1
OPERATORS = ("[MIN", "[MAX", "[MED", "[SM")
END = "]"
VALUE_P = 0.25  # LRA: probability that a node above the maximum depth is an operator

#: a digit, or ``(operator, [arguments])``
Tree = int | tuple[str, list["Tree"]]


@dataclass(frozen=True)
class ListOpsSpec:
    """What defines a ListOps data set (LRA's defaults).

    Args:
        train, dev, test: number of examples per split (distinct trees).
        max_depth: deepest operator nesting (the root is depth 1).
        max_args: most arguments per operator (at least 2).
        min_length, max_length: kept lengths ``L`` satisfy ``min_length < L < max_length``.
        seed: the generator's seed.
    """

    train: int = 96_000
    dev: int = 2_000
    test: int = 2_000
    max_depth: int = 10
    max_args: int = 10
    min_length: int = 500
    max_length: int = 2_000
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("train", "dev", "test"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{name}: expected a number of examples >= 0, got {value!r}")
        if not isinstance(self.max_depth, int) or self.max_depth < 2:
            raise ValueError(f"max_depth: expected an int >= 2, got {self.max_depth!r}")
        if not isinstance(self.max_args, int) or self.max_args < 2:
            raise ValueError(f"max_args: expected an int >= 2, got {self.max_args!r}")
        if not (self.min_length >= 0 and self.min_length + 1 < self.max_length):
            raise ValueError(
                f"min_length, max_length: expected 0 <= min_length < max_length - 1 (lengths "
                f"strictly between), got {self.min_length}, {self.max_length}"
            )
        if self.min_length + 1 < 4:  # the shortest operator, [OP a b ], has 4 tokens
            raise ValueError(
                f"min_length: expected >= 3 (no tree has < 4 tokens), got {self.min_length}"
            )

    def dirname(self) -> str:
        """The cache directory's name: generator version and every parameter."""
        return (
            f"v{GENERATOR_VERSION}-n{self.train}-{self.dev}-{self.test}-depth{self.max_depth}"
            f"-args{self.max_args}-len{self.min_length}-{self.max_length}-seed{self.seed}"
        )


def generate_tree(
    rng: random.Random, depth: int, max_depth: int, max_args: int
) -> tuple[Tree, int]:
    """One random tree and its length in tokens (LRA's ``generate_tree``).

    The draws come in LRA's order: the node kind, the number of arguments, the arguments
    (depth first), then the operator.
    """
    r = rng.random() if depth < max_depth else 1.0
    if r > VALUE_P:
        return rng.randrange(10), 1
    length = 2  # the operator and its closing bracket
    args = []
    for _ in range(rng.randint(2, max_args)):
        arg, arg_len = generate_tree(rng, depth + 1, max_depth, max_args)
        args.append(arg)
        length += arg_len
    return (rng.choice(OPERATORS), args), length


def tree_tokens(tree: Tree) -> list[str]:
    """The tokens of ``tree``: ``[MAX 2 9 [MIN 4 7 ] 0 ]`` as a list."""
    out: list[str] = []
    stack: list = [tree]
    while stack:  # iterative: 2,000 tokens deep would be near Python's recursion limit
        node = stack.pop()
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, int):
            out.append(str(node))
        else:
            op, args = node
            out.append(op)
            stack.append(END)
            stack.extend(reversed(args))
    return out


def tree_value(tree: Tree) -> int:
    """The answer of ``tree``, from its structure (LRA's ``to_value``)."""
    if isinstance(tree, int):
        return tree
    op, args = tree
    values = sorted(tree_value(a) for a in args)
    if op == "[MIN":
        return values[0]
    if op == "[MAX":
        return values[-1]
    if op == "[SM":
        return sum(values) % 10
    mid = len(values) // 2  # [MED: numpy.median, then int() (values are >= 0: rounds down)
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) // 2


def make_listops(spec: ListOpsSpec) -> dict[str, list[tuple[list[str], int]]]:
    """The splits of ``spec`` in memory: ``{"train": [(tokens, label), ...], ...}``."""
    rng = random.Random(spec.seed)
    wanted = spec.train + spec.dev + spec.test
    seen: set[str] = set()
    examples: list[tuple[list[str], int]] = []
    while len(examples) < wanted:
        tree, length = generate_tree(rng, 1, spec.max_depth, spec.max_args)
        if not spec.min_length < length < spec.max_length:
            continue
        tokens = tree_tokens(tree)
        key = " ".join(tokens)
        if key not in seen:  # LRA keeps a set of trees
            seen.add(key)
            examples.append((tokens, tree_value(tree)))
    a, b = spec.train, spec.train + spec.dev
    return {"train": examples[:a], "dev": examples[a:b], "test": examples[b:]}


def load_listops(spec: ListOpsSpec, *, root: str | Path | None = None) -> dict[str, list]:
    """The splits of ``spec``, generated and written to ``root/listops/<spec.dirname()>`` the
    first time (``root``: default ``$ATTNLAB_CACHE``), read from there afterwards."""
    final = (Path(root) if root is not None else cache_dir()) / "listops" / spec.dirname()
    if not (final / "meta.json").exists():
        splits = make_listops(spec)
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.parent / f".tmp-{spec.dirname()}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            for name, examples in splits.items():
                lines = (f"{label} {' '.join(tokens)}\n" for tokens, label in examples)
                (tmp / f"{name}.txt").write_text("".join(lines), encoding="utf-8")
            meta = {"generator_version": GENERATOR_VERSION, **asdict(spec)}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
            try:
                os.rename(tmp, final)
            except OSError:  # another process wrote the same data set first: keep theirs
                if not (final / "meta.json").exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return splits
    return {name: _read(final / f"{name}.txt") for name in ("train", "dev", "test")}


def _read(path: Path) -> list[tuple[list[str], int]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        label, *tokens = line.split()
        out.append((tokens, int(label)))
    return out
