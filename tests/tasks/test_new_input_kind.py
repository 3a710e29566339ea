"""A task of a new input kind goes through ``train``, ``predict``, ``show`` and ``eval --data``
with no change to the command line: only the :class:`~attnlab.lab.tasks.Task` interface.

The input kind here is a list of numbers written ``0.5,-1,2`` (as a wav path, a SMILES string
or a node id would be one word of the command line); the label says whether they sum to more
than zero (N -> 1). Its evaluation file is CSV: ``label,x1;x2;...`` per line.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.cli import main
from attnlab.lab.tasks import TASKS, AttentionMap, Task, TaskCommands, register_task

LABELS = ["negative", "positive"]


@dataclass
class NumbersOptions:
    n_train: int = 64
    seed: int = 0


@dataclass
class NumbersModelConfig:
    dim: int = 8


class NumbersOutput(NamedTuple):
    logits: Tensor  # (b, 2)
    weights: list[Tensor]  # one layer: (b, h=1, i, j)


class NumbersModel(nn.Module):
    """One head of dot-product self-attention over embedded numbers, mean-pooled."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.embed, self.qk = nn.Linear(1, dim), nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, len(LABELS))

    def forward(self, batch: Mapping[str, Tensor], *, need_weights: bool = False):
        x = self.embed(batch["values"][..., None])  # (b, n, d)
        n = x.shape[1]
        keep = torch.arange(n) < batch["lengths"][:, None]  # (b, j)
        q, k = self.qk(x).chunk(2, dim=-1)  # (b, n, d) each
        scores = (q @ k.transpose(1, 2)) / x.shape[-1] ** 0.5  # (b, i, j)
        weights = scores.masked_fill(~keep[:, None, :], float("-inf")).softmax(-1)
        h = weights @ x  # (b, i, d)
        pooled = (h * keep[..., None]).sum(1) / batch["lengths"][:, None]  # (b, d)
        logits = self.out(pooled)
        if need_weights:
            return NumbersOutput(logits, [weights[:, None]])  # (b, 1, i, j): one head
        return logits


class NumbersTask(Task, TaskCommands):
    """Whether a list of numbers sums to more than zero (a test task)."""

    unit = "seq"

    def __init__(self) -> None:
        self._splits: dict[str, list] = {}

    @classmethod
    def default_options(cls) -> NumbersOptions:
        return NumbersOptions()

    @classmethod
    def default_model_config(cls) -> NumbersModelConfig:
        return NumbersModelConfig()

    def setup(self, options: NumbersOptions) -> None:
        rng = random.Random(options.seed)

        def example() -> tuple[list[float], int]:
            values = [round(rng.uniform(-1, 1), 2) for _ in range(rng.randint(2, 6))]
            return values, int(sum(values) > 0)

        self._splits = {"train": [example() for _ in range(options.n_train)],
                        "dev": [example() for _ in range(16)], "test": []}  # fmt: skip

    def splits(self) -> dict[str, list]:
        return self._splits

    def encode_inputs(self, inputs: Sequence[list[float]]) -> dict[str, Tensor]:
        n = max(len(x) for x in inputs)
        values = torch.tensor([x + [0.0] * (n - len(x)) for x in inputs])
        return {"values": values, "lengths": torch.tensor([len(x) for x in inputs])}

    def collate(self, examples: list) -> dict[str, Tensor]:
        batch = self.encode_inputs([x for x, _ in examples])
        batch["labels"] = torch.tensor([y for _, y in examples])
        return batch

    def build_model(self, model_config: NumbersModelConfig) -> nn.Module:
        return NumbersModel(model_config.dim)

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int]:
        logits = model(batch)
        return F.cross_entropy(logits, batch["labels"], reduction="sum"), len(logits)

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        hits = total = 0
        for batch in batches:
            hits += int((model(batch).argmax(-1) == batch["labels"]).sum())
            total += len(batch["labels"])
        return {"accuracy": hits / total, "examples": float(total)}

    # -- what the commands need
    def parse_input(self, text: str) -> list[float]:
        try:
            return [float(v) for v in text.split(",")]
        except ValueError:
            raise ValueError(f"numbers: expected numbers like 0.5,-1,2, got {text!r}") from None

    def read_examples(self, path: str | Path) -> list:
        examples = []
        for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
            label, _, values = line.partition(",")
            if label not in LABELS:
                raise ValueError(f"{path}:{lineno} is not a numbers file: got {line!r}")
            examples.append(([float(v) for v in values.split(";")], LABELS.index(label)))
        return examples

    def add_arguments(self, parser, command: str) -> None:
        if command == "predict":  # a flag of the task's own: scale every input first
            parser.add_argument("--scale", type=float, default=1.0)

    @torch.no_grad()
    def predict(
        self, model: nn.Module, inputs: Sequence[list[float]], *, scale: float = 1.0
    ) -> list[dict[str, Any]]:
        inputs = [[v * scale for v in x] for x in inputs]
        probs = model(self.encode_inputs(inputs)).softmax(-1)
        return [{"values": x, "label": LABELS[int(p.argmax())], "p": round(float(p.max()), 3)}
                for x, p in zip(inputs, probs)]  # fmt: skip

    def format_text(self, record: Mapping[str, Any]) -> str:
        return f"sum {sum(record['values']):+.2f}: {record['label']} ({record['p']:.2f})"


