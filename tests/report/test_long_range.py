"""Claim 3 of ``attnlab report``: the long-range minimal pairs obey their construction rules, a
window of 3 cannot tell the two sentences of a pair apart, and the verdict follows the rule."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.models.baselines import FCEncoder
from attnlab.lab.report.claims import BUDGETS, CLAIMS, select
from attnlab.lab.report.claims_context import LongRange, pair_table
from attnlab.lab.report.jobs import JobResult
from attnlab.lab.report.minimal_pairs import MIN_DISTANCE, Pair, check, pairs, parse, scores
from attnlab.lab.report.stats import Verdict

#: the tags of the pos task on Brown (universal tags)
BROWN_TAGS = {".", "ADJ", "ADP", "ADV", "CONJ", "DET", "NOUN", "NUM", "PRON", "PRT", "VERB", "X"}


def test_there_are_at_least_40_pairs_each_built_by_the_rules():
    chosen = pairs()
    assert len(chosen) >= 40
    assert len({(p.a, p.b) for p in chosen}) == len(chosen)  # no pair twice
    for p in chosen:
        where = f"pair of line {p.line}: {' '.join(p.a)} / {' '.join(p.b)}"
        assert len(p.a) == len(p.b), where
        differ = [i for i, (x, y) in enumerate(zip(p.a, p.b)) if x != y]
        assert len(differ) == 1, where
        assert abs(differ[0] - p.index) >= MIN_DISTANCE, where
        for j in (p.index - 1, p.index, p.index + 1):  # the window of 3 (none past an end)
            if 0 <= j < len(p.a):
                assert p.a[j] == p.b[j], where
        assert p.tag_a != p.tag_b and {p.tag_a, p.tag_b} <= BROWN_TAGS, where
        assert check(p) == []


def test_check_names_each_broken_rule():
    good = pairs()[0]
    assert check(good) == []
    assert "length" in check(Pair("x", 2, good.a, "ADP", (*good.b, "."), "DET"))[0]
    near = list(good.b)
    near[good.index + 2] = "zebra"  # a second difference, 2 tokens away
    assert any("differ in 2 positions" in m for m in check(Pair("x", 2, good.a, "ADP",
                                                                 tuple(near), "DET")))  # fmt: skip
    close = list(good.a)
    close[good.index + 1] = "zebra"  # the only difference, a neighbour
    problems = check(Pair("x", good.index, good.a, "ADP", tuple(close), "DET"))
    assert any("tokens from the ambiguous word" in m for m in problems)
    assert any("window of 3" in m for m in problems)
    assert any("both readings" in m for m in check(Pair("x", 2, good.a, "DET", good.b, "DET")))
    with pytest.raises(ValueError, match=r"pairs.tsv:2: expected 6 tab-separated fields"):
        parse("# comment\nthat\t2\tADP\n", "pairs.tsv")


def test_a_window_of_3_sees_the_same_input_in_both_sentences_of_every_pair():
    torch.manual_seed(0)
    words = sorted({w for p in pairs() for s in (p.a, p.b) for w in s})
    table = dict(zip(words, torch.randn(len(words), 8)))
    window = FCEncoder(8, context=3, hidden=16).eval()
    for p in pairs():
        x = torch.stack([torch.stack([table[w] for w in s]) for s in (p.a, p.b)])  # (2, n, 8)
        h, _ = window.encode(x, torch.tensor([len(p.a)] * 2), need_weights=False)
        assert torch.equal(h[0, p.index], h[1, p.index])  # the same tag for both, always


def test_scores_count_pairs_and_sentences():
    chosen = pairs()[:4]
    right_a = [p.tag_a for p in chosen]
    right_b = [p.tag_b for p in chosen]
    assert scores(right_a, right_b, chosen)["pair_accuracy"] == 1.0
    same = scores(right_a, right_a, chosen)  # a window: the same tag twice
    assert same["pair_accuracy"] == 0.0 and same["accuracy"] == 0.5 and same["same_tag"] == 1.0
    half = scores(right_a, [*right_b[:2], *right_a[2:]], chosen)
    assert half["pair_accuracy"] == 0.5 and half["wrong"] == [2, 3]


def _result(label: str, seed: int, dev: float, pair: float, same: float = 0.0) -> JobResult:
    metrics = {"best_score": dev, "metric_name": "accuracy", "test": {"accuracy": dev},
               "minimal_pairs": {"pair_accuracy": pair, "accuracy": 0.5 + pair / 2,
                                 "same_tag": same}}  # fmt: skip
    return JobResult(f"{label}{seed}", "pos", [], seed, label, metrics, 1.0, {})


def _analyse(claim: LongRange, sa: list[float], window_same=(1.0, 1.0), extra=None):
    window, attention = claim.WINDOW[0], claim.ATTENTION[0][0]
    results = {window: [_result(window, s, 0.9, 0.0, same) for s, same in enumerate(window_same)],
               attention: [_result(attention, s, 0.95, v) for s, v in enumerate(sa)]}  # fmt: skip
    results.update(extra or {})
    return claim.analyse(results)


def test_the_verdict_follows_the_rule():
    claim = CLAIMS["self-attention uses the whole sentence"]
    assert select(["long-range"]) == [claim] and claim.number == 3
    held = _analyse(claim, [0.90, 0.93])
    assert held.verdict is Verdict.HELD
    assert any("seed 1: 93.0% pairs" in n and "that 22/22" in n for n in held.notes)
    assert _analyse(claim, [0.50, 0.60]).verdict is Verdict.NOT_HELD
    assert _analyse(claim, [0.70, 0.95]).verdict is Verdict.INCONCLUSIVE  # straddles 0.80
    assert _analyse(claim, [0.95]).verdict is Verdict.INCONCLUSIVE  # one seed
    broken = _analyse(claim, [0.90, 0.93], window_same=(1.0, 0.9))  # the construction fails
    assert broken.verdict is Verdict.NOT_HELD
    pending = claim.analyse({claim.WINDOW[0]: [], claim.ATTENTION[0][0]: []})
    assert pending.verdict is Verdict.PENDING
    unmeasured = _analyse(claim, [0.90, 0.93])
    assert "0.8" in claim.rule and unmeasured.details == pair_table()


def test_the_attention_variant_is_chosen_on_dev_not_on_the_pairs():
    claim = LongRange()
    claim.ATTENTION = (*claim.ATTENTION, ("bigger", ("--model.input.dim=256",)))
    # the bigger tagger is better on dev and worse on the pairs: it is the one tested
    bigger = {"bigger": [_result("bigger", s, 0.99, 0.1) for s in (0, 1)]}
    section = _analyse(claim, [0.95, 0.96], extra=bigger)
    assert section.verdict is Verdict.NOT_HELD
    assert "bigger (chosen on dev)" in section.comparisons[1][0]


def test_a_variant_still_running_keeps_the_verdict_pending():
    claim = LongRange()
    section = _analyse(claim, [0.90, 0.93], extra={claim.PRETRAINED: []})
    assert section.comparisons[1][1] is Verdict.PENDING  # the choice on dev is not made yet


def test_the_pretrained_variant_fine_tunes_a_masked_lm_of_the_taggers_shape():
    claim, smoke = LongRange(), BUDGETS["smoke"]
    runs = claim.jobs(smoke)[claim.PRETRAINED]
    assert [j.seed for j in runs] == list(smoke.seeds)
    mlm = runs[0].init
    assert all(j.init == mlm for j in runs) and mlm.task == "mlm" and mlm.seed == 0
    tagger, lm = runs[0].config()["model"], mlm.config()["model"]
    assert lm["input"]["dim"] == tagger["input"]["dim"] == 32  # the budget's tagger shape
    for name in ("positional", "dropout", "depth", "heads", "ff_hidden"):
        assert lm["encoder"][name] == tagger["encoder"][name], name
    assert mlm.config()["task_options"]["lowercase"] is False  # rows match the tagger's words


def test_claim_3_trains_its_own_attention_recipe_beyond_the_smoke_budget():
    claim, window = LongRange(), CLAIMS["a window gives context"]
    keys = lambda jobs: {j.key for rs in jobs.values() for j in rs}  # noqa: E731
    smoke = BUDGETS["smoke"]
    own = {k: v for k, v in claim.jobs(smoke).items() if k != claim.PRETRAINED}
    assert keys(own) <= keys(window.jobs(smoke))  # shared with claim 1: run once
    quick = claim.jobs(BUDGETS["quick"])
    for label, rs in quick.items():
        names = [o.split("=")[0] for o in rs[0].options]
        assert len(names) == len(set(names))  # each option once: the claim's replace the budget's
        own_steps = claim.TRAIN["quick"][1]  # instead of the budget's own step count
        assert own_steps.startswith("--train.max_steps=")
        assert own_steps not in BUDGETS["quick"].options["pos"]
        assert (own_steps in rs[0].options) == (label != claim.WINDOW[0])
    # the window is claim 1's run at every budget: at chance by construction, whatever its steps
    assert {j.key for j in quick[claim.WINDOW[0]]} <= keys(window.jobs(BUDGETS["quick"]))
