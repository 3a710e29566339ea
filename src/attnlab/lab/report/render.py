"""The report's pages: ``report.md`` (its plots in ``plots/``), ``report.html`` (one
self-contained file, plots inline) and ``results.jsonl`` (every finished job of the report),
from the jobs' results in ``OUT/jobs``.

Claim by claim: the claim in one sentence, the setup, the rule (written before any result),
a table per variant, a plot, each comparison the rule made, the verdict, provenance (commits,
versions, CPU, threads, seeds, wall time) and the commands that reproduce it. Jobs that have not
finished show as pending.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
from collections.abc import Sequence
from pathlib import Path

from attnlab.lab.train.atomic import atomic_write, atomic_write_text

from .budgets import Budget
from .claim import Claim, Section, claims_plan, computed_here, count, is_fraction
from .jobs import JobResult, read_result, write_results
from .stats import Verdict

__all__ = ["PLOTS", "render", "sections"]

#: the folder of ``report.md``'s plots, beside it
PLOTS = "plots"


def sections(
    out: Path, budget: Budget, claims: Sequence[Claim]
) -> tuple[list[Section], list[JobResult]]:
    """Each claim's :class:`Section` from the results found in ``out``, and those results."""
    found: dict[str, JobResult] = {}
    done = []
    for claim in claims:
        results, read = {}, {}
        inits, own = set(), set()  # the commands of the runs jobs start from, and the jobs'
        for label, runs in claim.jobs(budget).items():
            results[label] = [r for r in (read_result(out, j) for j in runs) if r is not None]
            read.update({r.key: label for r in results[label]})
            for job in runs:
                *before, mine = job.commands()
                inits.update(before)
                own.add((job.init is not None, mine))  # the fine-tunings after the others
                for step in job.chain()[:-1]:  # the runs it starts from: their results too
                    if (r := found.get(step.key) or read_result(out, step)) is not None:
                        read[r.key] = step.label or r.label
                        found[r.key] = r
        found.update({r.key: r for rs in results.values() for r in rs})
        section = claim.analyse(results)
        planned = {label: len(runs) for label, runs in claim.jobs(budget).items()}
        finished = sum(len(rs) for rs in results.values())
        part_run = any(0 < len(rs) < planned[label] for label, rs in results.items())
        if part_run and section.verdict is not Verdict.PENDING:
            # A rule read on some of a variant's seeds could turn when the rest arrive (one
            # seed of three is "inconclusive" for want of a spread, not for want of a budget).
            # A variant with no finished run is the rule's to judge: pending where it reads
            # it, and no matter where it does not (claim 9's receptive fields).
            section.notes.append(f"{finished} of the claim's {sum(planned.values())} jobs have "
                                 "finished: its verdict waits for the rest; the comparisons "
                                 "above are provisional")  # fmt: skip
            section.verdict = Verdict.PENDING
            section.comparisons = [(f"provisional: {name}", v, c)
                                   for name, v, c in section.comparisons]  # fmt: skip
        for row in section.rows:  # "2 of 3" where a variant's seeds are not all in
            if 0 < row["seeds"] < planned.get(row["variant"], 0):
                row["seeds"] = f"{row['seeds']} of {planned[row['variant']]}"
        _note_mixed_threads(section, [r for rs in results.values() for r in rs])
        section.jobs = read
        section.commands = [
            f"attnlab report --budget {budget.name} --claims {claim.number} --out {out}",
            *sorted(inits),
            *(command for _, command in sorted(own)),
        ]
        done.append(section)
    return done, list(found.values())


def _note_mixed_threads(section: Section, results: Sequence[JobResult]) -> None:
    """Say so under a table whose runs trained on different numbers of threads: its units/s
    are then no speed comparison."""
    threads = sorted({r.provenance.get("threads") for r in results} - {None})
    if len(threads) > 1:
        section.notes.append(
            f"the table's {_speed_header(section)} is each run's own training throughput as it "
            f"ran, on {' or '.join(map(str, threads))} threads: not a comparison of speeds (the "
            "claims that compare speeds, 8, 11 and 14, time them side by side)"
        )


