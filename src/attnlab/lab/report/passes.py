"""Which timing pass measured a timed claim's figures (:mod:`.timing` takes them): read from the
stamp each result carries, ``metrics["timed"]``, for the claims' pages and rules."""

from __future__ import annotations

import json
from collections.abc import Sequence

from .jobs import JobResult

__all__ = ["source", "sources", "timing_note"]


def source(result: JobResult, key: str | None) -> str:
    """Which pass timed ``result``'s figures under ``key`` (its stamp), ``"unstamped"`` for
    figures timed before there were passes (during the run, alone), ``""`` for none."""
    if key is None or key not in result.metrics:
        return ""
    stamp = result.metrics.get("timed")
    return json.dumps({k: v for k, v in stamp.items() if k != "keys"}, sort_keys=True) if stamp \
        else "unstamped"  # fmt: skip


def sources(results: Sequence[JobResult], key: str | None) -> set[str]:
    """The passes (:func:`source`) that timed the figures under ``key`` of ``results``."""
    return {source(r, key) for r in results} - {""}


def timing_note(results: Sequence[JobResult], key: str | None) -> str | None:
    """Where the figures under ``key`` of a timed claim's ``results`` were measured: the pass
    (or passes, which are not side by side) of :func:`.timing.time_claims`, or during the runs (results
    from before 2026-12-06); None if none has figures."""
    found = sources(results, key)
    if not found:
        return None
    passes = [json.loads(s) for s in sorted(found - {"unstamped"})]
    said = "; ".join(f"{p['at']} on {p['cpu']}, {p['threads']} threads{_others(p)}"
                     for p in passes)  # fmt: skip
    if found == {"unstamped"}:
        return ("the speeds were timed after each run, each run alone (before 2026-12-06, when "
                "the report began timing them side by side after the training)")  # fmt: skip
    if len(found) == 1:
        return f"the speeds were timed side by side after the training, in one pass: {said}"
    during = ", and some during their runs" if "unstamped" in found else ""
    return (f"the speeds were timed in {len(found)} passes ({said}{during}): figures of "
            "different passes are not side by side")  # fmt: skip


#: the share of the CPUs' time that went elsewhere during a pass (other processes, or other
#: virtual machines: steal) above which its page says it was not quiet
BUSY = 0.1


def _others(stamp: dict) -> str:
    """What a pass's stamp says of the other processes running meanwhile ("" if unmeasured)."""
    if (others := stamp.get("others")) is None:
        return ""
    said = f", other load {others:.0%} of the CPUs"
    return said + (" (not quiet: its speeds may be off)" if others > BUSY else "")
