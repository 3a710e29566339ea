"""Claim 7 of ``attnlab report``: one trained ``positions`` model tested at L, 2L and 4L."""

from __future__ import annotations

import json

import pytest

from attnlab.lab.cli import main
from attnlab.lab.report.claims import PositionalEncodings
from attnlab.lab.report.extrapolation import scores_at_lengths
from attnlab.lab.report.jobs import JobResult
from attnlab.lab.report.stats import Verdict


def test_a_positions_run_tested_at_2l_scores_as_a_run_whose_test_split_is_2l(tmp_path, capsys):
    # Claim 7 tests one trained model at 2L and 4L: the same numbers as training the same
    # model (same seed) with its test split drawn at that length, as the report once did.
    common = [
        "train", "positions", "--task_options.train=48", "--task_options.dev=16",
        "--task_options.test=16", "--task_options.length=8", "--task_options.k=1",
        "--model.input.dim=32", "--model.encoder.depth=1", "--model.encoder.heads=2",
        "--model.encoder.ff_hidden=64", "--model.encoder.positional=rotary",
        "--train.device=cpu", "--train.log_every=0", "--train.batch_size=16",
        "--train.epochs=2", "--train.seed=3",
    ]  # fmt: skip
    runs = {n: tmp_path / f"test{n}" for n in (0, 16, 32)}
    for n, run in runs.items():
        assert main([*common, f"--task_options.test_length={n}", f"--out_dir={run}"]) == 0
    at = scores_at_lengths(runs[0])
    for name, n in (("2L", 16), ("4L", 32)):
        want = json.loads((runs[n] / "metrics.json").read_text())["test"]
        assert at[name] == pytest.approx(want, rel=1e-6), name


def _result(label: str, seed: int, dev: float, at: dict[str, float]) -> JobResult:
    metrics = {"best_score": dev, "metric_name": "accuracy", "test": {"accuracy": at["L"]},
               "test_at": {k: {"accuracy": v} for k, v in at.items() if k != "L"}}  # fmt: skip
    return JobResult(f"{label}{seed}", "positions", [], seed, label, metrics, 1.0, {})


def _analyse(scores: dict[str, tuple[float, dict[str, float]]]):
    claim = PositionalEncodings()
    results = {name: [] for name, _ in claim.variants()}
    for name, (dev, at) in scores.items():
        # three seeds a little apart, so that the bootstrap interval is narrow but not empty
        results[name] = [_result(name, s, dev + 0.001 * s, {k: v + 0.001 * s for k, v in at.items()})
                         for s in range(3)]  # fmt: skip
    return claim.analyse(results)


CHANCE = {"L": 0.1, "2L": 0.1, "4L": 0.1}


def test_claim_7_chooses_on_dev_and_tests_2l_within_the_chosen_relative_encoding():
    # rotary leads on dev (though ALiBi holds up better at 2L): rotary's drop decides
    section = _analyse({"none": (0.1, CHANCE), "sinusoidal": (0.2, CHANCE),
                        "rotary": (0.99, {"L": 0.99, "2L": 0.97, "4L": 0.8}),
                        "ALiBi": (0.6, {"L": 0.6, "2L": 0.6, "4L": 0.6})})  # fmt: skip
    assert [v for _, v, _ in section.comparisons] == [Verdict.HELD, Verdict.HELD]
    assert "rotary chosen on dev" in section.comparisons[1][0]
    assert section.verdict is Verdict.HELD
    title, head, rows = section.details
    assert head == ["encoding", "test at L (%)", "test at 2L (%)", "test at 4L (%)"]
    assert rows[3] == ["rotary", "99.1", "97.1", "80.1"]
    assert rows[2] == ["learned", "pending", "pending", "pending"]

    dropped = _analyse({"none": (0.1, CHANCE), "rotary": (0.99, {"L": 0.99, "2L": 0.5, "4L": 0.2})})
    assert [v for _, v, _ in dropped.comparisons] == [Verdict.HELD, Verdict.NOT_HELD]
    assert dropped.verdict is Verdict.NOT_HELD


def test_claim_7_is_pending_until_an_encoding_has_results():
    section = _analyse({"none": (0.1, CHANCE)})
    assert [v for _, v, _ in section.comparisons] == [Verdict.PENDING, Verdict.PENDING]
