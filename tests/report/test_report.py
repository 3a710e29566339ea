"""``attnlab report`` end to end on the smoke budget (tiny pos runs of the Brown corpus in the
data mirror; skipped without it): the pages, resuming, shards, and one-line errors."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnlab.lab.cli import main
from attnlab.lab.report import execute
from attnlab.lab.report import run as report_run
from attnlab.lab.report.claims import BUDGETS, CLAIMS, PositionalEncodings
from attnlab.lab.report.jobs import Job, read_results, shard, write_results
from attnlab.lab.tasks.registry import TASKS
from attnlab.lab.train import RunError
from attnlab.lab.train.config import resolve_config

pytestmark = pytest.mark.usefixtures("data_mirror")


def _report(out: Path, *args: str) -> int:
    return main(["report", "--budget", "smoke", "--out", str(out), *args])


def _scores(out: Path) -> dict[str, float]:
    return {r.key: r.dev for r in read_results(out / "results.jsonl")}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, data_mirror_or_none) -> Path:
    if data_mirror_or_none is None:
        pytest.skip("no data mirror")
    out = tmp_path_factory.mktemp("report") / "smoke"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTNLAB_DATA", str(data_mirror_or_none))
        assert _report(out) == 0
    return out


def test_the_smoke_report_has_every_claim_and_says_it_checks_the_plumbing_only(smoke):
    md, page = (smoke / "report.md").read_text(), (smoke / "report.html").read_text()
    for claim in CLAIMS.values():
        assert f"## {claim.number}. {claim.name}" in md
        assert f"id='c{claim.number}'" in page
    assert "checks the plumbing only" in md and "checks the plumbing only" in page
    assert "Unfinished." not in md and "Unfinished." not in page  # every job has run
    assert "did not hold" not in md.split("## 1.")[0]  # one seed: no verdict either way
    assert 'src="http' not in page and "<script" not in page  # self-contained, plots inline
    trained = [c for c in CLAIMS.values() if c.jobs(BUDGETS["smoke"])]  # a plot each
    assert page.count("data:image/png;base64,") == len(trained)
    assert "## 9. a convolution is a restricted self-attention: held" in md  # exact at any budget
    results = read_results(smoke / "results.jsonl")
    assert len(results) == len({step.key for c in CLAIMS.values()
                                for runs in c.jobs(BUDGETS["smoke"]).values() for j in runs
                                for step in j.chain()})  # fmt: skip
    assert all(r.provenance["torch"] and r.provenance["cpu"] for r in results)
    assert "attnlab report --budget smoke --claims 1" in md


def test_every_listops_job_measures_the_lookup_rules_and_seed_0s_its_step_at_three_lengths(smoke):
    listops = [r for r in read_results(smoke / "results.jsonl") if r.task == "listops"]
    assert len(listops) == 7  # exact and six kernels, one seed
    for r in listops:
        assert set(r.metrics["rules"]) == {"majority", "operator", "top level"}
        assert sorted(r.metrics["costs"], key=int) == ["30", "60", "120"]  # max_length 60
        ok = [c for c in r.metrics["costs"].values() if "step_s" in c]
        assert ok and all(c["step_s"] > 0 and c["peak_mib"] > 0 for c in ok), r.label
    linformer = next(r for r in listops if r.label == "linformer")
    assert linformer.metrics["costs"]["120"] == {"error": "n/a: max_len"}  # built for 60
    md = (smoke / "report.md").read_text()
    assert "speed at 120 tokens (x exact)" in md and "top-level rule scores" in md


def test_claim_3_lists_its_pairs_and_every_pos_job_measures_them(smoke):
    md, page = (smoke / "report.md").read_text(), (smoke / "report.html").read_text()
    assert "## 3. self-attention uses the whole sentence" in md
    for text in (md, page):
        assert "<details><summary>the 44 minimal pairs" in text
        assert "I know that cold water helps ." in text
    pos = [r for r in read_results(smoke / "results.jsonl") if r.task == "pos"]
    assert pos and all(0 <= r.metrics["minimal_pairs"]["pair_accuracy"] <= 1 for r in pos)
    window = [r for r in pos if "--model.encoder.context=3" in r.options]
    assert window and all(r.metrics["minimal_pairs"]["same_tag"] == 1.0 for r in window)


def test_claim_11_times_each_models_step_at_four_lengths(smoke):
    from attnlab.lab.report.claims_recall import LENGTHS

    recall = [r for r in read_results(smoke / "results.jsonl") if r.task == "recall"]
    assert recall and all(r.seed == 0 for r in recall)  # the smoke budget's one seed
    for r in recall:
        assert sorted(int(n) for n in r.metrics["step_s_at"]) == list(LENGTHS)  # stored as text
        assert all(t > 0 for t in r.metrics["step_s_at"].values())
    assert "a training step on 8 sequences: 20 tokens" in (smoke / "report.md").read_text()


def test_the_timed_claims_are_timed_each_in_one_pass_after_the_training(smoke):
    """Claims 8, 11 and 14 compare speeds: each variant's run is timed after every run has
    finished (its result has its pass), the variants of a claim in the same pass."""
    results = read_results(smoke / "results.jsonl")
    for task, key in (("fsdd", "dev_step"), ("recall", "step_s_at"), ("listops", "costs")):
        runs = [r for r in results if r.task == task]
        assert runs and all(key in r.metrics for r in runs)
        assert len({json.dumps(r.metrics["timed"], sort_keys=True) for r in runs}) == 1
        if Path("/proc/stat").exists():  # and the other load meanwhile, a share of the CPUs
            assert 0.0 <= runs[0].metrics["timed"]["others"] <= 1.0
    bounds = [r.metrics["bound_step"] for r in results if r.task == "listops"]
    assert all(b["length"] == 60 and b["batch"] == 16 and b["step_s"] > 0 for b in bounds)
    speech = [r.metrics["dev_step"] for r in results if r.task == "fsdd"]
    assert all(m["step_s"] > 0 and m["units"] > 0 for m in speech)
    page = (smoke / "report.md").read_text()
    assert "a training step on the 16 longest dev utterances" in page
    assert "timed side by side after the training, in one pass" in page


def test_claim_7_tests_each_trained_model_at_three_lengths(smoke):
    positions = [r for r in read_results(smoke / "results.jsonl") if r.task == "positions"]
    # one model per encoding (one seed), not one per test length
    assert len(positions) == len(PositionalEncodings.ENCODINGS)
    for r in positions:
        assert sorted(r.metrics["test_at"]) == ["2L", "4L"]
        assert all(0 <= m["accuracy"] <= 1 for m in r.metrics["test_at"].values()), r.label
    md = (smoke / "report.md").read_text()
    assert "<details><summary>test accuracy at L, 2L and 4L (mean over seeds)" in md


def test_claim_15_decodes_each_trained_model_greedily_and_with_a_beam(smoke):
    g2p = [r for r in read_results(smoke / "results.jsonl") if r.task == "g2p"]
    assert len(g2p) == 1  # one model (one seed), not one per decoding
    (r,) = g2p
    assert r.metrics["dev_at"]["beam 5"]["per"] >= 0 and r.metrics["test_at"]["beam 5"]["words"]
    assert "greedy and beam search on the same checkpoints" in (smoke / "report.md").read_text()


def test_a_rerun_runs_nothing_and_writes_the_same_page(smoke, capsys, monkeypatch):
    before = (smoke / "report.md").read_text()
    monkeypatch.setattr(execute, "run_one", lambda *a: pytest.fail("a finished job ran again"))
    assert _report(smoke) == 0
    assert "0 to run" in capsys.readouterr().out
    assert (smoke / "report.md").read_text() == before


def test_run_jobs_returns_finished_results_in_order_and_runs_only_the_missing(
    smoke, tmp_path, monkeypatch
):
    """What the scripts under benchmarks/ call: the report's finished jobs come back as they
    are, in the order asked; a job not yet run in that directory runs, once."""
    jobs = [j for c in (CLAIMS["a window gives context"],)
            for runs in c.jobs(BUDGETS["smoke"]).values() for j in runs]  # fmt: skip
    monkeypatch.setattr(execute, "run_one", lambda *a: pytest.fail("a finished job ran again"))
    got = report_run.run_jobs(jobs[::-1], smoke)
    assert [r.key for r in got] == [j.key for j in jobs[::-1]]
    ran = []
    monkeypatch.setattr(execute, "run_one", lambda job, out, limit: ran.append(job.key))
    with pytest.raises(RunError, match="left no result"):  # the stub writes none
        report_run.run_jobs(jobs[:1], tmp_path)
    assert ran == [jobs[0].key]


def test_an_interrupted_report_resumes_where_it_stopped(tmp_path, monkeypatch, capsys):
    ran = []
    real = execute.run_one

    def stop_after_one(job: Job, out: Path, limit: int | None) -> None:
        if ran:
            raise KeyboardInterrupt
        ran.append(job.key)
        real(job, out, limit)

    monkeypatch.setattr(execute, "run_one", stop_after_one)
    with pytest.raises(KeyboardInterrupt):
        report_run.report_command(budget="smoke", claims=["scores"], out=tmp_path / "r")
    monkeypatch.setattr(execute, "run_one", real)
    capsys.readouterr()
    assert _report(tmp_path / "r", "--claims", "scores") == 0
    assert "1 of this report's 2 already done, 1 to run" in capsys.readouterr().out
    whole = tmp_path / "whole"
    assert _report(whole, "--claims", "scores") == 0
    assert _scores(tmp_path / "r") == _scores(whole)  # seeded runs: the same results


@pytest.mark.parametrize("saved, expected", [(True, 12.0), (False, 7.0)])
def test_a_jobs_wall_time_counts_every_segment_of_a_resumed_run(tmp_path, monkeypatch, saved,
                                                                  expected):  # fmt: skip
    """Stopped by Ctrl-C after 5 s, then run for 7 s: resumed from its last.pt, both segments
    count; stopped before its first checkpoint, the run starts afresh and only the second does."""
    clock, calls = [0.0], []

    def train(argv):
        calls.append(argv)
        run = Path(next(a for a in argv if a.startswith("--out_dir=")).split("=", 1)[1])
        run.mkdir(parents=True, exist_ok=True)
        (run / "config.json").write_text("{}")
        if len(calls) == 1:
            clock[0] += 5.0
            if saved:
                (run / "last.pt").write_bytes(b"")
            return 130
        clock[0] += 7.0
        (run / "metrics.json").write_text(json.dumps({"best_score": 0.5}))
        return 0

    monkeypatch.setattr("attnlab.lab.cli.main", train)
    monkeypatch.setattr(execute.time, "perf_counter", lambda: clock[0])
    job = Job("mlm", ("--train.max_steps=3",), 0, "pre-training")
    with pytest.raises(RunError, match="exit 130"):
        execute.run_one(job, tmp_path)
    execute.run_one(job, tmp_path)
    assert ("--resume" in calls[1]) == saved and ("--overwrite" in calls[1]) != saved
    assert report_run.read_result(tmp_path, job).wall_s == expected
    assert not list((tmp_path / "jobs").glob("*.wall"))  # nothing left once it has finished


def test_a_run_that_finished_before_its_result_was_written_keeps_the_trainers_time(tmp_path):
    job = Job("mlm", ("--train.max_steps=3",), 0, "pre-training")
    run = tmp_path / "jobs" / job.key
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"best_score": 0.5, "wall_time_s": 9.5}))
    execute.run_one(job, tmp_path)  # nothing trains: the run is done, its result is written
    assert report_run.read_result(tmp_path, job).wall_s == 9.5


def test_shards_and_collect_make_the_whole_report(tmp_path, capsys):
    shared = tmp_path / "shared"
    assert _report(shared, "--claims", "scores", "--shard", "1/2") == 0
    half = (shared / "report.md").read_text()  # one of the two jobs: the page says so
    assert (
        "1 of its 2 jobs have finished" in half
        and "Unfinished." in (shared / "report.html").read_text()
    )
    assert f"attnlab report --budget smoke --out {shared}` runs the rest" in half
    assert _report(shared, "--claims", "scores", "--shard", "2/2") == 0
    assert main(["report", "--collect", str(shared)]) == 0
    whole = tmp_path / "whole"
    assert _report(whole, "--claims", "scores") == 0
    assert _scores(shared) == _scores(whole) and len(_scores(whole)) == 2
    # paths and timings (units/s, s / run, wall time) differ; the rest is the same page
    strip = re.compile(r"--out \S+|\| [\d,]* \| \d* \|$|wall time:.*|jobs:.*|commit:.*", re.M)
    assert strip.sub("", (shared / "report.md").read_text()) == strip.sub(
        "", (whole / "report.md").read_text()
    )


def test_a_job_key_is_its_configuration_not_its_name():
    a = Job("pos", ("--train.lr=0.002", "--model.encoder.depth=1"), 0, "one name")
    assert a.key == Job("pos", ("--model.encoder.depth=1", "--train.lr=2e-3"), 0, "another").key
    assert a.key != Job("pos", a.options, 1).key
    assert a.key != Job("pos", ("--train.lr=0.002", "--model.encoder.depth=3"), 0).key
    # an option that says the default names the default's run
    depth = resolve_config(task="pos").model.encoder.depth
    assert Job("pos", (f"--model.encoder.depth={depth}",), 0).key == Job("pos", (), 0).key


def test_a_job_key_follows_the_tasks_defaults(monkeypatch):
    """A recipe's default that changes re-keys its jobs: old results are not served for it."""
    job = Job("pos", ("--model.encoder.depth=1",), 0)
    before = job.key
    recipe = TASKS.get("pos").default_train_options()
    monkeypatch.setattr(TASKS.get("pos"), "default_train_options",
                        classmethod(lambda cls: {**recipe, "weight_decay": 0.123}))  # fmt: skip
    assert Job("pos", job.options, 0).key != before


