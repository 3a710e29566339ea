"""The graph tasks end to end: ``attnlab train karate``, ``predict --node``, ``show --node``,
``eval``; the tasks' recipe, loss and bad node ids; Cora / CiteSeer on the mirror."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from attnlab.lab.cli import main
from attnlab.lab.tasks import TASKS
from attnlab.lab.tasks.graph import GraphModelConfig, GraphOptions, load_graph
from attnlab.lab.train import RunConfig

PNG = b"\x89PNG\r\n\x1a\n"
TINY = ["--train.epochs=15", "--train.device=cpu", "--train.log_every=0", "--model.hidden=4",
        "--model.heads=2"]  # fmt: skip


@pytest.fixture(scope="module")
def karate(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("karate") / "run"
    assert main(["train", "karate", *TINY, f"--out_dir={out}"]) == 0
    return out


def test_registered_and_listed(capsys):
    for name in ("cora", "citeseer", "karate"):
        assert name in TASKS
    assert main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "cora" in out and "citeseer" in out and "karate" in out


def test_the_recipe_is_the_run_default():
    cfg = RunConfig.for_task("cora")
    t = cfg.train
    assert (t.lr, t.weight_decay, t.schedule, t.grad_clip, t.patience, t.batch_size) == (
        0.005, 0.0, "constant", 0.0, 100, 1)  # fmt: skip
    assert cfg.model.kind == "gat" and cfg.task_options.l2 == 5e-4
    assert cfg.model.gat_variant == "original" and cfg.task_options.select == "auto"
    assert RunConfig.for_task("citeseer").task_options.l2 == 1e-3  # chosen on dev


@pytest.mark.parametrize(("kind", "rule"), [("gat", "acc+loss"), ("gatv2", "acc+loss"),
                                            ("gcn", "acc"), ("graph_attention", "acc")])  # fmt: skip
def test_auto_selection_is_gats_rule_for_the_gat_kinds(kind, rule):
    task = TASKS.get("karate")()
    task.setup(task.default_options())
    task.build_model(GraphModelConfig(kind=kind, hidden=2, heads=2))
    assert task.rule == rule
    task.setup(GraphOptions(select="loss"))  # a rule given is the rule
    assert task.rule == "loss"


def test_karate_split():
    g = load_graph("karate")
    assert g.num_nodes == 34 and g.edge_index.shape == (2, 156)
    sizes = {s: idx.numel() for s, idx in g.splits.items()}
    assert sizes == {"train": 8, "dev": 6, "test": 20}
    for c in (0, 1):  # 4 labelled members of each club
        assert int((g.y[g.splits["train"]] == c).sum()) == 4


def test_loss_adds_the_l2_penalty_to_the_mean():
    task = TASKS.get("karate")()
    task.setup(GraphOptions(l2=0.1))
    torch.manual_seed(0)
    model = task.build_model(GraphModelConfig(kind="mlp", dropout=0.0))
    batch = task.collate(["train"])
    loss, units = task.loss(model, batch)
    ce = torch.nn.functional.cross_entropy(model(batch)[batch["index"]], batch["labels"])
    l2 = sum(p.pow(2).sum() for p in model.parameters())
    assert units == 8
    torch.testing.assert_close(loss / units, ce + 0.05 * l2)


def test_train_writes_a_run(karate):
    for name in ("config.json", "metrics.json", "best.pt"):
        assert (karate / name).is_file()
    metrics = json.loads((karate / "metrics.json").read_text())
    assert 0.0 <= metrics["test"]["accuracy"] <= 1.0


def test_predict_nodes(karate, capsys):
    assert main(["predict", str(karate), "--node", "0", "--node", "33", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["node"] for r in records] == [0, 33]
    for r in records:
        assert r["label"] in ("Mr. Hi", "Officer")
        assert sum(r["probabilities"].values()) == pytest.approx(1.0, abs=1e-3)
    assert records[0]["gold"] == "Mr. Hi" and records[1]["gold"] == "Officer"
    assert main(["predict", str(karate), "5"]) == 0  # a bare id works too
    assert capsys.readouterr().out.startswith("node 5: ")


@pytest.mark.parametrize("bad", [["--node", "34"], ["--node", "-1"], ["twelve"], []])
def test_predict_bad_node_is_one_clean_error(karate, capsys, bad):
    assert main(["predict", str(karate), *bad]) == 2
    err = capsys.readouterr().err
    assert "node" in err and "Traceback" not in err
    if not bad:  # nothing given: the graph task names its own flag, not the text tasks' advice
        assert "--node" in err


def test_show_draws_a_png(karate, tmp_path, capsys):
    out = tmp_path / "karate.png"
    assert main(["show", str(karate), "--node", "0", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG


def test_show_without_attention_draws_plain_edges(tmp_path, capsys):
    run = tmp_path / "mlp"
    assert main(["train", "karate", *TINY, "--model.kind=mlp", f"--out_dir={run}"]) == 0
    out = tmp_path / "mlp.png"
    assert main(["show", str(run), "--node", "3", "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG
    capsys.readouterr()
    assert main(["show", str(run), "--node", "3", "--layer", "1", "--out", str(out)]) == 2
    assert "a mlp model has no attention weights to show" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--layer", "2"], ["--head", "2"], ["--layer", "1", "--head", "1"]])  # fmt: skip
def test_show_layer_and_head_draw_the_neighbourhood_heatmap(karate, tmp_path, flags):
    """GAT's layers differ in heads (2, then 1): each choice draws the layers that have it."""
    out = tmp_path / "heads.png"
    assert main(["show", str(karate), "--node", "0", *flags, "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG


def test_attention_map_rows_are_the_weights_among_the_neighbourhood(karate):
    """Node 0's row holds all its in-edges (its neighbours are all drawn): it sums to one."""
    from attnlab.lab.commands import load_for_inference

    task, model, _ = load_for_inference(str(karate))
    attn = task.attention_map(model, 0)
    assert attn.queries[0] == "0" and attn.queries == attn.keys
    assert [w.shape[0] for w in attn.weights] == [2, 1]  # heads per layer
    for w in attn.weights:
        torch.testing.assert_close(w[:, 0].sum(-1), torch.ones(w.shape[0]))
        assert ((w >= 0) & (w <= 1)).all()


def test_eval_reports_accuracy(karate, capsys):
    assert main(["eval", str(karate), "--split", "test"]) == 0
    assert "accuracy" in capsys.readouterr().out


# -- the Planetoid graphs (mirror) ------------------------------------------------------------


@pytest.mark.usefixtures("data_mirror")
def test_citeseer_isolated_nodes_finite_and_predicted(tmp_path):
    task = TASKS.get("citeseer")()
    task.setup(GraphOptions())
    g = task.graph
    degree = torch.bincount(g.edge_index[1], minlength=g.num_nodes)
    isolated = (degree == 0).nonzero().view(-1)
    assert isolated.numel() == 48
    torch.manual_seed(0)
    for kind in ("gat", "gcn", "graph_attention"):
        model = task.build_model(GraphModelConfig(kind=kind)).eval()
        with torch.no_grad():
            logits = model(task.collate(["test"]))
        assert torch.isfinite(logits).all(), kind
    records = task.predict(model, isolated[:2].tolist())
    assert all(abs(sum(r["probabilities"].values()) - 1) < 1e-3 for r in records)


@pytest.mark.usefixtures("data_mirror")
def test_cora_unknown_node_names_the_range():
    task = TASKS.get("cora")()
    with pytest.raises(ValueError, match="node 2708 does not exist.*0 to 2707"):
        task.command_inputs([], {"nodes": [2708]})
