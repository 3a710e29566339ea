"""The molecule model: structure options, padding, invariances, exact degenerate cases."""

from __future__ import annotations

import pytest
import torch

from attnlab import AttentionConfig
from attnlab.lab.chem import NUM_ATOM_FEATURES, featurise, mol_from_smiles
from attnlab.lab.tasks.molecules import (
    STRUCTURES,
    MoleculeExample,
    MoleculeModel,
    MoleculeModelConfig,
    collate_molecules,
)

SMILES = ["CCO", "c1ccccc1O", "CC(=O)Oc1ccccc1C(=O)O", "[Na+].[Cl-]"]


def batch_of(smiles: list[str]) -> dict[str, torch.Tensor]:
    return collate_molecules(
        [MoleculeExample(featurise(mol_from_smiles(s)), 0.0, s) for s in smiles]
    )


def model(structure: str, pooling: str = "attention", seed: int = 0) -> MoleculeModel:
    torch.manual_seed(seed)
    cfg = MoleculeModelConfig(dim=16, depth=2, heads=2, dropout=0.0, structure=structure,
                              pooling=pooling)  # fmt: skip
    return MoleculeModel(NUM_ATOM_FEATURES, cfg).eval()


def test_collate_pads_with_unreachable_and_zeros():
    b = batch_of(["CCO", "C"])
    assert b["atoms"].shape == (2, 3, NUM_ATOM_FEATURES)
    assert b["lengths"].tolist() == [3, 1]
    assert b["atoms"][1, 1:].abs().sum() == 0 and (b["distances"][1, 1:, :] == -1).all()


@pytest.mark.parametrize("structure", STRUCTURES)
@pytest.mark.parametrize("pooling", ["attention", "mean"])
def test_padding_does_not_change_a_prediction(structure, pooling):
    m = model(structure, pooling)
    together = m(batch_of(SMILES))
    alone = torch.stack([m(batch_of([s]))[0] for s in SMILES])
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("structure", STRUCTURES)
def test_atom_order_does_not_matter(structure):
    m = model(structure)
    a = m(batch_of(["CC(=O)Oc1ccccc1C(=O)O"]))
    b = m(batch_of(["OC(=O)c1ccccc1OC(C)=O"]))  # the same molecule, atoms in another order
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_mask_attends_only_along_bonds_and_self():
    out = model("mask")(batch_of(["CC(=O)O"]), need_weights=True)
    d = batch_of(["CC(=O)O"])["distances"][0]
    for w in out.weights:  # (1, h, n, n)
        assert (w[0][:, d > 1] == 0).all()
        torch.testing.assert_close(w[0].sum(-1), torch.ones(2, 4))


def test_none_sees_every_atom():
    w = model("none")(batch_of(["CC(=O)O"]), need_weights=True).weights[0]
    assert (w > 0).all()


def test_spd_with_a_zero_bias_equals_plain_attention():
    # The distance table starts at zero: the same weights then give full attention (float64:
    # with a bias the kernel may take another path, equal up to rounding).
    spd, none = model("spd").double(), model("none").double()
    state = {k: v for k, v in spd.state_dict().items() if not k.startswith("distance_bias")}
    none.load_state_dict(state)
    b = {k: v.double() if v.is_floating_point() else v for k, v in batch_of(SMILES).items()}
    torch.testing.assert_close(spd(b), none(b), rtol=0, atol=1e-12)
    with torch.no_grad():
        spd.distance_bias.table.weight.normal_()
    assert not torch.allclose(spd(b), none(b))


def test_spd_bias_buckets():
    m = model("spd")
    with torch.no_grad():
        m.distance_bias.table.weight.copy_(torch.arange(10.0)[:, None].expand(10, 2))
    d = torch.tensor([[[0, 1, 20, -1]]])  # (1, 1, 4): distances 0, 1, clipped 20, unreachable
    assert m.distance_bias(d)[0, :, 0].tolist() == [[0.0, 1.0, 8.0, 9.0]] * 2


@pytest.mark.parametrize("structure", STRUCTURES)
def test_every_parameter_gets_a_gradient(structure):
    m = model(structure).train()
    m(batch_of(SMILES)).sum().backward()
    missing = [n for n, p in m.named_parameters() if p.grad is None or not p.grad.abs().sum()]
    assert not missing


def test_config_errors():
    with pytest.raises(ValueError, match="model.structure: expected one of none, mask, spd"):
        MoleculeModelConfig(structure="bonds")
    with pytest.raises(ValueError, match="model.heads=4 must divide the width 10"):
        MoleculeModelConfig(dim=10, heads=4)
    with pytest.raises(ValueError, match="adds a score bias per distance, which the efficient "
                       "kernel 'linear' never forms; use model.structure=none"):  # fmt: skip
        MoleculeModelConfig(attention=AttentionConfig(kernel="linear"))
    with pytest.raises(ValueError, match="masks attention to the bonds"):
        MoleculeModelConfig(structure="mask", attention=AttentionConfig(kernel="performer"))
    MoleculeModelConfig(structure="mask", attention=AttentionConfig(kernel="local"))
    MoleculeModelConfig(structure="none", attention=AttentionConfig(kernel="linear"))
    with pytest.raises(ValueError, match="pooling"):
        MoleculeModelConfig(pooling="sum")


@pytest.mark.parametrize(("extensive", "same"), [(False, True), (True, False)])
def test_extensive_readout_counts_atoms(extensive, same):
    # Two unbonded copies under the bond mask: every atom sees only its own copy, so a mean
    # readout cannot tell one copy from two; the extensive (size-scaled) readout doubles.
    torch.manual_seed(0)
    cfg = MoleculeModelConfig(dim=16, depth=2, heads=2, dropout=0.0, structure="mask",
                              pooling="mean", extensive=extensive)  # fmt: skip
    m = MoleculeModel(NUM_ATOM_FEATURES, cfg).eval()
    one, two = m(batch_of(["CCO"])), m(batch_of(["CCO.CCO"]))
    assert torch.allclose(one, two, atol=1e-5) == same


def test_evaluation_sees_the_weights_of_a_fused_adamw_step():
    # Fused AdamW does not bump parameter versions; an evaluation after a step must still use
    # the new q/kv projections, not the previous evaluation's cached concatenation.
    from attnlab.lab.train.optim import build_optimizer

    m, b = model("none"), batch_of(SMILES)
    opt = build_optimizer(m, lr=1e-2, weight_decay=0.0)
    with torch.no_grad():
        m(b)  # fills the attention layers' inference cache
    m.train()
    m(b).sum().backward()
    opt.step()
    m.eval()
    with torch.no_grad():
        cached = m(b)
    fresh = MoleculeModel(NUM_ATOM_FEATURES, m.config).eval()
    fresh.load_state_dict(m.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(cached, fresh(b))
