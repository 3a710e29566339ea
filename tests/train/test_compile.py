"""``train.compile``: compiled training equals eager, compiles only while warming up, saves
plain state dicts and resumes; padded batches (``train.pad_multiple``) change no result."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
import torch
from torch._dynamo.utils import counters

from attnlab.lab.tasks.text import PosTask
from attnlab.lab.train import RunConfig, TrainConfig, Trainer, apply_overrides, load_for_inference
from attnlab.lab.train.compile import (
    PaddedCollate,
    compile_model,
    pad_batch,
    pad_multiple_of,
    unwrap,
)

from .helpers import Crash, CrashingToy, assert_same_tensors, final_weights, run, strip_timing
from .test_distributed import OVERRIDES as DDP_OVERRIDES
from .test_distributed import SCRIPT as DDP_SCRIPT
from .test_distributed import _torchrun_env as torchrun_env
from .toy_task import ToyTask, toy_config

NO_DROPOUT = "--model.encoder.dropout=0"


def graphs() -> int:
    """Graphs Dynamo has compiled in this process so far (a recompile adds at least one)."""
    return counters["stats"]["unique_graphs"]


# ----------------------------------------------------------------------------- padding


def test_pad_batch_rounds_integer_tensors_and_leaves_the_rest():
    batch = {
        "tokens": torch.arange(1, 14).repeat(2, 1),  # (2, 13)
        "chars": torch.ones(2, 13, 9, dtype=torch.long),
        "labels": torch.zeros(2, 13, dtype=torch.long),
        "valid": torch.ones(2, 13, dtype=torch.bool),
        "lengths": torch.tensor([13, 5]),
        "features": torch.ones(2, 13, 3),
        "name": "x",
    }
    out = pad_batch(batch, 8)
    assert out["tokens"].shape == (2, 16) and out["chars"].shape == (2, 16, 16)
    assert torch.equal(out["tokens"][:, :13], batch["tokens"]) and not out["tokens"][:, 13:].any()
    assert (out["labels"][:, 13:] == -100).all() and not out["labels"][:, :13].any()
    assert out["chars"][:, :13, :9].all() and not out["chars"][:, 13:].any()
    assert out["valid"].dtype == torch.bool and not out["valid"][:, 13:].any()
    for key in ("lengths", "features", "name"):  # 1-D, float, not a tensor: the same objects
        assert out[key] is batch[key]
    assert pad_batch(batch, 1) == batch and pad_batch(batch, 13)["tokens"] is batch["tokens"]
    assert pad_batch(batch, 4, fill={"tokens": 7})["tokens"][0, 13:].tolist() == [7, 7, 7]
    with pytest.raises(ValueError, match="multiple must be an int >= 1, got 0"):
        pad_batch(batch, 0)


def test_pad_batch_pads_the_named_float_sequences_along_time_with_zeros():
    frames = torch.rand(2, 40, 13).transpose(1, 2)  # (2, 13, 40), not contiguous
    out = pad_batch({"features": frames}, 8, floats=("features",))
    assert out["features"].shape == (2, 16, 40) and out["features"].is_contiguous()
    assert torch.equal(out["features"][:, :13], frames) and not out["features"][:, 13:].any()
    even = pad_batch({"features": frames[:, :8]}, 8, floats=("features",))["features"]
    assert even.shape == (2, 8, 40) and even.is_contiguous()  # a graph guards on strides


def test_padding_a_speech_batch_is_inert():
    from attnlab.lab.tasks.speech.model import SpeechModelConfig, build_speech_model

    torch.manual_seed(0)
    for output in ("sequence", "token"):
        model = build_speech_model(SpeechModelConfig(), num_labels=5, output=output).eval()
        batch = {"features": torch.randn(3, 61, 80), "lengths": torch.tensor([61, 40, 23])}
        padded = pad_batch(batch, 8, floats=("features",))
        assert padded["features"].shape[1] == 64
        with torch.no_grad():
            a, b = model(batch), model(padded)
            kept = model.encode(batch)[1]  # frames per recording after subsampling
        if output == "token":  # each recording's own frames (the rest is padding either way)
            for i, n in enumerate(kept.tolist()):
                torch.testing.assert_close(a[i, :n], b[i, :n], rtol=1e-4, atol=1e-5)
        else:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_pad_multiple_defaults_to_8_under_compile_only():
    assert pad_multiple_of(True, None) == 8 and pad_multiple_of(False, None) == 1
    assert pad_multiple_of(True, 1) == 1 and pad_multiple_of(False, 16) == 16
    collate = PaddedCollate(lambda ex: {"tokens": torch.ones(len(ex), 3, dtype=torch.long)}, 4)
    assert collate([0, 1])["tokens"].shape == (2, 4)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--train.pad_multiple=0"], "train.pad_multiple must be >= 1"),
        (["--train.compile_mode=fast"], "compile_mode"),
    ],
)
def test_bad_compile_options_are_refused(overrides, message):
    with pytest.raises(ValueError, match=message):
        apply_overrides(RunConfig.for_task("pos"), overrides)
    with pytest.raises(ValueError, match="train.compile_mode must be one of default, "):
        TrainConfig(compile_mode="fast")
    with pytest.raises(ValueError, match="compile_mode must be one of"):
        compile_model(torch.nn.Linear(2, 2), mode="fast")


def _tiny_pos(tmp_path, sentences: list[list[tuple[str, str]]], *extra: str):
    """A pos task on local files and a tiny config (no dropout: eager and padded runs agree)."""
    train = tmp_path / "train.txt"
    train.write_text("\n".join(" ".join(f"{w}/{t}" for w, t in s) for s in sentences) + "\n")
    cfg = apply_overrides(
        RunConfig.for_task("pos", out_dir=str(tmp_path / "run")),
        [
            "--task_options.corpus=files", f"--task_options.train_file={train}",
            f"--task_options.dev_file={train}", f"--task_options.test_file={train}",
            "--model.input.dim=16", "--model.input.char_dim=8", "--model.input.dropout=0",
            "--model.input.word_dropout=0", "--model.encoder.depth=1", "--model.encoder.heads=2",
            "--model.encoder.ff_hidden=32", "--model.encoder.dropout=0", "--model.head.dropout=0",
            "--train.device=cpu", "--train.log_every=0", *extra,
        ],
    )  # fmt: skip
    return cfg


def _sentences(n: int, lengths: tuple[int, int], seed: int = 0, max_word: int = 6):
    rng = random.Random(seed)
    words = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB",
             "sees": "VERB", "big": "ADJ", "old": "ADJ", "and": "CONJ", ".": ".",
             "garden": "NOUN", "quickly": "ADV", "yesterday": "NOUN"}  # fmt: skip
    vocab = [w for w in words if len(w) <= max_word]
    return [[(w, words[w]) for w in rng.choices(vocab, k=rng.randint(*lengths))] for _ in range(n)]


def test_padding_is_inert_in_eager_mode(tmp_path):
    """Padded positions (tokens, characters, labels) change neither the loss nor its units."""
    cfg = _tiny_pos(tmp_path, _sentences(6, (2, 11), max_word=9))
    task = PosTask()
    task.setup(cfg.task_options)
    torch.manual_seed(0)
    model = task.build_model(cfg.model).eval()
    batch = task.collate(task.splits()["train"])
    for multiple in (8, 32):
        padded = pad_batch(batch, multiple)
        assert (
            padded["tokens"].shape[1] % multiple == 0 and padded["chars"].shape[2] % multiple == 0
        )
        with torch.no_grad():
            loss, units = task.loss(model, batch)
            loss_padded, units_padded = task.loss(model, padded)
        assert int(units) == int(units_padded)
        torch.testing.assert_close(loss_padded, loss, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["classify", "tag"])
def test_padded_training_equals_unpadded(tmp_path, mode):
    plain = run(tmp_path / "plain", NO_DROPOUT, mode=mode)
    padded = run(tmp_path / "padded", NO_DROPOUT, "--train.pad_multiple=16", mode=mode)
    for a, b in zip(strip_timing(plain.history), strip_timing(padded.history), strict=True):
        assert a == pytest.approx(b, rel=1e-5)
    assert padded.test == pytest.approx(plain.test, rel=1e-5)


def test_unwrap_finds_the_plain_module():
    model = torch.nn.Linear(2, 2)
    assert unwrap(model) is model and unwrap(torch.compile(model)) is model


# ----------------------------------------------------------------------------- compiled runs


@pytest.mark.compile
def test_compiled_dropout_draws_what_eager_draws_on_cpu():
    layer = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))
    x = torch.randn(3, 5, 8)
    torch.manual_seed(1)
    want = layer(x)
    torch.manual_seed(1)
    got = compile_model(layer)(x)
    torch.testing.assert_close(got, want)
    assert (want == 0).any()


@pytest.mark.compile
def test_compiled_training_equals_eager_and_saves_plain_keys(tmp_path):
    """Tagging, lengths 3-12 unpadded: the losses, metrics and weights of eager. Without
    dropout: eager draws attnlab.dropout's masks, compiled code F.dropout's (other draws of the
    same law; attnlab.dropout's docstring)."""
    eager = run(tmp_path / "eager", NO_DROPOUT, mode="tag")
    compiled = run(tmp_path / "compiled", NO_DROPOUT, "--train.compile=true",
                   "--train.pad_multiple=1", mode="tag")  # fmt: skip
    for a, b in zip(strip_timing(eager.history), strip_timing(compiled.history), strict=True):
        assert a == pytest.approx(b, rel=1e-4)
    assert compiled.test == pytest.approx(eager.test, rel=1e-4)
    want = final_weights(tmp_path / "eager")
    for name in ("last.pt", "best.pt"):
        got = torch.load(tmp_path / "compiled" / name, weights_only=False)["model"]
        assert list(got) == list(want)  # no "_orig_mod." (nor "module.") prefix
    torch.testing.assert_close(final_weights(tmp_path / "compiled"), want, rtol=1e-4, atol=1e-5)
    _, model, cfg = load_for_inference(tmp_path / "compiled")
    assert cfg.train.compile and type(model).__name__ == "ToyModel"


class CountingToy(ToyTask):
    """The toy task, noting the compiled graph count at each training loss call."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, int]] = []  # (sequence length, graphs so far)

    def loss(self, model, batch):
        if model.training:
            self.seen.append((batch["ids"].shape[1], graphs()))
        return super().loss(model, batch)


@pytest.mark.compile
def test_no_recompiles_after_warm_up_across_lengths(tmp_path):
    """Unpadded toy batches (every length 3-12): after the first epoch (training steps and a
    dev evaluation), new lengths and batch sizes compile nothing."""
    task = CountingToy()
    cfg = toy_config(tmp_path, "--train.compile=true", "--train.pad_multiple=1",
                     "--task_options.n_train=90", "--train.epochs=3", mode="tag")  # fmt: skip
    result = Trainer(task, cfg, progress=False).fit()
    per_epoch = 6  # ceil(90 / 16), the last batch of 10 examples
    lengths = {n for n, _ in task.seen[per_epoch:]}
    assert len(task.seen) == 3 * per_epoch and len(lengths) > 1
    assert [g for _, g in task.seen[per_epoch:]] == [graphs()] * (2 * per_epoch)
    assert result.test["accuracy"] > 0.5


@pytest.mark.compile
def test_compiled_bf16_on_cpu(tmp_path):
    eager = run(tmp_path / "eager", NO_DROPOUT, "--train.precision=bf16", mode="tag")
    compiled = run(tmp_path / "c", NO_DROPOUT, "--train.precision=bf16", "--train.compile=true",
                   mode="tag")  # fmt: skip
    losses = [row["train_loss"] for row in compiled.history]
    assert losses[-1] < losses[0]
    want = [row["train_loss"] for row in eager.history]
    assert losses == pytest.approx(want, rel=5e-2)  # bf16 rounding differs where ops fuse


@pytest.mark.compile
def test_compiled_run_resumes_exactly(tmp_path):
    """With dropout: a compiled run crashed in epoch 2 and resumed ends with the weights of
    the uninterrupted compiled run."""
    over = ("--train.compile=true", "--train.epochs=2")
    run(tmp_path / "straight", *over)
    with pytest.raises(Crash):
        run(tmp_path / "resumed", *over, task=CrashingToy(crash_at=9))
    result = run(tmp_path / "resumed", *over, resume=True)
    assert result.steps == 12
    assert_same_tensors(final_weights(tmp_path / "resumed"), final_weights(tmp_path / "straight"))


class CountingPos(PosTask):
    """The pos task, noting padded shapes and the compiled graph count per training call."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[tuple[int, ...], int]] = []

    def loss(self, model, batch):
        if model.training:
            self.seen.append((tuple(batch["chars"].shape), graphs()))
        return super().loss(model, batch)


@pytest.mark.slow
@pytest.mark.compile
def test_tagger_with_attention_masks_and_chars_compiles_only_while_warming_up(tmp_path):
    """The real tagger (character CNN, rotary self-attention under ``masks.padding``): batches
    of 9-40 words padded to multiples of 8 compile in the first epoch only; the loss is the
    eager one."""
    sentences = _sentences(24, (9, 40), seed=1)
    cfg = _tiny_pos(tmp_path, sentences, "--train.compile=true", "--train.batch_size=4",
                    "--train.epochs=3", "--train.lr=3e-3")  # fmt: skip
    task = CountingPos()
    compiled = Trainer(task, cfg, progress=False).fit()
    per_epoch = 6
    later = task.seen[per_epoch:]
    assert {shape[2] for shape, _ in task.seen} == {8}  # words of <= 6 letters + 2 markers
    assert len({shape[1] for shape, _ in later}) > 1  # lengths vary after the warm-up
    assert [g for _, g in later] == [graphs()] * len(later)

    eager_cfg = _tiny_pos(tmp_path, sentences, "--train.batch_size=4", "--train.epochs=3",
                          "--train.lr=3e-3", "--train.overwrite=true")  # fmt: skip
    eager = Trainer("pos", eager_cfg, progress=False).fit()
    got = [row["train_loss"] for row in compiled.history]
    assert got == pytest.approx([row["train_loss"] for row in eager.history], rel=1e-3)


@pytest.mark.slow  # two processes compile the model (~1 min on 2 busy cores)
@pytest.mark.compile
def test_ddp_compiled_equals_one_eager_process(tmp_path):
    """torchrun, 2 ranks x 2 accumulation steps (``no_sync`` on the compiled DDP wrapper, an
    empty micro-batch run as a dummy): the weights and metrics of one eager process."""
    ddp_dir, report_dir = tmp_path / "ddp", tmp_path / "report"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        str(DDP_SCRIPT), str(ddp_dir), str(report_dir), *DDP_OVERRIDES, "--train.grad_accum=2",
        "--train.compile=true",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=torchrun_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    r0 = json.loads((report_dir / "rank0.json").read_text())["result"]
    single = run(tmp_path / "single", *DDP_OVERRIDES)
    a, b = final_weights(ddp_dir), final_weights(tmp_path / "single")
    assert list(a) == list(b)  # no "_orig_mod." / "module." prefix
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=1e-5)
    assert r0["test"] == pytest.approx(single.test, abs=1e-5)