def _speed_header(section: Section) -> str:
    units = {r["unit"] for r in section.rows if r.get("unit")}
    return f"{units.pop()}/s" if len(units) == 1 else "units/s"


def render(out: Path, budget: Budget, claims: Sequence[Claim]) -> str:
    """Write the three files into ``out`` (and the plots of ``report.md`` into ``out/plots``);
    return a one-line summary."""
    done, results = sections(out, budget, claims)
    progress = _progress(len(results), len(claims_plan(claims, budget)), budget, out)
    plots = {s.number: _png_bytes(s.plot) for s in done if s.plot is not None}
    (out / PLOTS).mkdir(parents=True, exist_ok=True)
    for number, png in plots.items():
        atomic_write(out / PLOTS / f"claim-{number}.png", lambda f, png=png: f.write(png))
    for s in done:  # a plot the claim no longer draws
        if s.number not in plots:
            (out / PLOTS / f"claim-{s.number}.png").unlink(missing_ok=True)
    write_results(out / "results.jsonl", results)
    atomic_write_text(out / "report.md", _markdown(done, results, budget, progress, plots))
    atomic_write_text(out / "report.html", _html(done, results, budget, progress, plots))
    counts = {v: sum(s.verdict is v for s in done) for v in Verdict}
    summary = ", ".join(f"{n} {v.value}" for v, n in counts.items() if n)
    return f"{out / 'report.html'}: {len(done)} claims ({summary}); {len(results)} jobs finished"


def _progress(finished: int, total: int, budget: Budget, out: Path) -> str:
    """The header's line on how much of the report has run ("" when all of it has)."""
    if finished >= total:
        return ""
    return (f"{finished} of its {total} jobs have finished; the claims they do not decide yet "
            f"are pending (`attnlab report --budget {budget.name} --out {out}` runs the rest, "
            "resuming where it stopped).")  # fmt: skip


def _fmt(value, percent: bool = True) -> str:
    if value is None:
        return "pending"
    return (
        f"{100 * value:.2f}"
        if percent
        else f"{value:,.3f}"
        if isinstance(value, float)
        else f"{value:,}"
    )


def _sd(value: float, percent: bool) -> str:
    """A standard deviation in the table's units, to two decimals or, below 0.01, one
    significant digit (never a 0.00 that is not zero)."""
    value = 100 * value if percent else value
    return f"{value:.2f}" if value == 0 or abs(value) >= 0.01 else f"{value:.1g}"


def _table(s: Section) -> tuple[list[str], list[list[str]]]:
    """The section's table: its header and one row of cells per variant."""
    metric = next((r["metric"] for r in s.rows if r["metric"]), "accuracy")
    pct = is_fraction(metric)
    unit = " (%)" if pct else ""
    header = ["variant", "seeds", f"dev {metric}{unit}", "sd", f"test {metric}{unit}",
              "parameters", _speed_header(s), "s / run"]  # fmt: skip
    rows = []
    for r in s.rows:
        sd = "" if r["dev_sd"] is None else _sd(r["dev_sd"], pct)
        speed = (
            ""
            if r["units_per_s"] is None or r["units_per_s"] != r["units_per_s"]
            else f"{r['units_per_s']:,.0f}"
        )
        wall = "" if r["wall_s"] is None else f"{r['wall_s']:.0f}"
        rows.append([r["variant"], str(r["seeds"]), _fmt(r["dev"], pct), sd, _fmt(r["test"], pct),
                     _fmt(r["parameters"], False), speed, wall])  # fmt: skip
    return header, rows


