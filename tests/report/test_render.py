"""The pages from results written by hand: a part-run claim's seeds and provisional comparisons,
the note under a table whose runs had different threads, the time spent on a job, the figures'
format, and report.md's plots as files beside it."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from attnlab.lab.report import render
from attnlab.lab.report.claims import BUDGETS, select
from attnlab.lab.report.jobs import Job, JobResult, job_dir
from attnlab.lab.report.stats import Verdict

FULL = BUDGETS["full"]


def _finish(out: Path, job: Job, dev: float, threads: int, wall_s: float = 60.0,
            train_time_s: float = 50.0) -> None:  # fmt: skip
    metrics = {"best_score": dev, "metric_name": "accuracy", "test": {"accuracy": dev},
               "parameters": 1000, "units_per_s": 5000.0, "unit": "tok",
               "train_time_s": train_time_s}  # fmt: skip
    result = JobResult(job.key, job.task, list(job.options), job.seed, job.label, metrics,
                       wall_s, {"threads": threads, "cpu": "a CPU", "commit": "abc"})  # fmt: skip
    job_dir(out, job).mkdir(parents=True)
    (job_dir(out, job) / "result.json").write_text(json.dumps(asdict(result)))


def _claim_4_part_run(out: Path):
    """Claim 4 (dot-product vs additive scores) with the additive scores' seed 2 unfinished;
    dot-product's seed 0 killed outright once (the report's clock 60 s, the trainer's 700)."""
    (claim,) = select(["4"])
    (dot, dot_jobs), (additive, additive_jobs) = claim.jobs(FULL).items()
    for job, dev in zip(dot_jobs, (0.95, 0.951, 0.952)):
        _finish(out, job, dev, threads=2, train_time_s=700.0 if job.seed == 0 else 50.0)
    for job, dev in zip(additive_jobs[:2], (0.94, 0.941)):
        _finish(out, job, dev, threads=1)
    return claim, dot, additive


def test_a_part_run_claim_shows_k_of_n_seeds_and_calls_its_comparisons_provisional(tmp_path):
    claim, dot, additive = _claim_4_part_run(tmp_path)
    (section,), _ = render.sections(tmp_path, FULL, [claim])
    assert section.verdict is Verdict.PENDING
    seeds = {row["variant"]: row["seeds"] for row in section.rows}
    assert seeds == {dot: 3, additive: "2 of 3"}
    assert section.comparisons and all(
        n.startswith("provisional: ") for n, _, _ in section.comparisons
    )
    assert any("5 of the claim's 6 jobs have finished" in n for n in section.notes)


def test_a_table_whose_runs_had_different_threads_says_its_speeds_compare_nothing(tmp_path):
    claim, _, _ = _claim_4_part_run(tmp_path)
    (section,), _ = render.sections(tmp_path, FULL, [claim])
    header, _ = render._table(section)
    assert "tok/s" in header
    assert any(n.startswith("the table's tok/s is each run's own training throughput as it ran, "
                            "on 1 or 2 threads: not a comparison of speeds")
               for n in section.notes)  # fmt: skip


def test_a_jobs_time_is_the_trainers_where_the_reports_clock_lost_a_segment(tmp_path):
    claim, dot, _ = _claim_4_part_run(tmp_path)
    (section,), results = render.sections(tmp_path, FULL, [claim])
    row = next(r for r in section.rows if r["variant"] == dot)
    assert row["wall_s"] == (700 + 60 + 60) / 3
    lines = render._provenance(results)
    assert "wall time: 15.7 min over 5 jobs" in lines
    assert f"{dot} s0: 700 s, abc, 2 threads" in lines[-1]
    assert "machine: a CPU [], 1 thread; a CPU [], 2 threads" in lines


def test_the_tables_figures():
    assert render._fmt(1.0099, percent=False) == "1.010"  # as many decimals as its neighbours
    assert render._fmt(0.9573, percent=True) == "95.73"
    assert render._sd(0.00004, percent=True) == "0.004"  # not 0.00
    assert render._sd(0.0, percent=True) == "0.00"
    assert render._sd(0.0123, percent=False) == "0.01"


def test_report_md_shows_each_plot_from_a_png_file_beside_it(tmp_path):
    (claim,) = select(["4"])
    for label, jobs in claim.jobs(FULL).items():
        for job in jobs:
            _finish(tmp_path, job, 0.95 if "dot" in label else 0.94, threads=2)
    render.render(tmp_path, FULL, [claim])
    md = (tmp_path / "report.md").read_text()
    assert "![claim 4: the plot](plots/claim-4.png)" in md
    assert (tmp_path / "plots" / "claim-4.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    html = (tmp_path / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 1 and "plots/" not in html