def test_padding_a_molecule_batch_is_inert():
    from attnlab.lab.chem import UNREACHABLE
    from attnlab.lab.tasks.molecules.base import MoleculeTask
    from attnlab.lab.tasks.molecules.model import MoleculeModel, MoleculeModelConfig

    torch.manual_seed(0)
    model = MoleculeModel(6, MoleculeModelConfig()).eval()
    distances = torch.full((2, 5, 5), UNREACHABLE, dtype=torch.long)
    distances[0] = torch.tensor([[abs(i - j) for j in range(5)] for i in range(5)])  # a chain
    distances[1, :3, :3] = torch.tensor([[abs(i - j) for j in range(3)] for i in range(3)])
    atoms = torch.randn(2, 5, 6)
    atoms[1, 3:] = 0.0
    batch = {"atoms": atoms, "distances": distances, "lengths": torch.tensor([5, 3])}
    padded = pad_batch(batch, 8, floats=MoleculeTask.padded_floats)
    assert padded["atoms"].shape == (2, 8, 6) and padded["distances"].shape == (2, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(model(batch), model(padded), rtol=1e-5, atol=1e-6)


def test_compiled_kernels_are_kept_in_attnlabs_cache_unless_told_otherwise(tmp_path, monkeypatch):
    from attnlab.lab.train.compile import keep_compiled_artefacts

    monkeypatch.setenv("ATTNLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert keep_compiled_artefacts() == tmp_path / "cache" / "torchinductor"
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache" / "torchinductor")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))  # the user's says
    assert keep_compiled_artefacts() == tmp_path / "mine"
