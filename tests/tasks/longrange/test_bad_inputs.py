"""``predict`` on a ListOps run refuses what is not one well-formed expression of the task's
alphabet, naming the token and what was expected there (issue 32: a malformed expression was
answered, rc 0, and ``--json`` dropped its ``answer`` silently)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnlab.lab.tasks.longrange import PositionsTask, RecallTask

TINY = [
    "--task_options.train=32", "--task_options.dev=8", "--task_options.test=8",
    "--task_options.max_depth=3", "--task_options.max_args=3",
    "--task_options.min_length=6", "--task_options.max_length=30",
    "--model.input.dim=16", "--model.encoder.depth=1", "--model.encoder.heads=2",
    "--model.encoder.ff_hidden=32", "--train.epochs=1", "--train.batch_size=16",
    "--train.device=cpu", "--train.log_every=0",
]  # fmt: skip


@pytest.fixture(scope="module")
def listops(tmp_path_factory, no_mirror) -> Path:
    from attnlab.lab.cli import main

    out = tmp_path_factory.mktemp("listops") / "run"
    assert main(["train", "listops", *TINY, f"--out_dir={out}"]) == 0
    return out


MALFORMED = {
    "[MAX 2 9": ["the [MAX at token 0 has no closing ']'", "expected ']' at token 3"],
    "[FOO 1 2 ]": ["token 0 is '[FOO', not in the task's alphabet", "[MAX"],
    "[MAX 2 99 ]": ["token 2 is '99', not in the task's alphabet"],
    "]": ["token 0 is ']'; expected a digit or one of [MIN, [MAX, [MED, [SM"],
    "[max 2 9 ]": ["token 0 is '[max', not in the task's alphabet"],
    "[MAX 2 9 ] 3": ["unexpected token '3' at 4 after a whole expression"],
    "[MAX 2 ]": ["the [MAX at token 0 needs at least 2 arguments, got 1"],
    "[SM [MIN 1 ] 2 ]": ["the [MIN at token 1 needs at least 2 arguments, got 1"],
    "   ": ["empty input"],
}


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["text", "json"])
@pytest.mark.parametrize("text", list(MALFORMED))
def test_a_malformed_expression_is_refused_naming_the_token(listops, cli, text, json_flag):
    ran = cli("predict", listops, text, *json_flag)
    ran.user_error("predict", "listops", *MALFORMED[text])


def test_one_bad_input_among_good_ones_prints_nothing(listops, cli):
    cli("predict", listops, "[MAX 1 2 ]", "[MAX 2 9", "[MIN 3 4 ]").user_error(
        "predict", "no closing"
    )


def test_every_answer_is_in_the_json(listops, cli):
    ran = cli("predict", listops, "--json", "[MAX 2 9 [MIN 4 7 ] 0 ]", "[SM 5 6 ]", "[MED 1 2 3 ]")
    assert ran.rc == 0, ran.err
    records = [json.loads(line) for line in ran.out.splitlines()]
    assert [r["answer"] for r in records] == ["9", "1", "2"]
    assert all(r["label"] in list("0123456789") for r in records)


@pytest.mark.parametrize(
    ("task", "text", "bad"),
    [(RecallTask, "a 1 b 2 ? z", "z"), (PositionsTask, "1 2 # 3 10", "10")],
)
def test_other_long_range_tasks_refuse_tokens_outside_their_alphabet(task, text, bad):
    t = task()
    t.build_model(t.default_model_config())
    with pytest.raises(ValueError, match=f"token {text.split().index(bad)} is '{bad}', not in"):
        t.parse_input(text)
