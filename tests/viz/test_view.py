"""``attnlab.viz``: the weights a page carries are the model's (every layer and head, to the
stated precision), masks arrive as masked, rollout is Abnar & Zuidema's, bad input is refused
in one line. The browser tests (``test_pages.py``) then check what the page does with them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import attnlab
from attnlab.blocks import TransformerEncoder
from attnlab.masks import Causal
from attnlab.viz import Attention, AttentionView, read_page, rollout, view
from attnlab.viz.page import READY_FLAG


@pytest.fixture
def encoder() -> TransformerEncoder:
    torch.manual_seed(0)
    return TransformerEncoder(16, 4, 3)


def _page(v: AttentionView, **kw) -> dict:
    return read_page(v.html(**kw))


def test_page_weights_are_the_models_every_layer_and_head(encoder):
    x = torch.randn(2, 5, 16)
    v = view(encoder, x, tokens=["I", "saw", "a", "saw", "."], index=1)
    expected = [w[1].detach().numpy() for w in encoder(x, need_weights=True).weights]
    page = _page(v)
    assert page["precision"] == "float16"
    family = page["attentions"][0]
    assert family["queries"] == family["keys"] == ["I", "saw", "a", "saw", "."]
    assert len(family["layers"]) == 3
    for want, layer in zip(expected, family["layers"]):
        assert layer["weights"].shape == (4, 5, 5)
        np.testing.assert_allclose(layer["weights"], want, rtol=2.0**-11, atol=1e-7)
    for want, got in zip(expected, v.weights["self-attention"]):  # .weights: the model's own
        np.testing.assert_allclose(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("precision", ["uint8", "auto"])
def test_quantised_pages_hold_each_weight_within_half_a_step_of_its_row_maximum(encoder, precision):
    x = torch.randn(1, 40, 16)
    v = view(encoder, x)
    # a budget small enough that "auto" must give up float16 and bits
    page = _page(v, precision=precision, max_bytes=20_000 if precision == "auto" else 10**9)
    bits = 16 if page["precision"] == "float16" else int(page["precision"].split("-")[0])
    assert bits < 16 and (precision != "uint8" or bits == 8)
    for want, layer in zip(v.weights["self-attention"], page["attentions"][0]["layers"]):
        step = want.max(-1, keepdims=True) / (2**bits - 1)
        assert (np.abs(layer["weights"] - want) <= step / 2 + 1e-7).all()


def test_masked_pairs_arrive_as_masked_not_as_zero(encoder):
    x = torch.randn(1, 4, 16)
    page = _page(view(encoder, x, mask=Causal()))
    for layer in page["attentions"][0]["layers"]:
        future = np.triu(np.ones((4, 4), bool), 1)
        assert (layer["masked"] == future).all()  # (h, i, j), every head
        assert (layer["weights"][:, future] == 0).all()


def test_torch_multihead_attention_is_captured_per_head():
    torch.manual_seed(1)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(1, 6, 8)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = mha

        def forward(self, x):
            return self.attn(x, x, x, need_weights=False)[0]

    v = view(Net(), x)
    _, want = mha(x, x, x, need_weights=True, average_attn_weights=False)
    np.testing.assert_allclose(v.weights["self-attention"][0], want[0].detach().numpy(), atol=1e-7)


def test_cross_attention_is_its_own_family():
    torch.manual_seed(2)

    class Cross(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = attnlab.MultiHeadAttention(8, 2)

        def forward(self, x, memory):
            return self.attn(x, memory).out

    v = view(Cross(), torch.randn(1, 3, 8), torch.randn(1, 5, 8), tokens=["a", "b", "c"],
             context_tokens=list("vwxyz"))  # fmt: skip
    (fam,) = v.attentions
    assert fam.name == "cross-attention" and fam.keys == list("vwxyz") and fam.rollout() is None


def test_rollout_is_the_hand_computation_on_three_tokens():
    a1 = np.array([[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]],
                   [[0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [0.0, 0.0, 1.0]]])  # fmt: skip
    a2 = np.array([[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
    # by hand: each layer's head mean, half identity, rows renormalised (they already sum to 1)
    m1 = 0.5 * np.eye(3) + 0.5 * np.array([[0.5, 0.5, 0.0], [0.5, 0.25, 0.25], [0.1, 0.15, 0.75]])
    m2 = 0.5 * np.eye(3) + 0.5 * a2[0]
    np.testing.assert_allclose(rollout([a1, a2]), m2 @ m1, atol=1e-15)
    assert np.allclose(rollout([a1, a2]).sum(-1), 1.0)
    page = _page(AttentionView(Attention("self-attention", [a1, a2], ["x", "y", "z"])))
    np.testing.assert_allclose(page["attentions"][0]["rollout"], m2 @ m1, rtol=2.0**-11)


def test_a_model_without_attention_is_refused_in_one_line():
    with pytest.raises(ValueError, match="no attention layer") as info:
        view(nn.Sequential(nn.Linear(4, 4)), torch.randn(1, 3, 4))
    assert "\n" not in str(info.value)


def test_a_kernel_without_a_weight_matrix_says_so():
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = attnlab.MultiHeadAttention(8, 2, kernel="linear")

        def forward(self, x):
            return self.attn(x).out

    with pytest.raises(ValueError, match="keeps no weights to show"):
        view(Net(), torch.randn(1, 4, 8))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weights": [np.zeros((2, 3, 3))], "queries": ["a", "b"]}, "3 queries x 3 keys"),
        ({"weights": [np.zeros((2, 3, 3)), np.zeros((2, 4, 4))], "queries": list("abc")},
         r"every layer must be \(h, 3, 3\)"),
        ({"weights": [np.zeros((2, 3, 3))], "queries": list("abc"), "masked": np.zeros((4, 4))},
         "does not broadcast"),
        ({"weights": [], "queries": []}, "no layers"),
    ],
)  # fmt: skip
def test_bad_attention_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Attention("self-attention", **kwargs)


def test_labels_must_match_the_positions(encoder):
    with pytest.raises(ValueError, match="tokens: 2 labels given, but the self-attention has 5"):
        view(encoder, torch.randn(1, 5, 16), tokens=["a", "b"])


def test_the_page_is_self_contained_and_jupyter_renders_it_sandboxed(encoder, tmp_path):
    v = view(encoder, torch.randn(1, 5, 16), title="a </script> title")
    path = v.save(tmp_path / "sub" / "page.html")
    text = path.read_text()
    assert "<script src" not in text and "<link" not in text  # everything inline
    assert "default-src 'none'" in text  # the page may not load anything
    assert READY_FLAG in text and "a </script> title" not in text.split("<body>")[1]
    assert read_page(text)["title"] == "a </script> title"
    html = v._repr_html_()
    assert html.startswith("<iframe srcdoc=") and 'sandbox="allow-scripts"' in html
    assert not list(tmp_path.glob("sub/*.tmp"))  # written atomically


def _softmax_layers(std: float, n: int = 512) -> list[np.ndarray]:
    """6 layers x 8 heads of ``n x n`` attention: the softmax of N(0, std^2) scores (std 0.3:
    near uniform, as untrained; std 3: peaked, a few keys per query, as trained heads are)."""
    rng = np.random.default_rng(0)
    return [torch.softmax(torch.from_numpy(rng.normal(0, std, (8, n, n))), -1).numpy()
            for _ in range(6)]  # fmt: skip


@pytest.mark.parametrize(
    ("n", "budget"),
    [(128, 312_500), pytest.param(512, 5_000_000, marks=pytest.mark.slow)],
)  # the case: 6 layers x 8 heads on 512 tokens <= 5 MB; 128 tokens, 1/16 of it
def test_a_page_drops_bits_to_keep_its_size_budget_and_says_so(n, budget, caplog):
    labels = list(map(str, range(n)))
    page = AttentionView(Attention("self-attention", _softmax_layers(3.0, n), labels)).html(
        max_bytes=budget
    )
    assert len(page) <= budget
    bits = read_page(page)["precision"]
    assert bits.endswith("-bit") and 4 <= int(bits.split("-")[0]) <= 8
    uniform = AttentionView(Attention("self-attention", _softmax_layers(0.3, n), labels))
    with caplog.at_level("WARNING"):
        page = uniform.html(max_bytes=budget // 3)
    assert len(page) > budget // 3 and read_page(page)["precision"] == "4-bit"
    assert "budget even at 4 bits" in caplog.text
