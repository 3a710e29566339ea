"""Frame-wise phone classification (N -> N): the ``phones`` task on festival's speech.

Every 10 ms frame of a sentence spoken by festival (:mod:`attnlab.speechgen`) is labelled with
the phone at its centre (48 labels: the radio phone set with ``pau``); the metric is frame
accuracy. The data must have been made first (it is not downloaded, and making it needs
festival)::

    attnlab data make phones --sentences 1000 --seed 0
    attnlab train phones --task_options.sentences=1000 --task_options.seed=0
    attnlab predict runs/phones/best.pt a.wav --json

The model is the speech model of :mod:`.model` on the same log-mel frames for every encoder
kind: ``transformer`` (``--model.encoder.window=w``: local attention), ``rnn`` (BiLSTM),
``cnn`` and ``fc`` (``--model.encoder.context=k``: the homework's window-FC baseline), with
one output per frame, so the Conv2d x4 subsampling front end is refused.

Legend: ``b`` batch, ``n`` frames, ``f`` features, ``L`` labels.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.audio import LogMel, normalize_utterance, read_wav
from attnlab.speechgen import (
    PHONES,
    Segment,
    find_phones,
    frame_labels,
    frames_to_segments,
    load_manifest,
    num_frames,
)

from ..base import Task
from .model import FrontendConfig, SpeechModelConfig, build_speech_model

__all__ = ["PhonesOptions", "PhonesTask", "PhoneUtterance"]

IGNORE = -100  # label of padded frames
SAMPLE_RATE = 16000


@dataclass
class PhonesOptions:
    """Options of the ``phones`` task.

    Args:
        sentences: the dataset made by ``attnlab data make phones --sentences N``.
        seed: ... and ``--seed S``.
        corpus: ... and ``--corpus C`` (the text the sentences come from).
        path: a dataset directory (with ``manifest.json``) instead of looking one up in the
            cache by the three settings above.
        max_train_sentences: use only the first N train sentences (0: all).
    """

    sentences: int = 1000
    seed: int = 0
    corpus: str = "conll2000"
    path: str = ""
    max_train_sentences: int = 0


class PhoneUtterance(NamedTuple):
    """One spoken sentence: its WAV file, its phone segments and its sample count."""

    wav: str
    segments: tuple[Segment, ...]
    samples: int


def _options(options: Any) -> PhonesOptions:
    if isinstance(options, PhonesOptions):
        return options
    if isinstance(options, Mapping):
        valid = [f.name for f in fields(PhonesOptions)]
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ValueError(f"unknown task option(s) {unknown}; valid names: {', '.join(valid)}")
        return PhonesOptions(**options)
    raise TypeError(f"expected PhonesOptions task options, got {type(options).__name__}")


@functools.lru_cache(maxsize=8192)
def _samples(path: str) -> Tensor:
    """The file's samples at 16 kHz, read once per process (collate runs every epoch)."""
    return read_wav(path, SAMPLE_RATE)


