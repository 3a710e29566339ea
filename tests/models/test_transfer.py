"""attnlab.lab.models.transfer: rows paired by string, copies by name, refusals."""

import pytest
import torch
from torch import nn

from attnlab.lab.models import Vocabulary
from attnlab.lab.models.transfer import transfer_weights, vocab_rows


class Tiny(nn.Module):
    def __init__(self, vocab: int, dim: int = 4, labels: int = 2) -> None:
        super().__init__()
        self.inputs = nn.Module()
        self.inputs.embed = nn.Embedding(vocab, dim)
        self.encoder = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, labels)


def test_rows_pair_words_by_string_as_the_source_normalises_them():
    source = Vocabulary(["the", "film", "dull"], lowercase=True)  # ids 2, 3, 4
    target = Vocabulary(["film", "The", "great"])  # ids 2, 3, 4; case kept
    rows = vocab_rows(target, source)
    assert rows.dst.tolist() == [0, 1, 2, 3]  # <pad>, <unk>, film, The (-> the); not great
    assert rows.src.tolist() == [0, 1, 3, 2]
    assert rows.rows == 5


def test_transfer_copies_by_name_remaps_rows_and_keeps_the_head_fresh():
    source, target = Tiny(5, labels=7), Tiny(6)
    head = target.head.weight.clone()
    untouched = target.inputs.embed.weight[5].clone()
    rows = vocab_rows(Vocabulary(["b", "a", "x", "y"]), Vocabulary(["a", "b", "c"]))
    report = transfer_weights(target, source.state_dict(), rows={"inputs.embed.weight": rows})
    assert torch.equal(target.encoder.weight, source.encoder.weight)
    assert torch.equal(target.inputs.embed.weight[2], source.inputs.embed.weight[3])  # b
    assert torch.equal(target.inputs.embed.weight[3], source.inputs.embed.weight[2])  # a
    assert torch.equal(target.inputs.embed.weight[5], untouched)  # y: not pre-trained
    assert torch.equal(target.head.weight, head)
    assert report.remapped == {"inputs.embed.weight": (4, 6)}
    assert report.loaded == ["encoder.weight", "encoder.bias"]
    assert report.fresh == ["head.weight", "head.bias"]
    assert report.unused == ["head.weight", "head.bias"]
    assert any("4 of 6 rows" in line for line in report.lines())


def test_transfer_refuses_mismatches_and_strangers():
    with pytest.raises(
        ValueError, match=r"encoder\.weight: .* shape \(4, 4\), this model's \(3, 3\)"
    ):
        transfer_weights(Tiny(5, dim=3), {"encoder.weight": torch.zeros(4, 4)})
    with pytest.raises(ValueError, match="no parameter name"):
        transfer_weights(Tiny(5), {"something.else": torch.zeros(1)})
