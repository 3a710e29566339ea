"""The sweep's report: crossovers against SDPA."""

from __future__ import annotations

from attnlab.lab.bench import crossovers


def test_crossovers_need_the_kernel_to_stay_faster():
    def row(kernel, n, t, status="ok"):
        return dict(kernel=kernel, mode="fwd", n=n, time_s=t, status=status)

    rows = [row("sdpa", n, n**2) for n in (1, 2, 4)] + [row("sdpa", 8, None, "skipped")]
    rows += [row("a", n, t) for n, t in ((1, 2), (2, 1), (4, 100), (8, 1))]  # loses at 4
    rows += [row("b", n, t) for n, t in ((1, 2), (2, 1), (4, 1), (8, 1))]
    rows += [row("c", n, 1e9) for n in (1, 2, 4)]
    cross = crossovers(rows)
    assert cross[("a", "fwd")] == 8  # only past the baseline's reach
    assert cross[("b", "fwd")] == 2
    assert cross[("c", "fwd")] is None