def test_a_job_that_starts_from_another_is_keyed_and_run_after_it(tmp_path):
    mlm = Job("mlm", ("--train.max_steps=3",), 0, "pre-training")
    tuned = Job("pos", ("--train.max_steps=3",), 0, "tuned", init=mlm)
    assert tuned.key != Job("pos", tuned.options, 0).key
    other_init = Job("mlm", ("--train.max_steps=4",), 0)
    assert tuned.key != Job("pos", tuned.options, 0, init=other_init).key
    assert tuned.chain() == [mlm, tuned] and tuned.root == mlm
    run = tmp_path / "jobs" / tuned.key
    assert f"--model.init={tmp_path / 'jobs' / mlm.key}" in tuned.argv(run)
    assert tuned.commands() == [f"{mlm.command()} --out_dir=runs/{mlm.key}",
                                f"{tuned.command()}"]  # fmt: skip
    assert f"--model.init=runs/{mlm.key}" in tuned.command()
    others = [Job("pos", (f"--train.max_steps={n}",), 0) for n in range(1, 6)]
    plan = [tuned, *others, mlm]
    for n in (1, 2, 3):
        shards = [shard(plan, f"{i}/{n}") for i in range(1, n + 1)]
        assert sorted(j.key for s in shards for j in s) == sorted(j.key for j in plan)
        with_it = next(s for s in shards if tuned in s)
        assert with_it.index(mlm) < with_it.index(tuned)  # together, the init job first
    assert shard(plan, None) == [*others, mlm, tuned]  # the plan's order, init jobs first
    assert shard([*others[::-1], others[0]], None) == others[::-1]  # each once
    assert execute.waves([tuned, *others, mlm]) == [sorted([*others, mlm], key=plan.index),
                                                        [tuned]]  # fmt: skip
    with pytest.raises(RunError, match="starts from job pre-training, which has not finished"):
        execute.run_one(tuned, tmp_path)


