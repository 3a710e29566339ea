"""The molecule picture: a colour bar for the atom shading and one for the heatmap; masked
pairs (atoms not bonded under ``structure=mask``) hatched, not drawn as weight 0."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure

from attnlab.lab.chem import mol_from_smiles
from attnlab.lab.chem.draw import molecule_attention_figure

ASPIRIN = "CC(=O)Oc1ccccc1C(=O)O"


@pytest.fixture
def drawn(monkeypatch):
    """The figures :func:`molecule_attention_figure` saves (kept instead of written)."""
    figures: list[Figure] = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: figures.append(self))
    return figures


def _mol_and_weights(seed: int = 0):
    mol = mol_from_smiles(ASPIRIN)
    n = mol.GetNumAtoms()
    matrix = np.random.default_rng(seed).random((n, n))
    return mol, matrix / matrix.sum(1, keepdims=True)


def _bars(fig):
    return {ax.get_xlabel() or ax.get_ylabel(): ax._colorbar
            for ax in fig.axes if getattr(ax, "_colorbar", None) is not None}  # fmt: skip


def test_colour_bars_for_the_shading_and_the_heatmap(drawn, tmp_path):
    mol, matrix = _mol_and_weights()
    n = matrix.shape[0]
    molecule_attention_figure(mol, matrix.mean(0), matrix, tmp_path / "m.png",
                              title="t\npredicted x: 1.00", weights_label="pooling attention")  # fmt: skip
    (fig,) = drawn
    bars = _bars(fig)
    assert sorted(bars) == ["atom shading: pooling attention", "attention weight"]
    # the shading's bar spans what draw_atom_weights maps: 0 to max(weights, 2 / n)
    assert bars["atom shading: pooling attention"].norm.vmax == pytest.approx(
        max(matrix.mean(0).max(), 2.0 / n)
    )
    assert fig._suptitle.get_text() == "t\npredicted x: 1.00"
    assert not fig.legends


def test_masked_pairs_are_hatched(drawn, tmp_path):
    mol, matrix = _mol_and_weights()
    n = matrix.shape[0]
    masked = ~np.eye(n, dtype=bool)
    masked[0, 1] = masked[1, 0] = False  # a bond
    molecule_attention_figure(mol, matrix.mean(0), matrix * ~masked, tmp_path / "m.png",
                              masked=masked, masked_label="not bonded")  # fmt: skip
    (fig,) = drawn
    (heat,) = [ax for ax in fig.axes if ax.get_title() == "attention"]  # matrix_label
    assert np.array_equal(heat.images[0].get_array().mask, masked)
    assert any(p.get_hatch() for p in heat.patches)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["not bonded"]
    with pytest.raises(ValueError, match=r"masked: expected \(13, 13\)"):
        molecule_attention_figure(mol, matrix.mean(0), matrix, tmp_path / "m.png",
                                  masked=masked[:2])  # fmt: skip
