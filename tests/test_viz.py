"""Attention pictures a person can read: one colour scale with a colour bar, named axes, a title
above the panels, a layout that scales from 5 to 100 tokens, and one layer/head on request."""

from __future__ import annotations

import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg

from attnlab.lab.viz import MAX_WIDTH, attention_figure, plot_attention

PNG = b"\x89PNG\r\n\x1a\n"


def _weights(layers: int, heads: int, n: int, m: int | None = None, seed: int = 0) -> list:
    """Per layer ``(h, n, m)`` row-stochastic weights."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(heads, n, m or n, generator=g).mul(3).softmax(-1) for _ in range(layers)]


def _tokens(n: int) -> list[str]:
    return [f"w{i}" for i in range(n)]


def _panels(fig) -> list:
    """The heatmap axes (the colour bar's axes hold no image)."""
    return [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]


def _labels(ticks) -> list[str]:
    return [t.get_text() for t in ticks if t.get_text()]


def _drawn(fig):
    """Lay ``fig`` out as saving it would; return the renderer (for sizes in pixels)."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    return renderer


def test_one_colour_scale_for_every_panel_and_a_colour_bar():
    weights = _weights(2, 3, 6)
    fig = attention_figure(weights, _tokens(6))
    panels = _panels(fig)
    assert len(panels) == 6
    norms = {id(ax.images[0].norm) for ax in panels}
    assert len(norms) == 1  # one Normalize object shared by every panel
    norm = panels[0].images[0].norm
    assert norm.vmin == 0.0
    assert norm.vmax == pytest.approx(max(float(w.max()) for w in weights))
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(bars) == 1 and bars[0].get_ylabel() == "attention weight"


def test_axes_are_named_queries_rows_and_keys_columns():
    fig = attention_figure(_weights(2, 2, 5, 7), _tokens(7), query_tokens=_tokens(5))
    panels = _panels(fig)
    assert {ax.get_ylabel() for ax in panels} == {"queries", ""}
    assert {ax.get_xlabel() for ax in panels} == {"keys", ""}
    left = [ax for ax in panels if ax.get_ylabel() == "queries"]
    bottom = [ax for ax in panels if ax.get_xlabel() == "keys"]
    assert len(left) == 2 and len(bottom) == 2  # once per row, once per column
    # rows are queries, columns keys: the image is (queries, keys)
    assert panels[0].images[0].get_array().shape == (5, 7)
    assert _labels(left[0].get_yticklabels()) == _tokens(5)
    assert _labels(bottom[0].get_xticklabels()) == _tokens(7)


def test_panel_titles_name_layer_and_head():
    fig = attention_figure(_weights(2, 3, 4), _tokens(4))
    titles = [ax.get_title() for ax in _panels(fig)]
    assert titles == [f"layer {layer}, head {head}" for layer in (1, 2) for head in (1, 2, 3)]


@pytest.mark.parametrize("n", [5, 80])
def test_title_is_above_the_panels_at_any_length(n):
    title = "pos: " + " ".join(_tokens(n))
    fig = attention_figure(_weights(2, 4, n), _tokens(n), title=title)
    renderer = _drawn(fig)
    top_of_panels = max(ax.get_window_extent(renderer).y1 for ax in _panels(fig))
    title_box = fig._suptitle.get_window_extent(renderer)
    assert title_box.y0 >= top_of_panels  # never over the panels
    assert title_box.x0 >= 0 and title_box.x1 <= fig.bbox.width + 1  # wrapped into the figure


@pytest.mark.parametrize(("n", "heads"), [(40, 4), (100, 8)])
def test_long_sequences_scale_and_thin_their_tick_labels(n, heads):
    fig = attention_figure(_weights(2, heads, n), _tokens(n))
    width, _ = fig.get_size_inches()
    assert width <= MAX_WIDTH + 0.01
    renderer = _drawn(fig)
    bottom = [ax for ax in _panels(fig) if ax.get_xlabel() == "keys"][0]
    labels = _labels(bottom.get_xticklabels())
    length_pt = bottom.get_window_extent(renderer).width * 72 / fig.dpi  # the key axis
    assert len(labels) * 7.0 <= length_pt  # labels at least their 7-point font apart
    assert labels[0] == "w0" and set(labels) <= set(_tokens(n))


def test_one_layer_and_head_on_request_drawn_larger():
    weights = _weights(3, 4, 80)
    one = attention_figure(weights, _tokens(80), layer=2, head=3)
    (panel,) = _panels(one)
    assert panel.get_title() == "layer 2, head 3"
    assert torch.allclose(torch.as_tensor(panel.images[0].get_array()), weights[1][2])
    assert _labels(panel.get_xticklabels()) == _tokens(80)  # one panel: room for every token
    full = attention_figure(weights, _tokens(80))
    assert one.get_size_inches()[0] >= 0.5 * full.get_size_inches()[0]
    layer = attention_figure(weights, _tokens(80), layer=3)
    assert [ax.get_title() for ax in _panels(layer)] == [f"layer 3, head {h}" for h in range(1, 5)]
    head = attention_figure(weights, _tokens(80), head=1)
    assert [ax.get_title() for ax in _panels(head)] == [f"layer {h}, head 1" for h in range(1, 4)]


def test_a_layer_or_head_the_model_lacks_is_an_error():
    with pytest.raises(ValueError, match=r"layer 4 does not exist: the model has 3 layers"):
        attention_figure(_weights(3, 2, 4), _tokens(4), layer=4)
    with pytest.raises(ValueError, match=r"head 0 does not exist: the model has 2 heads"):
        attention_figure(_weights(3, 2, 4), _tokens(4), head=0)


def test_labels_must_match_the_weights():
    with pytest.raises(ValueError, match="5 queries x 5 keys, but got 5 query and 4 key labels"):
        attention_figure(_weights(1, 1, 5), _tokens(4), query_tokens=_tokens(5))
    with pytest.raises(ValueError, match="no attention weights"):
        attention_figure([], [])


def test_plot_attention_writes_a_png(tmp_path):
    out = plot_attention(_weights(1, 2, 6), _tokens(6), tmp_path / "sub" / "a.png", title="t")
    assert out == tmp_path / "sub" / "a.png" and out.read_bytes()[:8] == PNG


def test_masked_pairs_are_hatched_not_weight_zero():
    """A masked pair is masked in the drawn image (no colour of the map), NaN weights too; the
    colour scale is that of the pairs that exist, and the legend names what is missing."""
    weights = _weights(1, 2, 5)
    absent = torch.rand(5, 5, generator=torch.Generator().manual_seed(1)) < 0.4
    weights[0][1, 0, 0] = float("nan")
    fig = attention_figure(weights, _tokens(5), masked=absent, masked_label="no edge")
    for h, ax in enumerate(_panels(fig)):
        drawn = ax.images[0].get_array()
        expected = absent | weights[0][h].isnan()
        assert torch.equal(torch.as_tensor(drawn.mask), expected)
        assert any(p.get_hatch() for p in ax.patches)  # hatching under the masked cells
    top = max(float(w[~absent].nan_to_num(0).max()) for w in weights[0])
    assert _panels(fig)[0].images[0].norm.vmax == pytest.approx(top)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["no edge"]


def test_masked_per_head_and_of_a_wrong_shape():
    weights = _weights(2, 2, 4)
    per_head = torch.stack([torch.eye(4, dtype=torch.bool), ~torch.eye(4, dtype=torch.bool)])
    fig = attention_figure(weights, _tokens(4), masked=per_head)
    masks = [torch.as_tensor(ax.images[0].get_array().mask) for ax in _panels(fig)]
    assert [torch.equal(m, per_head[h]) for m, h in zip(masks, (0, 1, 0, 1))] == [True] * 4
    with pytest.raises(ValueError, match=r"masked: expected \(i, j\) = \(4, 4\)"):
        attention_figure(weights, _tokens(4), masked=torch.zeros(3, 3, dtype=torch.bool))


def test_nothing_masked_draws_no_hatching_or_legend():
    fig = attention_figure(_weights(1, 2, 4), _tokens(4))
    assert not fig.legends and not any(ax.patches for ax in _panels(fig))


def test_each_line_of_the_title_is_kept():
    """The prediction goes on its own line under the input (``TaskCommands.draw``)."""
    fig = attention_figure(_weights(1, 1, 3), _tokens(3), title="pos: a b c\npredicted: a/X b/Y")
    assert fig._suptitle.get_text().splitlines() == ["pos: a b c", "predicted: a/X b/Y"]