def test_the_smoke_reports_fine_tuned_tagger_starts_from_its_pre_training(smoke):
    results = read_results(smoke / "results.jsonl")
    mlm = [r for r in results if r.task == "mlm"]
    assert len(mlm) == 1  # recorded with the others; one run for every seed
    tuned = [r for r in results if "pre-trained" in r.label]
    assert tuned
    for r in tuned:
        config = json.loads((smoke / "jobs" / r.key / "config.json").read_text())
        assert config["model"]["init"] == str(smoke / "jobs" / mlm[0].key)
    md = (smoke / "report.md").read_text()
    assert md.index(f"--out_dir=runs/{mlm[0].key}") < md.index(f"--model.init=runs/{mlm[0].key}")
    claim_3 = md[md.index("## 3.") : md.index("## 4.")]  # its provenance counts the pre-training
    assert f"{mlm[0].label} s0: " in claim_3.split("**Provenance.**")[1]


def test_a_report_continues_from_another_reports_results(smoke, tmp_path, monkeypatch, capsys):
    """--from-results: another report's results.jsonl (the committed pages') counts as finished
    by key; a job that starts from a pre-training whose checkpoint is not there runs it again,
    first; --check sets up the same jobs and writes nothing."""
    results = read_results(smoke / "results.jsonl")
    mlm = next(r for r in results if r.task == "mlm")
    tuned = next(r for r in results if "pre-trained" in r.label)
    stranger = dataclasses.replace(results[0], key="0" * 16)  # another recipe's job
    given = tmp_path / "given.jsonl"
    write_results(given, [*(r for r in results if r.key != tuned.key), stranger])
    checked = []
    monkeypatch.setattr(report_run, "check_jobs", lambda jobs: checked.extend(jobs) or 0)
    assert _report(tmp_path / "checked", "--from-results", str(given), "--check") == 0
    assert [j.key for j in checked] == [mlm.key, tuned.key]
    assert not (tmp_path / "checked").exists()
    ran = []

    def run_one(job: Job, out: Path, limit: int | None) -> None:
        assert report_run.read_result(out, job) is None  # a result taken is not kept
        ran.append(job.key)

    monkeypatch.setattr(execute, "run_one", run_one)
    out = tmp_path / "continued"
    capsys.readouterr()
    assert _report(out, "--from-results", str(given)) == 0
    assert ran == [mlm.key, tuned.key]
    printed = capsys.readouterr().out
    assert (f"took the results of {len(results) - 1} jobs from {given} (1 other result there: "
            "not in this report's plan)") in printed  # fmt: skip
    assert f"job {mlm.label} runs again" in printed
    assert _scores(out) == {k: v for k, v in _scores(smoke).items()
                            if k not in (mlm.key, tuned.key)}  # fmt: skip
    assert _report(out, "--from-results", str(given)) == 0  # those recorded are not taken again;
    assert capsys.readouterr().out.startswith("took the results of 1 job from")  # mlm's was not


