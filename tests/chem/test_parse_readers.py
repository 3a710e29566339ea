"""Parsing and reading: bad inputs named with RDKit's reason; the mirror files' counts."""

from __future__ import annotations

import pytest

from attnlab.lab.chem import MoleculeError, mol_from_smiles, morgan_fingerprints, read_csv, read_sdf


@pytest.mark.parametrize(
    ("smiles", "reason"),
    [
        ("C1CC(", "SMILES Parse Error"),
        ("N(C)(C)(C)(C)C", "valence"),
        ("c1cccc1", "kekulize"),
        ("", "empty"),
    ],
)
def test_invalid_smiles_names_string_and_reason(smiles, reason):
    with pytest.raises(MoleculeError, match=reason) as err:
        mol_from_smiles(smiles)
    assert repr(smiles) in str(err.value)
    assert isinstance(err.value, ValueError)


def test_not_a_string():
    with pytest.raises(MoleculeError, match="expected a string, got int"):
        mol_from_smiles(42)  # type: ignore[arg-type]


BAD_CSV = "smiles,expt,calc\nCCO,-5.0,-4.5\nC1CC(,-1.0,-1.0\nCCN,x,-2\nCC,1.8,1.5\n"


def test_csv_bad_record_is_an_error_naming_it(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(BAD_CSV)
    with pytest.raises(MoleculeError, match=r"record 2 \(line 3\).*C1CC\(.*skip_invalid"):
        read_csv(path, target_column="expt")


def test_csv_skip_invalid_lists_and_warns(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(BAD_CSV)
    with pytest.warns(UserWarning, match=r"skipped 2 invalid record\(s\).*record 2.*record 3"):
        got = read_csv(path, target_column="expt", extra_columns=["calc"], skip_invalid=True)
    assert [r.smiles for r in got.records] == ["CCO", "CC"]
    assert [i for i, _ in got.skipped] == [2, 3]
    assert "expected a number, got 'x'" in got.skipped[1][1]
    assert got.records[1].extra == {"calc": 1.5} and got.records[1].index == 4


def test_csv_missing_column(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text("smi,y\nCC,1\n")
    with pytest.raises(MoleculeError, match=r"no column\(s\) \['smiles', 'expt'\]"):
        read_csv(path, target_column="expt")


GOOD_BLOCK = """ethanol
  test

  3  2  0  0  0  0            999 V2000
    0.0000    0.0000    0.0000 C   0  0
    1.3000    0.0000    0.0000 C   0  0
    2.6000    0.0000    0.0000 O   0  0
  1  2  1  0
  2  3  1  0
M  END
> <SOL>
0.5

> <SMILES>
CCO

$$$$
"""
BAD_BLOCK = """broken
  test

  2  1  0  0  0  0            999 V2000
    0.0000    0.0000    0.0000 C   0  0
  1  2  1  0
M  END
> <SOL>
1.0

$$$$
"""


def test_sdf_unreadable_record_is_named(tmp_path):
    path = tmp_path / "m.sdf"
    path.write_text(GOOD_BLOCK + BAD_BLOCK + GOOD_BLOCK)
    with pytest.raises(MoleculeError, match=r"record 2 is unreadable"):
        read_sdf(path, target_field="SOL")
    with pytest.warns(UserWarning, match="record 2"):
        got = read_sdf(path, target_field="SOL", skip_invalid=True)
    assert [r.index for r in got.records] == [1, 3] and got.skipped[0][0] == 2
    assert got.records[0].smiles == "CCO" and got.records[0].target == 0.5  # field in any case
    assert morgan_fingerprints([got.records[0].mol]).sum() > 0  # ring info initialised


def test_sdf_missing_target_field(tmp_path):
    path = tmp_path / "m.sdf"
    path.write_text(GOOD_BLOCK)
    with pytest.raises(MoleculeError, match=r"record 1 has no field 'logS'.*'SOL'"):
        read_sdf(path, target_field="logS")


def test_mirror_files(data_mirror):
    free = read_csv(data_mirror / "molecules/freesolv.csv", target_column="expt",
                    extra_columns=["calc"], name_column="iupac")  # fmt: skip
    assert len(free.records) == 642 and not free.skipped
    assert free.records[0].name == "4-methoxy-N,N-dimethyl-benzamide"
    train = read_sdf(data_mirror / "molecules/solubility.train.sdf", target_field="SOL")
    test = read_sdf(data_mirror / "molecules/solubility.test.sdf", target_field="SOL")
    assert (len(train.records), len(test.records)) == (1025, 257)
    # the SMILES field is "smiles" in train and "SMILES" in test: both found
    assert train.records[0].smiles == "CCCCC" and test.records[0].smiles == "CCC(C)CC"
