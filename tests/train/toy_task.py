"""A tiny, seeded toy task for the trainer tests (registered as ``"toy"``, in tests only).

Sequences of 3-12 symbols from ``a``-``h``. ``mode="classify"``: the label says whether ``a``
occurs more often than ``b`` (mean-pooled embeddings separate it linearly); ``mode="tag"``: each
token is tagged ``V`` if it is a vowel (``a``, ``e``), else ``C``. The model: embedding ->
LayerNorm -> Linear -> GELU -> dropout -> (masked mean pool) -> Linear.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.tasks import TASKS, Task, register_task
from attnlab.lab.train.overrides import merge

PAD, UNK = "<pad>", "<unk>"
SYMBOLS = "abcdefgh"


@dataclass
class ToyOptions:
    mode: Literal["classify", "tag"] = "classify"
    n_train: int = 96
    n_dev: int = 32
    n_test: int = 32
    min_len: int = 3
    max_len: int = 12
    data_seed: int = 1234


@dataclass
class ToyEncoderConfig:
    hidden: int = 32
    dropout: float = 0.1


@dataclass
class ToyModelConfig:
    dim: int = 16
    encoder: ToyEncoderConfig = field(default_factory=ToyEncoderConfig)
    dtype: Literal["float32", "float64"] = "float32"


class ToyModel(nn.Module):
    def __init__(self, vocab: int, labels: int, cfg: ToyModelConfig, *, pool: bool) -> None:
        super().__init__()
        self.pool = pool
        self.embed = nn.Embedding(vocab, cfg.dim, padding_idx=0)
        self.norm = nn.LayerNorm(cfg.dim)
        self.hidden = nn.Linear(cfg.dim, cfg.encoder.hidden)
        self.dropout = nn.Dropout(cfg.encoder.dropout)
        self.out = nn.Linear(cfg.encoder.hidden, labels)

    def forward(self, ids: Tensor, lengths: Tensor) -> Tensor:
        x = self.dropout(F.gelu(self.hidden(self.norm(self.embed(ids)))))  # (b, n, hidden)
        if not self.pool:
            return self.out(x)  # (b, n, labels)
        keep = (torch.arange(ids.shape[1], device=ids.device) < lengths[:, None]).to(x.dtype)
        pooled = (x * keep[..., None]).sum(1) / lengths.clamp(min=1)[:, None].to(x.dtype)
        return self.out(pooled)  # (b, labels)


def make_examples(n: int, rng: random.Random, opts: ToyOptions) -> list[dict[str, Any]]:
    out = []
    for _ in range(n):
        tokens = [rng.choice(SYMBOLS) for _ in range(rng.randint(opts.min_len, opts.max_len))]
        if opts.mode == "classify":
            target: Any = "pos" if tokens.count("a") > tokens.count("b") else "neg"
        else:
            target = ["V" if t in "ae" else "C" for t in tokens]
        out.append({"tokens": tokens, "target": target})
    return out


class ToyTask(Task):
    metric_name = "accuracy"
    higher_is_better = True

    def __init__(self) -> None:
        self.tokens: list[str] | None = None
        self.labels: list[str] | None = None
        self.mode = "classify"
        self._splits: dict[str, list] = {}

    @property
    def unit(self) -> str:  # type: ignore[override]
        return "tok" if self.mode == "tag" else "seq"

    @classmethod
    def default_model_config(cls) -> ToyModelConfig:
        return ToyModelConfig()

    @classmethod
    def default_options(cls) -> ToyOptions:
        return ToyOptions()

    def setup(self, options) -> None:
        opts = options
        if isinstance(opts, Mapping):
            opts = merge(ToyOptions(), opts)
        self.mode = opts.mode
        rng = random.Random(opts.data_seed)  # own RNG: the global streams stay untouched
        self._splits = {
            "train": make_examples(opts.n_train, rng, opts),
            "dev": make_examples(opts.n_dev, rng, opts),
            "test": make_examples(opts.n_test, rng, opts),
        }
        if self.tokens is None:  # keep vocabularies restored by load_state_dict
            train = self._splits["train"]
            self.tokens = [PAD, UNK] + sorted({t for ex in train for t in ex["tokens"]})
            labels = {ex["target"] for ex in train} if self.mode == "classify" else {"C", "V"}
            self.labels = sorted(labels)

    def splits(self) -> dict[str, list]:
        return self._splits

    def collate(self, examples: list) -> dict[str, Tensor]:
        tok_id = {t: i for i, t in enumerate(self.tokens)}
        lab_id = {t: i for i, t in enumerate(self.labels)}
        n = max(len(ex["tokens"]) for ex in examples)
        ids = torch.zeros(len(examples), n, dtype=torch.long)
        for b, ex in enumerate(examples):
            ids[b, : len(ex["tokens"])] = torch.tensor([tok_id.get(t, 1) for t in ex["tokens"]])
        lengths = torch.tensor([len(ex["tokens"]) for ex in examples])
        if self.mode == "classify":
            labels = torch.tensor([lab_id[ex["target"]] for ex in examples])
        else:
            labels = torch.full((len(examples), n), -100, dtype=torch.long)
            for b, ex in enumerate(examples):
                labels[b, : len(ex["target"])] = torch.tensor([lab_id[t] for t in ex["target"]])
        return {"ids": ids, "lengths": lengths, "labels": labels}

    def batch_size_of(self, example: Any) -> int:
        return len(example["tokens"])

    def build_model(self, model_config) -> nn.Module:
        model_cfg = model_config
        if isinstance(model_cfg, Mapping):
            model_cfg = merge(ToyModelConfig(), model_cfg)
        model = ToyModel(
            len(self.tokens), len(self.labels), model_cfg, pool=self.mode == "classify"
        )
        return model.to(getattr(torch, model_cfg.dtype))

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        logits = model(batch["ids"], batch["lengths"])
        labels = batch["labels"]
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), reduction="sum"
        )
        return loss, (labels != -100).sum()

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        correct = total = 0
        loss_sum = 0.0
        for batch in batches:
            loss, units = self.loss(model, batch)
            logits = model(batch["ids"], batch["lengths"])
            keep = batch["labels"] != -100
            correct += int(((logits.argmax(-1) == batch["labels"]) & keep).sum())
            total += int(units)
            loss_sum += float(loss)
        return {"accuracy": correct / total, "loss": loss_sum / total}

    def state_dict(self) -> dict[str, Any]:
        return {"tokens": list(self.tokens), "labels": list(self.labels), "mode": self.mode}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.tokens, self.labels = list(state["tokens"]), list(state["labels"])
        self.mode = state["mode"]


# Registered once per process, whichever module name imported this file first.
if "toy" not in TASKS:
    register_task("toy")(ToyTask)
else:
    ToyTask.name = "toy"


def toy_config(out_dir, *overrides: str, mode: str = "classify"):
    """A small, fast RunConfig for the toy task (+ ``--dotted=value`` overrides)."""
    from attnlab.lab.train import RunConfig, apply_overrides

    cfg = RunConfig.for_task("toy", out_dir=str(out_dir))
    base = [
        f"--task_options.mode={mode}",
        "--train.epochs=3",
        "--train.batch_size=16",
        "--train.lr=1e-2",
        "--train.device=cpu",
        "--train.log_every=0",
        "--train.warmup_steps=2",
        # The trainer's mechanics to tight tolerances, alike on every CPU (precision=auto would
        # pick bf16 where the CPU has AVX512_BF16); tests of precision set it themselves.
        "--train.precision=fp32",
    ]
    return apply_overrides(cfg, [*base, *overrides])