def test_a_bad_job_option_names_itself():
    with pytest.raises(ValueError, match="unknown setting 'train.nope'"):
        Job("pos", ("--train.nope=1",), 0).key  # noqa: B018


def test_ray_runs_the_jobs_on_a_local_cluster(tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install ray")
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True)
    try:
        assert _report(tmp_path / "ray", "--claims", "scores", "--executor", "ray") == 0
    finally:
        ray.shutdown()
    assert len(_scores(tmp_path / "ray")) == 2


def test_local_processes_give_the_same_results(tmp_path):
    """Two processes of one thread each: the same jobs, the same scores up to the float sums a
    thread count reorders."""
    assert _report(tmp_path / "two", "--claims", "scores", "--jobs", "2") == 0
    assert _report(tmp_path / "one", "--claims", "scores") == 0
    two, one = _scores(tmp_path / "two"), _scores(tmp_path / "one")
    assert two.keys() == one.keys() and len(two) == 2
    assert all(two[k] == pytest.approx(one[k], abs=2e-3) for k in one)
    threads = {r.provenance["threads"] for r in read_results(tmp_path / "two" / "results.jsonl")}
    assert threads == {max(1, (os.cpu_count() or 1) // 2)}  # the machine's threads divided


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="--jobs 2 needs two cores")
def test_under_jobs_n_a_timed_claims_runs_train_in_the_workers_and_are_timed_with_every_thread(
    tmp_path,
):
    """Claim 11 compares speeds (``timed``): under ``--jobs 2`` its runs train in the two worker
    processes, half the threads each, like claim 4's; its steps are timed afterwards, side by
    side in the report's own process with all of its threads (here the machine's)."""
    cores, before = os.cpu_count(), torch.get_num_threads()
    torch.set_num_threads(cores)  # as many as the cores: unlike a worker's half
    try:
        assert _report(tmp_path, "--claims", "scores", "rnn", "--jobs", "2") == 0
    finally:
        torch.set_num_threads(before)
    threads = {}
    results = read_results(tmp_path / "results.jsonl")
    for r in results:
        threads.setdefault(r.task, set()).add(r.provenance["threads"])
    assert threads == {"pos": {cores // 2}, "recall": {cores // 2}}
    timed = [r.metrics["timed"] for r in results if r.task == "recall"]
    assert len(timed) == 2 and timed[0] == timed[1] and timed[0]["threads"] == cores


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="--jobs 2 needs two cores")
def test_under_jobs_n_a_failed_job_stops_the_report_before_another_starts(tmp_path):
    """No job waits in the pool's queue: once a job has failed, the one beside it is asked to
    stop and none of the others starts (before, the pool ran every job it had been given)."""
    window = CLAIMS["a window gives context"]
    good = [j for runs in window.jobs(BUDGETS["smoke"]).values() for j in runs][:3]
    bad = Job("pos", ("--model.init=/nonexistent/run",), 0, label="a broken job")
    with pytest.raises(RunError, match="a broken job"):
        execute.run_local([bad, *good], tmp_path, 2)
    started = [j for j in good if (tmp_path / "jobs" / f"{j.key}.log").exists()]
    assert started in ([], good[:1])  # at most the one submitted beside it


def test_a_report_with_nothing_finished_renders_as_pending(tmp_path, capsys):
    # as after `attnlab report --budget smoke --claims scores` interrupted in its first job
    (tmp_path / "report.json").write_text(json.dumps({"budget": "smoke", "claims": ["4"]}))
    assert main(["report", "--collect", str(tmp_path)]) == 0
    md = (tmp_path / "report.md").read_text()
    scores = next(c for c in CLAIMS.values() if c.number == 4)
    total = len({step.key for runs in scores.jobs(BUDGETS["smoke"]).values()
                 for job in runs for step in job.chain()})  # fmt: skip
    assert f"0 of its {total} jobs have finished" in md
    assert "## 4. dot-product or additive scores: pending" in md
    assert "no job of this claim has finished yet" in md and "computed when" not in md


def test_a_claim_with_some_of_its_seeds_finished_is_pending_not_inconclusive(
    smoke, tmp_path, monkeypatch, capsys
):
    """--collect of a part-run report: a claim whose rule has read fewer seeds than its budget
    plans (here the smoke runs of seed 0, with seed 1 planned too) waits for the rest, where
    one seed alone would make it "inconclusive"."""
    import dataclasses
    import shutil

    out = tmp_path / "part"
    shutil.copytree(smoke, out)
    whole = (smoke / "report.md").read_text()
    assert "## 4. dot-product or additive scores: inconclusive at this budget" in whole
    monkeypatch.setitem(BUDGETS, "smoke", dataclasses.replace(BUDGETS["smoke"], seeds=(0, 1)))
    assert main(["report", "--collect", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "## 4. dot-product or additive scores: pending" in md
    assert "2 of the claim's 4 jobs have finished: its verdict waits for the rest" in md


def test_environment_is_the_workers_and_restored_after(monkeypatch):
    monkeypatch.setenv("ATTNLAB_TEST_KEPT", "before")
    monkeypatch.delenv("ATTNLAB_TEST_NEW", raising=False)
    with execute.environment({"ATTNLAB_TEST_KEPT": "during", "ATTNLAB_TEST_NEW": "x"}):
        child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['ATTNLAB_TEST_KEPT'], "
                                "os.environ['ATTNLAB_TEST_NEW'])"], capture_output=True, text=True)  # fmt: skip
    assert child.stdout.split() == ["during", "x"]
    assert os.environ["ATTNLAB_TEST_KEPT"] == "before" and "ATTNLAB_TEST_NEW" not in os.environ
