"""A trained model scored again under other test conditions: claim 7 (one ``positions`` model
tested at L, 2L and 4L) and claim 15 (one ``g2p`` model decoded greedily and with a beam)."""

from __future__ import annotations

import json

import pytest

from attnlab.lab.cli import main
from attnlab.lab.report.claims import OutputLength, PositionalEncodings
from attnlab.lab.report.jobs import JobResult
from attnlab.lab.report.rescore import BEAM, beam_scores, scores_at_lengths
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
    assert rows[6] == ["rotary", "99.1", "97.1", "80.1"]
    assert rows[2] == ["learned", "pending", "pending", "pending"]

    dropped = _analyse({"none": (0.1, CHANCE), "rotary": (0.99, {"L": 0.99, "2L": 0.5, "4L": 0.2})})
    assert [v for _, v, _ in dropped.comparisons] == [Verdict.HELD, Verdict.NOT_HELD]
    assert dropped.verdict is Verdict.NOT_HELD


def test_claim_7_says_which_encodings_never_learnt_the_task_at_l():
    learnt = {"L": 0.9, "2L": 0.9, "4L": 0.9}
    section = _analyse({"none": (0.1, CHANCE), "sinusoidal": (0.15, {**CHANCE, "L": 0.15}),
                        "learned": (0.9, learnt), "rotary": (0.99, learnt)})  # fmt: skip
    assert "not learnt at L (test within 10 points of none's): sinusoidal" in section.notes
    section = _analyse({"none": (0.1, CHANCE), "learned": (0.1, CHANCE), "rotary": (0.9, learnt)})
    assert ("not learnt at L (test within 10 points of none's): learned; so the claim's 'where "
            "learned absolute positions cannot' is not tested at this budget") in section.notes  # fmt: skip


def test_claim_7_is_pending_until_an_encoding_has_results():
    section = _analyse({"none": (0.1, CHANCE)})
    assert [v for _, v, _ in section.comparisons] == [Verdict.PENDING, Verdict.PENDING]


def test_beam_1_rescoring_gives_the_runs_own_greedy_test_metrics(tmp_path, capsys):
    # The same checkpoint, the same evaluation path: beam width 1 is the run's own decoding.
    from pathlib import Path

    tiny = Path(__file__).parents[1] / "tasks" / "data" / "cmudict.tiny.dict"
    run = tmp_path / "g2p"
    assert main(["train", "g2p", f"--task_options.dict_file={tiny}", "--model.dim=32",
                 "--model.heads=2", "--model.encoder_depth=1", "--model.decoder_depth=1",
                 "--train.epochs=3", "--train.batch_size=8", "--train.lr=1e-2",
                 "--train.device=cpu", "--train.log_every=0", f"--out_dir={run}"]) == 0  # fmt: skip
    metrics = json.loads((run / "metrics.json").read_text())
    greedy = beam_scores(run, beam=1)
    assert greedy["test"] == pytest.approx(metrics["test"], rel=1e-6)
    assert greedy["dev"]["per"] == pytest.approx(metrics["best_dev"]["per"], rel=1e-6)
    beam = beam_scores(run, beam=3)
    assert set(beam) == {"dev", "test"} and beam["test"]["words"] == metrics["test"]["words"]
    # a checkpoint file (benchmarks/g2p.py decodes averaged snapshots so), one split
    assert beam_scores(run / "best.pt", 1, ("test",)) == {"test": greedy["test"]}


def _g2p(seed: int, dev_per: float, beam_per: float) -> JobResult:
    dev = {"per": dev_per, "wer": 0.5, "length_accuracy": 0.9, "letters_length_accuracy": 0.3}
    beam = {**dev, "per": beam_per}
    metrics = {"best_score": dev_per, "metric_name": "per", "higher_is_better": False,
               "best_dev": dev, "test": dev, "dev_at": {f"beam {BEAM}": beam},
               "test_at": {f"beam {BEAM}": beam}}  # fmt: skip
    return JobResult(f"g{seed}", "g2p", [], seed, OutputLength.GREEDY, metrics, 1.0, {})


@pytest.mark.parametrize(("beam_per", "verdict"), [(0.10, Verdict.HELD), (0.14, Verdict.NOT_HELD)])
def test_claim_15_compares_beam_and_greedy_on_the_same_checkpoints(beam_per, verdict):
    greedy = [_g2p(s, 0.12 + 0.001 * s, beam_per + 0.001 * s) for s in range(3)]
    section = OutputLength().analyse({OutputLength.GREEDY: greedy})
    assert [v for _, v, _ in section.comparisons] == [Verdict.HELD, verdict]
    title, head, rows = section.details
    assert rows[0][:2] == ["greedy", "12.10"] and rows[1][:2] == [
        f"beam {BEAM}",
        f"{100 * beam_per + 0.1:.2f}",
    ]
    assert head[3] == "dev length acc. (%)"  # beside the length rule's baseline, no model's
    assert rows[2] == ["one phone per letter", "n/a", "n/a", "30.00", "n/a", "n/a", "30.00"]
    length, per = section.plot.axes  # the three lengths' shares, the two decodings' PER
    assert [len(ax.patches) for ax in (length, per)] == [3, 2]
    assert per.patches[1].get_height() == pytest.approx(100 * (beam_per + 0.001))  # seeds' mean
    assert OutputLength().analyse({OutputLength.GREEDY: []}).verdict is Verdict.PENDING
