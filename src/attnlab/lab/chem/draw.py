"""Pictures of attention on a molecule: the structure with atoms shaded by weight (RDKit's
``rdMolDraw2D``), beside the atom-by-atom heatmap.

Atoms carry their index on the drawing and the heatmap's axes read ``C0``, ``O1``, ... so a
row of the matrix is found on the molecule at a glance. Each panel has its colour bar (the
shading's is the shade drawn for a weight); pairs a mask forbids (``structure=mask``: atoms
not bonded) are hatched, not drawn as weight 0.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdDepictor
from rdkit.Chem.Draw import rdMolDraw2D

__all__ = ["draw_atom_weights", "atom_labels", "molecule_attention_figure", "shade_colormap"]

#: an atom of weight w is shaded ``cmap(SHADE_LOW + SHADE_SPAN * w / vmax)``: the faintest
#: atom stays visible, the strongest is not black
SHADE_LOW, SHADE_SPAN = 0.15, 0.7


def atom_labels(symbols: Sequence[str]) -> list[str]:
    """``["C0", "C1", "O2", ...]``: element symbol and index, as the drawing numbers atoms."""
    return [f"{s}{i}" for i, s in enumerate(symbols)]


def _check_weights(mol: Chem.Mol, weights: Sequence[float] | np.ndarray) -> np.ndarray:
    w = np.asarray(weights, dtype=float).reshape(-1)
    if w.shape[0] != mol.GetNumAtoms():
        raise ValueError(f"weights: expected one per atom ({mol.GetNumAtoms()}), got {w.shape[0]}")
    return w


def draw_atom_weights(
    mol: Chem.Mol,
    weights: Sequence[float] | np.ndarray,
    *,
    size: tuple[int, int] = (420, 380),
    cmap: str = "Reds",
    vmax: float | None = None,
) -> bytes:
    """A PNG of ``mol`` with atom ``i`` shaded by ``weights[i]`` (scaled to the largest).

    Args:
        mol: the molecule (the atoms the weights are for, hydrogens included if explicit).
        weights: ``(n,)`` non-negative weight per atom.
        size: pixels ``(width, height)``.
        cmap: a matplotlib colour map for the shading.
        vmax: the weight drawn in the strongest shade (default: the largest weight).
    """
    from matplotlib import colormaps

    w = _check_weights(mol, weights)
    top = float(w.max()) if vmax is None else float(vmax)
    scaled = np.clip(w / top, 0.0, 1.0) if top > 0 else w
    colours = colormaps[cmap]
    mol = Chem.Mol(mol)
    rdDepictor.Compute2DCoords(mol)
    drawer = rdMolDraw2D.MolDraw2DCairo(*size)
    drawer.drawOptions().addAtomIndices = True
    atoms = list(range(mol.GetNumAtoms()))
    fill = {i: tuple(colours(SHADE_LOW + SHADE_SPAN * float(scaled[i]))[:3]) for i in atoms}
    radii = {i: 0.3 + 0.25 * float(scaled[i]) for i in atoms}
    rdMolDraw2D.PrepareAndDrawMolecule(
        drawer, mol, highlightAtoms=atoms, highlightAtomColors=fill, highlightAtomRadii=radii,
        highlightBonds=[],
    )  # fmt: skip
    drawer.FinishDrawing()
    return drawer.GetDrawingText()


def shade_colormap(cmap: str = "Reds"):
    """The colours :func:`draw_atom_weights` shades with, from weight 0 to ``vmax``: the part
    of ``cmap`` it uses, for a colour bar."""
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    return ListedColormap(colormaps[cmap](np.linspace(SHADE_LOW, SHADE_LOW + SHADE_SPAN, 256)))


def molecule_attention_figure(
    mol: Chem.Mol,
    atom_weights: Sequence[float] | np.ndarray,
    matrix: np.ndarray,
    out: str | Path,
    *,
    title: str = "",
    weights_label: str = "attention received",
    matrix_label: str = "attention",
    masked: np.ndarray | None = None,
    masked_label: str = "masked pair",
) -> Path:
    """Write a PNG: the molecule shaded by ``atom_weights`` beside the heatmap ``matrix``.

    Args:
        mol: the molecule.
        atom_weights: ``(n,)`` weights per atom summing to 1 (e.g. pooling attention, or a
            layer's attention received: its column sums divided by n); the strongest shade is
            the largest weight or twice the uniform ``1 / n``, whichever is larger.
        matrix: ``(n, n)`` attention, rows = queries, columns = keys.
        out: the PNG path (parent directories are created).
        title: the figure's title.
        weights_label: what the shading shows (the left panel's title).
        matrix_label: what the heatmap shows (the right panel's title).
        masked: ``(n, n)`` boolean, True where query ``i`` may not attend to key ``j`` (e.g.
            atoms not bonded under ``structure=mask``): hatched, not drawn as weight 0.
        masked_label: what a masked pair is, for the legend.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    from attnlab.lab.viz import hatch_under, masked_cmap, masked_handle

    n = mol.GetNumAtoms()
    matrix = np.asarray(matrix, dtype=float)
    if matrix.shape != (n, n):
        raise ValueError(f"matrix: expected ({n}, {n}) for {n} atoms, got {matrix.shape}")
    # Weights that sum to 1 over n atoms: a uniform 1/n is drawn half-strength, not saturated.
    w = _check_weights(mol, atom_weights)
    vmax = max(float(w.max()), 2.0 / n)
    png = draw_atom_weights(mol, w, vmax=vmax)
    absent = np.zeros((n, n), dtype=bool) if masked is None else np.asarray(masked, dtype=bool)
    if absent.shape != (n, n):
        raise ValueError(f"masked: expected ({n}, {n}) for {n} atoms, got {absent.shape}")
    labels = atom_labels([a.GetSymbol() for a in mol.GetAtoms()])
    side = min(max(3.5, 0.22 * n), 12.0)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(4.6 + side + 1.2, max(4.2, side)), layout="constrained",
        gridspec_kw={"width_ratios": [4.6, side + 1.2]},
    )  # fmt: skip
    left.imshow(plt.imread(io.BytesIO(png), format="png"))
    left.set_axis_off()
    left.set_title(weights_label, fontsize=9)
    shade = fig.colorbar(ScalarMappable(Normalize(0.0, vmax), shade_colormap()), ax=left,
                         orientation="horizontal", shrink=0.7, aspect=25, pad=0.02)  # fmt: skip
    shade.set_label(f"atom shading: {weights_label}", fontsize=8)
    shade.ax.tick_params(labelsize=7)
    top = float(matrix[~absent].max()) if (~absent).any() else 0.0
    image = right.imshow(np.ma.masked_array(matrix, mask=absent), cmap=masked_cmap(),
                         vmin=0.0, vmax=max(top, 1e-9), interpolation="nearest")  # fmt: skip
    if absent.any():
        hatch_under(right, (-0.5, n - 0.5, n - 0.5, -0.5))
        fig.legend(handles=[masked_handle(masked_label)], loc="outside lower right", fontsize=7)
    font = 7 if n <= 40 else 5
    right.set_xticks(range(n), labels, rotation=90, fontsize=font)
    right.set_yticks(range(n), labels, fontsize=font)
    right.set_xlabel("key (attended to)")
    right.set_ylabel("query (attending)")
    right.set_title(matrix_label, fontsize=9)
    bar = fig.colorbar(image, ax=right, shrink=0.8)
    bar.set_label("attention weight", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
