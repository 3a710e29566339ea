"""The picture of ``attnlab show --node`` for graphs: one colour bar for the edges' attention
weights, every node's id, the node's prediction in the title; and, for the heatmap of a
neighbourhood, the pairs without an edge (:func:`absent_pairs`), drawn masked, not as 0."""

from __future__ import annotations

import pytest
import torch

from attnlab.lab.tasks.graph import GraphModelConfig
from attnlab.lab.tasks.graph.draw import absent_pairs, neighbourhood, neighbourhood_figure
from attnlab.lab.tasks.graph.task import KarateTask
from attnlab.lab.viz import attention_figure


@pytest.fixture(scope="module")
def karate():
    """The karate task and an untrained (seeded) 2-head GAT."""
    task = KarateTask()
    torch.manual_seed(0)
    model = task.build_model(GraphModelConfig(hidden=4, heads=2)).eval()
    return task, model


def test_edge_colour_scale_node_ids_and_prediction_in_the_title(karate):
    task, model = karate
    graph = task._load()
    fig = neighbourhood_figure(task, model, graph, 0, title="karate: --node 0")
    bars = [ax for ax in fig.axes if getattr(ax, "_colorbar", None) is not None]
    assert len(bars) == 1 and bars[0].get_ylabel().startswith("attention weight")
    panels = [ax for ax in fig.axes if ax.get_title().startswith("head")]
    assert len(panels) == 2
    for ax in panels:  # every node's id drawn (karate: the whole graph)
        ids = {t.get_text() for t in ax.texts}
        assert ids == {str(i) for i in range(graph.num_nodes)}
    record = task.predict(model, [0])[0]
    title = fig._suptitle.get_text()
    p = record["probabilities"][record["label"]]
    assert title.startswith("karate: --node 0\n")
    assert f"node 0: predicted {record['label']} (p {p:.2f}; gold {record['gold']}, " in title


def test_one_edge_scale_for_every_head(karate):
    """The bar reads the largest weight of every head drawn (not each head's own maximum)."""
    task, model = karate
    graph = task._load()
    fig = neighbourhood_figure(task, model, graph, 0)
    (bar,) = [ax._colorbar for ax in fig.axes if getattr(ax, "_colorbar", None) is not None]
    with torch.no_grad():
        out = model(task._batch(graph, torch.tensor([0])), need_weights=True)
    edges, weights = out.attention[0]  # the first layer's, as the panels draw
    drawn = weights[edges[0] != edges[1]]  # self loops are not drawn
    assert bar.norm.vmax == pytest.approx(float(drawn.max()), rel=1e-5)


def test_absent_pairs_are_the_non_edges_of_the_neighbourhood(karate):
    task, model = karate
    graph = task._load()
    nodes = neighbourhood(graph.edge_index, 0)
    absent = absent_pairs(graph.edge_index, nodes)
    edges = {(int(s), int(d)) for s, d in graph.edge_index.T}
    expected = torch.tensor([[a != b and (b, a) not in edges for b in nodes] for a in nodes])
    assert torch.equal(absent, expected)
    # attention_map's zeros are exactly these pairs: masked, they are not drawn as weight 0
    attn = task.attention_map(model, 0)
    for w in attn.weights:
        assert (w[:, absent] == 0).all() and (w[:, ~absent] > 0).all()
    fig = attention_figure(attn.weights, attn.keys, masked=absent, masked_label="no edge")
    for ax in [ax for ax in fig.axes if ax.images]:
        assert torch.equal(torch.as_tensor(ax.images[0].get_array().mask), absent)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["no edge"]


def test_absent_pairs_of_an_attention_layer_count_its_self_loops():
    """A layer's own edge list (self loops included) gives the same pairs without the flag."""
    edges = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])  # 0 - 1 - 2, both directions
    loops = torch.cat([edges, torch.arange(3).repeat(2, 1)], dim=1)
    expected = torch.tensor([[False, False, True], [False, False, False], [True, False, False]])
    assert torch.equal(absent_pairs(edges, [0, 1, 2]), expected)
    assert torch.equal(absent_pairs(loops, [0, 1, 2], self_loops=False), expected)
    assert absent_pairs(edges, [0, 1, 2], self_loops=False).diagonal().all()