def _provenance(results: Sequence[JobResult], trains: bool = False) -> list[str]:
    """The provenance lines of a section from its finished ``results``; ``trains``: the claim
    has jobs to run (with none finished it is pending, not computed)."""
    if not results and trains:
        return ["no job of this claim has finished yet"]
    if not results:
        return [f"no training job; {computed_here()}"]
    commits = sorted({_commit(r) for r in results})
    cpus = sorted({f"{r.provenance.get('cpu')} [{' '.join(r.provenance.get('isa', []))}], "
                   f"{count(r.provenance.get('threads'), 'thread')}" for r in results})  # fmt: skip
    versions = sorted({f"attnlab {r.provenance.get('attnlab')}, torch {r.provenance.get('torch')}"
                       + (f", Python {r.provenance['python']}" if r.provenance.get("python") else "")
                       for r in results})  # fmt: skip
    seeds = sorted({r.seed for r in results})
    wall = sum(r.seconds for r in results)
    return [f"commit: {', '.join(commits)}", f"versions: {'; '.join(versions)}",
            f"machine: {'; '.join(cpus)}", f"seeds: {', '.join(map(str, seeds))}",
            f"wall time: {wall / 60:.1f} min over {count(len(results), 'job')}",
            "jobs: " + "; ".join(_job_line(r) for r in results)]  # fmt: skip


def _job_line(r: JobResult) -> str:
    """A job's seed, time, commit and threads, for the provenance."""
    threads = r.provenance.get("threads")
    return f"{r.label} s{r.seed}: {r.seconds:.0f} s, {_commit(r)}" + (
        f", {count(threads, 'thread')}" if threads is not None else ""
    )


def _commit(r: JobResult) -> str:
    """The commit a job ran at, short, and whether its tree was dirty."""
    return r.provenance.get("commit", "?")[:10] + (" (dirty)" if r.provenance.get("dirty") else "")


def _markdown(
    done: Sequence[Section],
    results: Sequence[JobResult],
    budget: Budget,
    progress: str = "",
    plots: dict[int, bytes] | None = None,
) -> str:
    lines = ["# The lecture, verified", "", f"Budget **{budget.name}**: {budget.note}.", ""]
    if progress:
        lines += [f"**Unfinished.** {progress}", ""]
    if budget.name == "smoke":
        lines += ["**This smoke report checks the plumbing only: its verdicts say nothing about "
                  "the claims.**", ""]  # fmt: skip
    lines += ["| # | claim | verdict |", "|---:|---|---|"]
    lines += [f"| {s.number} | {s.name} | {s.verdict.value} |" for s in done]
    for s in done:
        mine = _results_of(s, results)
        header, rows = _table(s)
        lines += ["", f"## {s.number}. {s.name}: {s.verdict.value}", "", f"**Claim.** {s.claim}", "",
                  f"**Setup.** {s.setup}", "", f"**Rule** (fixed before the results). {s.rule}", "",
                  ]  # fmt: skip
        if rows:
            lines += ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
            lines += ["| " + " | ".join(cells) + " |" for cells in rows]
        if plots and s.number in plots:
            lines += ["", f"![claim {s.number}: the plot]({PLOTS}/claim-{s.number}.png)"]
        lines += ["", "**Comparisons.**", ""]
        lines += [f"- {name}: {v.value}" + (f" ({c})" if c else "") for name, v, c in s.comparisons]
        lines += [f"- {n}" for n in s.notes]
        if s.details:
            title, head, cells = s.details
            lines += ["", f"<details><summary>{html.escape(title)}</summary>", "",
                      "| " + " | ".join(head) + " |", "|---" * len(head) + "|",
                      *("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"
                        for row in cells), "", "</details>"]  # fmt: skip
        lines += ["", "**Provenance.**", ""] + [f"- {p}" for p in _provenance(mine, bool(s.rows))]
        lines += ["", "**Reproduce.**", "", "```bash", *s.commands, "```"]
    return "\n".join(lines) + "\n"


def _results_of(s: Section, results: Sequence[JobResult]) -> list[JobResult]:
    """The results ``s`` read, under the labels it gives them."""
    return [dataclasses.replace(r, label=s.jobs[r.key]) for r in results if r.key in s.jobs]