@pytest.fixture(scope="module", autouse=True)
def registered():
    """``numbers`` is a task while this module runs, and only then."""
    register_task("numbers")(NumbersTask)
    yield
    TASKS.unregister("numbers")


@pytest.fixture(scope="module")
def run(tmp_path_factory, registered) -> Path:
    out = tmp_path_factory.mktemp("numbers") / "run"
    args = ["train", "numbers", "--train.epochs=4", "--train.batch_size=8", "--train.lr=3e-2",
            "--train.device=cpu", "--train.log_every=0", f"--out_dir={out}"]  # fmt: skip
    assert main(args) == 0
    return out


def test_predict_parses_and_renders_through_the_task(run, capsys):
    # an input that starts with "-" comes after "--", as argparse wants
    assert main(["predict", str(run), "0.5,0.25", "--", "-1,0.5,-0.5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["sum +0.75", "sum -1.00"]
    assert main(["predict", str(run), "--json", "0.5,0.25"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["values"] == [0.5, 0.25] and record["label"] in LABELS and 0.5 <= record["p"] <= 1


def test_predict_takes_the_task_s_own_flags_before_or_after_the_inputs(run, capsys):
    assert main(["predict", str(run), "0.5,0.25", "--scale", "-4"]) == 0
    assert capsys.readouterr().out.startswith("sum -3.00")
    assert main(["predict", str(run), "--scale", "2", "0.5,0.25", "1,1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["sum +1.50", "sum +4.00"]


def test_a_flag_the_task_does_not_declare_is_an_error_naming_it(run, capsys):
    assert main(["predict", str(run), "0.5", "--beam", "5"]) == 2
    err = capsys.readouterr().err
    assert "task numbers" in err and "--beam" in err
    assert main(["predict", str(run), "0.5", "--scale", "big"]) == 2
    assert "--scale" in capsys.readouterr().err
    # --scale is a predict flag only
    assert main(["show", str(run), "0.5,1", "--scale", "2", "--out", "x.png"]) == 2
    assert "--scale" in capsys.readouterr().err


def test_predict_refuses_an_input_the_task_cannot_parse(run, capsys):
    assert main(["predict", str(run), "one,two"]) == 2
    assert "expected numbers like 0.5,-1,2, got 'one,two'" in capsys.readouterr().err


def test_show_draws_the_default_heatmaps(run, tmp_path, capsys):
    png = tmp_path / "numbers.png"
    assert main(["show", str(run), "0.5,-1,2", "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    task = TASKS.get("numbers")()
    attn = task.attention_map(NumbersModel(4), [0.5, -1.0, 2.0])
    assert isinstance(attn, AttentionMap) and attn.keys == attn.queries == ["0.5", "-1.0", "2.0"]
    (weights,) = attn.weights
    assert weights.shape == (1, 3, 3) and torch.allclose(weights.sum(-1), torch.ones(1, 3))


def test_eval_data_reads_the_task_s_own_format(run, tmp_path, capsys):
    data = tmp_path / "eval.csv"
    data.write_text("positive,0.5;0.5\nnegative,-1;0.25\nnegative,-0.5\n")
    assert main(["eval", str(run), "--data", str(data)]) == 0
    metrics = json.loads(capsys.readouterr().out.split(": ", 1)[1])
    assert metrics["examples"] == 3.0 and 0.0 <= metrics["accuracy"] <= 1.0
    data.write_text("1 a sentence file .\n")
    assert main(["eval", str(run), "--data", str(data)]) == 2
    assert "is not a numbers file" in capsys.readouterr().err


def test_a_task_without_the_commands_methods_says_what_it_lacks(capsys):
    """The defaults that are not text's raise, naming the task."""
    bare = type("Bare", (NumbersTask,), {"read_examples": TaskCommands.read_examples,
                                          "predict": TaskCommands.predict})()  # fmt: skip
    with pytest.raises(NotImplementedError, match="cannot read evaluation files"):
        bare.read_examples("x")
    with pytest.raises(NotImplementedError, match="does not implement predict"):
        bare.predict(NumbersModel(4), [[1.0]])
