"""An evaluator of ListOps token sequences, independent of the generator: a recursive-descent
parser over the tokens (the generator computes answers from its own trees), used to check the
generated answers and to read user input.

Grammar::

    expr := DIGIT | OP expr expr+ "]"        OP := "[MIN" | "[MAX" | "[MED" | "[SM"
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

__all__ = ["evaluate_listops"]

_OPS = {
    "[MIN": min,
    "[MAX": max,
    "[MED": lambda xs: int(statistics.median(xs)),  # LRA: int(np.median(...))
    "[SM": lambda xs: sum(xs) % 10,
}


def evaluate_listops(tokens: Sequence[str] | str) -> int:
    """The value of one ListOps expression.

    Args:
        tokens: the tokens, or a whitespace-separated string (``"[MAX 2 9 [MIN 4 7 ] 0 ]"``).

    Raises:
        ValueError: not one well-formed expression; the message names the token position.
    """
    toks = tokens.split() if isinstance(tokens, str) else list(tokens)
    value, end = _expr(toks, 0)
    if end != len(toks):
        raise ValueError(
            f"listops: unexpected token {toks[end]!r} at {end} after a whole expression"
        )
    return value


def _expr(toks: list[str], i: int) -> tuple[int, int]:
    if i >= len(toks):
        raise ValueError(f"listops: expression expected at token {i}, got the end of the input")
    tok = toks[i]
    if len(tok) == 1 and tok.isdigit():
        return int(tok), i + 1
    if tok not in _OPS:
        raise ValueError(
            f"listops: token {i} is {tok!r}; expected a digit or one of {', '.join(_OPS)}"
        )
    start, args, i = i, [], i + 1
    while i < len(toks) and toks[i] != "]":
        value, i = _expr(toks, i)  # depth <= max_depth: recursion stays shallow
        args.append(value)
    if i >= len(toks):
        raise ValueError(
            f"listops: the {tok} at token {start} has no closing ']': expected ']' at token {i}, "
            "got the end of the input"
        )
    if len(args) < 2:
        raise ValueError(
            f"listops: the {tok} at token {start} needs at least 2 arguments, got {len(args)} "
            f"before its ']' at token {i}"
        )
    return _OPS[tok](args), i + 1
