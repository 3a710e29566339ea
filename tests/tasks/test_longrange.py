"""The long-sequence generators: ListOps against LRA's spec and an independent evaluator,
recall and positions answers recomputed from the tokens, determinism, the cache."""

from __future__ import annotations

import random

import numpy as np
import pytest

from attnlab.lab.tasks.longrange import (
    ListOpsSpec,
    evaluate_listops,
    load_listops,
    make_listops,
    make_positions,
    make_recall,
)
from attnlab.lab.tasks.longrange.listops import (
    GENERATOR_VERSION,
    OPERATORS,
    tree_tokens,
    tree_value,
)
from attnlab.lab.tasks.longrange.synthetic import MARKER, positions_answer, recall_answer

TINY = ListOpsSpec(train=40, dev=5, test=5, max_depth=5, max_args=5, min_length=12, max_length=60)


# ---- ListOps ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("[MAX 2 9 [MIN 4 7 ] 0 ]", 9),  # the LRA paper's style of example
        ("[MAX 4 3 [MIN 2 3 ] 1 0 [MED 1 5 8 9 2 ] ]", 5),  # LRA paper, Sec. 3.1 (MEDIAN)
        ("[MED 1 4 ]", 2),  # LRA: int(np.median): the mean of the middle two, rounded down
        ("[MED 3 9 1 4 ]", 3),  # median 3.5 -> 3
        ("[SM 5 7 9 ]", 1),
        ("[MIN [SM 9 9 ] [MAX 1 8 ] ]", 8),
        ("7", 7),
    ],
)
def test_spec_examples(text, value):
    assert evaluate_listops(text) == value


@pytest.mark.parametrize("args", [[1, 4], [0, 9], [3, 3, 8, 9], [2, 7, 5], [9, 0, 1, 2, 8, 8]])
def test_generator_med_is_lras_numpy_median(args):
    assert tree_value(("[MED", args)) == int(np.median(args))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[MAX 2 9", "no closing"),
        ("[MAX 2 ]", "at least 2 arguments"),
        ("[AVG 2 3 ]", "expected a digit or one of"),
        ("[MAX 2 3 ] 4", "unexpected token '4' at 4"),
        ("", "the end of the input"),
    ],
)
def test_evaluator_rejects_malformed_input(text, message):
    with pytest.raises(ValueError, match=message):
        evaluate_listops(text)


def _shape(tokens: list[str]) -> tuple[int, int]:
    """(deepest operator nesting, most arguments of one operator), by a stack walk."""
    depth = deepest = widest = 0
    counts: list[int] = []
    for tok in tokens:
        if tok in OPERATORS:
            if counts:
                counts[-1] += 1
            counts.append(0)
            depth += 1
            deepest = max(deepest, depth)
        elif tok == "]":
            widest = max(widest, counts.pop())
            depth -= 1
        else:
            counts[-1] += 1
    return deepest, widest


def test_listops_conforms_to_its_spec_and_the_independent_evaluator():
    splits = make_listops(TINY)
    assert [len(splits[s]) for s in ("train", "dev", "test")] == [40, 5, 5]
    every = [ex for split in splits.values() for ex in split]
    texts = [" ".join(tokens) for tokens, _ in every]
    assert len(set(texts)) == len(texts)  # distinct trees, as LRA's set
    for tokens, label in every:
        assert TINY.min_length < len(tokens) < TINY.max_length
        depth, width = _shape(tokens)
        assert 1 <= depth <= TINY.max_depth and 2 <= width <= TINY.max_args
        assert evaluate_listops(tokens) == label
    assert len({label for _, label in every}) > 3  # not a constant answer


def test_listops_is_deterministic_with_a_seed():
    assert make_listops(TINY) == make_listops(TINY)
    other = make_listops(ListOpsSpec(**{**TINY.__dict__, "seed": 1}))
    assert other["train"] != make_listops(TINY)["train"]


def test_tree_tokens_and_value_agree_with_the_evaluator_on_deep_trees():
    from attnlab.lab.tasks.longrange.listops import generate_tree

    rng = random.Random(3)
    for _ in range(200):
        tree, length = generate_tree(rng, 1, 10, 10)
        tokens = tree_tokens(tree)
        assert len(tokens) == length
        assert evaluate_listops(tokens) == tree_value(tree)


def test_load_listops_writes_the_cache_once(tmp_path):
    first = load_listops(TINY, root=tmp_path)
    where = tmp_path / "listops" / TINY.dirname()
    assert where.name.startswith(f"v{GENERATOR_VERSION}-") and "seed0" in where.name
    assert sorted(p.name for p in where.iterdir()) == [
        "dev.txt", "meta.json", "test.txt", "train.txt"
    ]  # fmt: skip
    assert [p.name for p in (tmp_path / "listops").iterdir()] == [where.name]  # no temp left
    (where / "train.txt").write_text("3 [MAX 1 3 ]\n")  # read back, not generated again
    assert load_listops(TINY, root=tmp_path)["train"] == [(["[MAX", "1", "3", "]"], 3)]
    assert load_listops(TINY, root=tmp_path)["test"] == first["test"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"train": -1}, "train: expected"),
        ({"max_args": 1}, "max_args: expected"),
        ({"max_depth": 1}, "max_depth: expected"),
        ({"min_length": 50, "max_length": 50}, "min_length, max_length"),
        ({"min_length": 1}, "min_length: expected >= 3"),
    ],
)
def test_listops_spec_errors_name_the_argument(change, message):
    with pytest.raises(ValueError, match=message):
        ListOpsSpec(**{**TINY.__dict__, **change})


# ---- recall and positions ---------------------------------------------------------------------
@pytest.mark.parametrize("distance", [2, 9, 40])
def test_recall_answers_and_distance(distance):
    data = make_recall(50, distance=distance, seed=0)
    assert data == make_recall(50, distance=distance, seed=0)
    assert data != make_recall(50, distance=distance, seed=1)
    for tokens, label in data:
        assert len(tokens) == 2 * (distance // 2 + 1) + 2
        assert recall_answer(tokens) == label
        at = tokens[:-2].index(tokens[-1])  # the queried key, once (recall_answer checks)
        back = len(tokens) - 1 - (at + 1)  # from its value to the query's key
        assert distance // 2 <= back <= distance + 2


@pytest.mark.parametrize(("length", "k"), [(8, 1), (32, 3), (64, 7)])
def test_positions_answers(length, k):
    data = make_positions(100, length=length, k=k, seed=0)
    assert data == make_positions(100, length=length, k=k, seed=0)
    for tokens, label in data:
        assert len(tokens) == length and tokens.count(MARKER) == 1
        assert tokens.index(MARKER) >= k
        assert positions_answer(tokens, k) == label


@pytest.mark.parametrize(
    ("make", "kwargs", "message"),
    [
        (make_recall, {"n": 3, "distance": 1, "seed": 0}, "distance: expected an int >= 2"),
        (make_positions, {"n": 3, "length": 3, "k": 3, "seed": 0}, "length: expected an int > k"),
        (make_positions, {"n": 3, "length": 9, "k": 0, "seed": 0}, "k: expected an int >= 1"),
        (make_recall, {"n": -1, "distance": 4, "seed": 0}, "n: expected"),
    ],
)
def test_synthetic_errors_name_the_argument(make, kwargs, message):
    with pytest.raises(ValueError, match=message):
        make(**kwargs)