class PhonesTask(Task):
    """Frame-wise phone classification of festival speech (N -> N), frame accuracy."""

    name = "phones"
    unit = "frame"

    def __init__(self) -> None:
        self.labels: list[str] = list(PHONES)
        self.model_cfg = self.default_model_config()
        self._splits: dict[str, list[PhoneUtterance]] = {}
        self._frontend: LogMel | None = None
        self._frontend_key: tuple = ()

    @classmethod
    def default_model_config(cls) -> SpeechModelConfig:
        # 40 mel bins: a phone is told apart by its spectral envelope; 80 bins add width only
        return SpeechModelConfig(frontend=FrontendConfig(n_mels=40))

    @classmethod
    def default_options(cls) -> PhonesOptions:
        return PhonesOptions()

    # ---------------------------------------------------------------- data
    def setup(self, options: PhonesOptions) -> None:
        """Read the dataset's manifest (the audio is read when first batched).

        Raises:
            FileNotFoundError: the dataset was not made; the message gives the command.
        """
        opts = _options(options)
        if opts.path:
            root = Path(opts.path)
        else:
            root = find_phones(sentences=opts.sentences, seed=opts.seed, corpus=opts.corpus)
        manifest = load_manifest(root)
        if manifest["phones"] != self.labels:
            raise ValueError(
                f"{root}: the dataset's phone set differs from this task's ({len(self.labels)} "
                "radio phones); remake it with attnlab data make phones"
            )
        by_key = {}
        for u in manifest["utterances"]:
            start, segments = 0.0, []
            for phone, end in u["segments"]:
                segments.append(Segment(phone, start, end))
                start = end
            by_key[u["key"]] = PhoneUtterance(str(root / "wav" / f"{u['key']}.wav"),
                                              tuple(segments), u["samples"])  # fmt: skip
        self._splits = {s: [by_key[k] for k in manifest["splits"][s]] for s in ("train", "dev",
                                                                                 "test")}  # fmt: skip
        if opts.max_train_sentences:
            self._splits["train"] = self._splits["train"][: opts.max_train_sentences]

    def splits(self) -> dict[str, list]:
        return self._splits

    def batch_size_of(self, example: PhoneUtterance) -> int:
        return num_frames(example.samples)

    def frontend(self) -> LogMel:
        """The log-mel front end of the model configuration (:meth:`build_model`'s)."""
        fe = self.model_cfg.frontend
        key = (fe.n_mels, fe.mfcc, fe.win_ms, fe.hop_ms)
        if self._frontend is None or self._frontend_key != key:
            self._frontend = LogMel(SAMPLE_RATE, n_mels=fe.n_mels, win_ms=fe.win_ms,
                                    hop_ms=fe.hop_ms, mfcc=fe.mfcc)  # fmt: skip
            self._frontend_key = key
        return self._frontend

    @torch.no_grad()
    def features(self, waves: Sequence[Tensor]) -> dict[str, Tensor]:
        """Waveforms -> ``{"features": (b, n, f), "lengths": (b,)}``, padded with zeros and
        normalised per utterance (``frontend.normalize="utterance"``) or not (``"none"``)."""
        front = self.frontend()
        feats = [front(w)[0] for w in waves]  # each (n, f)
        lengths = torch.tensor([len(x) for x in feats], dtype=torch.long)
        batch = nn.utils.rnn.pad_sequence(feats, batch_first=True)  # (b, n, f)
        if self.model_cfg.frontend.normalize == "utterance":
            batch = normalize_utterance(batch, lengths)
        return {"features": batch, "lengths": lengths}

    def collate(self, examples: list[PhoneUtterance]) -> dict[str, Tensor]:
        fe = self.model_cfg.frontend
        batch = self.features([_samples(u.wav) for u in examples])
        index = {p: i for i, p in enumerate(self.labels)}
        labels = torch.full(batch["features"].shape[:2], IGNORE, dtype=torch.long)  # (b, n)
        for i, (u, n) in enumerate(zip(examples, batch["lengths"].tolist())):
            tags = frame_labels(u.segments, n, sample_rate=SAMPLE_RATE, win_ms=fe.win_ms,
                                hop_ms=fe.hop_ms)  # fmt: skip
            labels[i, :n] = torch.tensor([index[t] for t in tags], dtype=torch.long)
        batch["labels"] = labels
        return batch

    # ---------------------------------------------------------------- model, loss, metric
    def build_model(self, model_config: SpeechModelConfig) -> nn.Module:
        """The speech model with one output per frame.

        Raises:
            ValueError: ``frontend.subsample`` other than ``none`` (4x fewer outputs than
                labelled frames) or ``frontend.normalize="global"``.
        """
        fe = model_config.frontend
        if fe.subsample != "none":
            raise ValueError(
                f"model.frontend.subsample={fe.subsample!r}: the phones task labels every 10 ms "
                "frame, so it needs one output per frame; set model.frontend.subsample=none"
            )
        if fe.normalize not in ("utterance", "none"):
            raise ValueError(
                f"model.frontend.normalize={fe.normalize!r}: the phones task normalises per "
                "utterance or not at all; set it to 'utterance' or 'none'"
            )
        self.model_cfg = model_config
        return build_speech_model(model_config, num_labels=len(self.labels), output="token")

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        logits = model(batch)  # (b, n, L)
        labels = batch["labels"]
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), reduction="sum",
                               ignore_index=IGNORE)  # fmt: skip
        return loss, (labels != IGNORE).sum()

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        correct = total = 0
        loss = 0.0
        for batch in batches:
            logits = model(batch)
            labels = batch["labels"]
            valid = labels != IGNORE
            loss += F.cross_entropy(logits[valid].float(), labels[valid], reduction="sum").item()
            correct += int(((logits.argmax(-1) == labels) & valid).sum())
            total += int(valid.sum())
        return {"accuracy": correct / max(total, 1), "loss": loss / max(total, 1),
                "frames": float(total)}  # fmt: skip

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {"labels": list(self.labels)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.labels = list(state["labels"])

    # ---------------------------------------------------------------- commands
    def parse_input(self, text: str) -> Tensor:
        """A WAV file's samples at 16 kHz (another rate is resampled).

        Raises:
            ValueError: not a readable WAV recording (the message names the file).
        """
        path = Path(text)
        if not path.is_file():
            raise ValueError(f"{self._label()}: {text!r} is not a file; expected a WAV file")
        return read_wav(path, SAMPLE_RATE)

    def encode_inputs(self, inputs: Sequence[Tensor]) -> dict[str, Tensor]:
        return self.features(list(inputs))

    def input_labels(self, input: Tensor) -> list[str]:
        """Each frame's centre time in seconds."""
        fe = self.model_cfg.frontend
        n = num_frames(len(input), sample_rate=SAMPLE_RATE, win_ms=fe.win_ms, hop_ms=fe.hop_ms)
        return [f"{(t * fe.hop_ms + fe.win_ms / 2) / 1000:.2f}" for t in range(n)]

    @torch.no_grad()
    def predict(self, model: nn.Module, inputs: Sequence[Tensor]) -> list[dict[str, Any]]:
        """Phone segments of each recording: ``{"segments": [{"phone", "start", "end"}, ...],
        "frames": [...]}`` (times in seconds; equal consecutive frame labels merged)."""
        model.eval()
        fe = self.model_cfg.frontend
        batch = self.encode_inputs(inputs)
        device = next(model.parameters()).device
        ids = model({k: v.to(device) for k, v in batch.items()}).argmax(-1).cpu()  # (b, n)
        records = []
        for row, n in zip(ids, batch["lengths"].tolist()):
            frames = [self.labels[int(i)] for i in row[:n]]
            segments = frames_to_segments(frames, sample_rate=SAMPLE_RATE, win_ms=fe.win_ms,
                                          hop_ms=fe.hop_ms)  # fmt: skip
            records.append({"segments": [s._asdict() for s in segments], "frames": frames})
        return records

    def format_text(self, record: Mapping[str, Any]) -> str:
        """``phone start-end`` per segment, e.g. ``pau 0.00-0.22 hh 0.22-0.29 ...``."""
        return " ".join(f"{s['phone']} {s['start']:.2f}-{s['end']:.2f}" for s in record["segments"])
