"""Every registered task, one training step: its default model builds, the loss back-propagates
and every parameter gets a gradient; and on every task whose model attends, the efficient
kernels (``--attention.kernel=linear``, ``local``, ``performer``) build and step too (issue 33:
the attention options reached 10 of 18 tasks).

Each task reads a few examples: the tiny files of ``data/``, generated data, scikit-learn's
digits, networkx's karate club, and the data mirror (FSDD, the graphs, the solubility set;
skipped without it), Debian's Fashion-MNIST and festival's speech (skipped without them).
"""

from __future__ import annotations

import shutil

import pytest
import torch

from attnlab import MultiHeadAttention
from attnlab.lab.tasks import TASKS
from attnlab.lab.tasks.registry import BUILTIN_TASKS
from attnlab.lab.train import resolve_config

from .conftest import DATA

TEXT = [f"--task_options.train_file={DATA / 'tagged.train.txt'}",
        f"--task_options.dev_file={DATA / 'tagged.dev.conllu'}",
        f"--task_options.test_file={DATA / 'tagged.test.txt'}", "--task_options.corpus=files"]  # fmt: skip
SENTENCES = [f"--task_options.train_file={DATA / 'sentiment.train.txt'}",
             f"--task_options.test_file={DATA / 'sentiment.test.txt'}"]  # fmt: skip
GENERATED = ["--task_options.train=16", "--task_options.dev=4", "--task_options.test=4"]

#: task -> (options that make its data small, what its data needs: "mirror", "festival", ...)
TINY: dict[str, tuple[list[str], str]] = {
    "pos": (TEXT, ""),
    "sst2": (SENTENCES, ""),
    "sst5": (SENTENCES, ""),
    "trec": (SENTENCES, ""),
    "text-tag": ([f"--data.train={DATA / 'tagged.train.txt'}",
                  f"--data.test={DATA / 'tagged.test.txt'}"], ""),
    "text-classify": ([f"--data.train={DATA / 'sentiment.train.txt'}",
                       f"--data.test={DATA / 'sentiment.test.txt'}"], ""),
    "mlm": ([f"--task_options.train_file={DATA / 'tagged.train.txt'}",
             f"--task_options.dev_file={DATA / 'tagged.dev.conllu'}",
             "--task_options.min_count=1"], ""),
    "listops": ([*GENERATED, "--task_options.min_length=10", "--task_options.max_length=40",
                 "--task_options.max_depth=3"], ""),
    "recall": (GENERATED, ""),
    "positions": (GENERATED, ""),
    "g2p": ([f"--task_options.dict_file={DATA / 'cmudict.tiny.dict'}"], ""),
    "seq2seq": ([f"--data.train={DATA / 'own_pairs.tsv'}", "--data.tokenizer=whitespace"], ""),
    "digits": (["--task_options.train_size=50"], ""),
    "image-classify": ([f"--data.train={DATA / 'own_images.npz'}", "--data.size=8"], ""),
    "karate": ([], ""),
    "node-classify": ([f"--data.nodes={DATA / 'own_graph.npz'}"], ""),
    "fashion": (["--task_options.train_size=20"], "fashion"),
    "fsdd": (["--task_options.limit=8"], "mirror"),
    "audio-classify": ([f"--data.train={DATA / 'recordings'}", "--data.sample_rate=8000"], ""),
    "audio-frames": ([f"--data.train={DATA / 'recordings'}", "--data.sample_rate=8000"], ""),
    "phones": (["--task_options.sentences=6"], "festival"),
    "freesolv": ([], "mirror"),
    "solubility": ([], "mirror"),
    "molecule-property": ([f"--data.train={DATA / 'own_molecules.csv'}"], ""),
    "cora": ([], "mirror"),
    "citeseer": ([], "mirror"),
}  # fmt: skip

#: what a task's model needs for an efficient kernel: attention without a score bias or a
#: graph mask (which no efficient kernel forms), in the models that have a choice
FOR_KERNELS = {
    "freesolv": ["--model.structure=none"],
    "solubility": ["--model.structure=none"],
    "molecule-property": ["--model.structure=none"],
    "node-classify": ["--model.kind=full_lappe"],
    "cora": ["--model.kind=full_lappe"],
    "citeseer": ["--model.kind=full_lappe"],
    "karate": ["--model.kind=full_lappe"],
}
KERNELS = ["linear", "local", "performer"]


def test_every_registered_task_is_covered():
    assert sorted(TINY) == sorted(BUILTIN_TASKS)  # the tests register toy tasks of their own


def _skip_without(need: str, data_mirror_or_none) -> None:
    if need == "mirror" and data_mirror_or_none is None:
        pytest.skip("no data mirror")
    if need == "festival" and (data_mirror_or_none is None or shutil.which("festival") is None):
        pytest.skip("festival (and the mirror's sentences) needed: apt-get install festival")
    if need == "fashion":
        from pathlib import Path

        from attnlab.lab.data.registry import get_dataset

        files = get_dataset("fashion-mnist").files.values()
        if not any(Path(p).is_file() for f in files for p in f.installed):
            pytest.skip("Fashion-MNIST needs apt-get install dataset-fashion-mnist")


def one_step(name: str, *options: str):
    """Build ``name``'s model from its defaults and ``options``, run one training step on a
    batch of up to four examples; return the model and the names of its parameters that got
    no gradient."""
    cfg = resolve_config(task=name, overrides=[*TINY[name][0], *options])
    task = TASKS.get(name)()
    task.setup(cfg.task_options)
    model = task.build_model(cfg.model).train()
    batch = task.collate(task.splits()["train"][:4])
    loss, units = task.loss(model, batch)
    assert torch.isfinite(loss) and float(units) > 0
    loss.backward()
    return model, [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]


@pytest.fixture
def data(monkeypatch, data_mirror_or_none, tmp_path):
    """The mirror where one exists (the other task tests point at an empty one), a fresh
    cache (generated data)."""
    if data_mirror_or_none is not None:
        monkeypatch.setenv("ATTNLAB_DATA", str(data_mirror_or_none))
    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    return data_mirror_or_none


@pytest.mark.parametrize("name", sorted(TINY))
def test_the_default_model_steps_and_every_parameter_learns(name, data):
    _skip_without(TINY[name][1], data)
    _, missing = one_step(name)
    assert missing == []


ATTENTIVE = [(n, k) for n in sorted(TINY) for k in KERNELS]


@pytest.mark.parametrize(("name", "kernel"), ATTENTIVE)
def test_every_efficient_kernel_builds_and_steps(name, kernel, data):
    _skip_without(TINY[name][1], data)
    model, missing = one_step(name, *FOR_KERNELS.get(name, []), f"--attention.kernel={kernel}")
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert layers and {m.kernel.name for m in layers} == {kernel}  # every layer runs it
    assert missing == []