_CSS = """body{font:14px/1.45 system-ui,sans-serif;max-width:1000px;margin:24px auto;padding:0 16px;color:#1d2330}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d0d5dd;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}.v{font-weight:600;padding:1px 6px;border-radius:3px}
.held{background:#d1f2d9}.did-not-hold{background:#f9d4d4}.inconclusive-at-this-budget{background:#fff1c2}
.pending{background:#e4e7ec}pre{background:#f6f8fa;padding:8px;overflow:auto;font-size:12px}
.warn{background:#fff1c2;padding:8px;border-radius:4px}.muted{color:#667085;font-size:12px}"""


def _verdict(v: Verdict) -> str:
    return f'<span class="v {v.value.replace(" ", "-")}">{html.escape(v.value)}</span>'


def _png_bytes(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def _img(png: bytes | None) -> str:
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="plot" src="data:image/png;base64,{data}">'


def _html(
    done: Sequence[Section],
    results: Sequence[JobResult],
    budget: Budget,
    progress: str = "",
    plots: dict[int, bytes] | None = None,
) -> str:
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>attnlab report "
             f"({e(budget.name)})</title><style>{_CSS}</style></head><body>",
             "<h1>The lecture, verified</h1>",
             f"<p>Budget <b>{e(budget.name)}</b>: {e(budget.note)}.</p>"]  # fmt: skip
    if progress:
        parts.append(f"<p class='warn'><b>Unfinished.</b> {e(progress).replace('`', '')}</p>")
    if budget.name == "smoke":
        parts.append("<p class='warn'>This smoke report checks the plumbing only: its verdicts "
                     "say nothing about the claims.</p>")  # fmt: skip
    parts.append("<table><tr><th>#</th><th>claim</th><th>verdict</th></tr>")
    parts += [f"<tr><td>{s.number}</td><td style='text-align:left'><a href='#c{s.number}'>"
              f"{e(s.name)}</a></td><td>{_verdict(s.verdict)}</td></tr>" for s in done]  # fmt: skip
    parts.append("</table>")
    for s in done:
        parts += [f"<h2 id='c{s.number}'>{s.number}. {e(s.name)} {_verdict(s.verdict)}</h2>",
                  f"<p><b>Claim.</b> {e(s.claim)}</p><p><b>Setup.</b> {e(s.setup)}</p>",
                  f"<p><b>Rule</b> (fixed before the results). {e(s.rule)}</p>"]  # fmt: skip
        header, rows = _table(s)
        if rows:
            parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>")
            parts += [
                "<tr>" + "".join(f"<td>{e(c)}</td>" for c in cells) + "</tr>" for cells in rows
            ]
            parts.append("</table>")
        parts.append(_img((plots or {}).get(s.number)))
        parts.append("<p><b>Comparisons.</b></p><ul>")
        parts += [f"<li>{e(name)}: {_verdict(v)}{' ' + e(str(c)) if c else ''}</li>"
                  for name, v, c in s.comparisons]  # fmt: skip
        parts += [f"<li>{e(n)}</li>" for n in s.notes]
        parts.append("</ul>")
        if s.details:
            title, head, cells = s.details
            parts.append(f"<details><summary>{e(title)}</summary><table><tr>"
                         + "".join(f"<th>{e(h)}</th>" for h in head) + "</tr>"
                         + "".join("<tr>" + "".join(f"<td style='text-align:left'>{e(c)}</td>"
                                                    for c in row) + "</tr>" for row in cells)
                         + "</table></details>")  # fmt: skip
        parts.append("<p><b>Provenance.</b></p><ul class='muted'>")
        parts += [f"<li>{e(p)}</li>" for p in _provenance(_results_of(s, results), bool(s.rows))]
        parts.append(f"</ul><p><b>Reproduce.</b></p><pre>{e(chr(10).join(s.commands))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
