"""Frame-wise phone classification (N -> N): the ``phones`` task on festival's speech.

Every 10 ms frame of a sentence spoken by festival (:mod:`attnlab.lab.speechgen`) is labelled with
the phone at its centre (48 labels: the radio phone set with ``pau``); the metric is frame
accuracy. The data is made, not downloaded: ``attnlab data make phones`` (festival speaks
it), or the task itself on first use when festival is installed (``task_options.make``, on by
default); without festival, training stops with the commands that install it and make the
data::

    attnlab data make phones --sentences 1000 --seed 0
    attnlab train phones --task_options.sentences=1000 --task_options.seed=0
    attnlab predict runs/phones/best.pt a.wav [--json]
    attnlab show runs/phones/best.pt a.wav --out a.png

The model is the speech model of :mod:`.model` on the same log-mel frames for every encoder
kind: ``transformer`` (``--model.encoder.window=w``: local attention), ``rnn`` (BiLSTM),
``cnn`` and ``fc`` (``--model.encoder.context=k``: the homework's window-FC baseline), with one
output per frame, so the Conv2d x4 subsampling front end is refused. Streaming
(``predict --stream``) works as in :mod:`.base` for a model trained with
``--model.causal=true --model.encoder.window=W --model.frontend.normalize=global``.

Legend: ``b`` batch, ``n`` frames, ``f`` features, ``L`` labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from attnlab.lab.audio import read_audio
from attnlab.lab.models import TransformerEncoderConfig
from attnlab.lab.speechgen import (
    PHONES,
    FestivalUnavailable,
    Segment,
    find_phones,
    frame_labels,
    frames_to_segments,
    load_manifest,
    make_phones,
    num_frames,
)
from attnlab.lab.tasks.base import options_as
from attnlab.lab.tasks.speech.base import IGNORE, SpeechTask, Utterance
from attnlab.lab.tasks.speech.model import FrontendConfig, SpeechModel, SpeechModelConfig

__all__ = ["PhonesOptions", "PhonesTask", "PhoneUtterance"]


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
        make: make the dataset with festival when it is missing (as ``attnlab data make
            phones`` would; seconds for a thousand sentences); false: stop with the command.
    """

    sentences: int = 1000
    seed: int = 0
    corpus: str = "conll2000"
    path: str = ""
    max_train_sentences: int = 0
    make: bool = True


class PhoneUtterance(NamedTuple):
    """One example: a WAV file, its phone segments and its sample count (the audio is read
    when first batched, and its features kept)."""

    wav: str
    segments: tuple[Segment, ...]
    samples: int


class PhonesTask(SpeechTask):
    """Frame-wise phone classification of festival speech (N -> N), frame accuracy."""

    name = "phones"
    unit = "frame"
    output = "token"
    sample_rate = 16000

    def __init__(self) -> None:
        super().__init__()
        self.labels = list(PHONES)
        self._cache: dict[tuple, Tensor] = {}

    @classmethod
    def default_model_config(cls) -> SpeechModelConfig:
        # 40 mel bins: a phone is told apart by its spectral envelope; 80 bins add width only.
        # No SpecAugment: a masked time span still has to be labelled frame by frame, which
        # only adds label noise for the per-frame baselines in short runs.
        # No dropout on the attention weights: on a CPU it keeps PyTorch's flash kernel (the
        # weights of ~800 frames are never materialised): 2.78x the training throughput, best
        # dev 85.7% against 86.0% with it, seeds 0 and 1 (84.7-86.8 vs 84.6-87.4;
        # benchmarks/recipe_check.py, BENCHMARKS.md "Training speed").
        return SpeechModelConfig(
            frontend=FrontendConfig(n_mels=40, specaugment=False),
            encoder=TransformerEncoderConfig(
                positional="rotary", dropout=0.1, attention_dropout=0.0
            ),
        )

    @classmethod
    def default_options(cls) -> PhonesOptions:
        return PhonesOptions()

    # ---------------------------------------------------------------- data
    def setup(self, options: PhonesOptions) -> None:
        """Read the dataset's manifest (the audio is read when first batched).

        Raises:
            FileNotFoundError: the dataset was not made (and ``make`` is off, or festival is
                missing); the message gives the commands.
            ValueError: the dataset's phone set is not this task's.
        """
        opts = options_as(PhonesOptions, options)
        root = Path(opts.path) if opts.path else self._find_or_make(opts)
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
            wav = str(root / "wav" / f"{u['key']}.wav")
            by_key[u["key"]] = PhoneUtterance(wav, tuple(segments), u["samples"])
        self._splits = {
            split: [by_key[k] for k in manifest["splits"][split]]
            for split in ("train", "dev", "test")
        }
        if opts.max_train_sentences:
            self._splits["train"] = self._splits["train"][: opts.max_train_sentences]

    @staticmethod
    def _find_or_make(opts: PhonesOptions) -> Path:
        try:
            return find_phones(sentences=opts.sentences, seed=opts.seed, corpus=opts.corpus)
        except FileNotFoundError as missing:
            if not opts.make:
                raise
            try:
                # every DDP rank may get here: make_phones renames a finished dataset into
                # place atomically and keeps the first one made
                return make_phones(opts.sentences, seed=opts.seed, corpus=opts.corpus)
            except FestivalUnavailable as err:
                raise FileNotFoundError(f"{missing}; {err}") from err

    def batch_size_of(self, example: PhoneUtterance) -> int:
        return num_frames(example.samples)

    def _utterance_features(self, wav: str) -> Tensor:
        """One file's raw (un-normalised) features ``(n, f)``, computed once per front end (a
        pure cache: collate stays a function of its examples)."""
        front = self.frontend()
        key = (wav, self._frontend[0])
        feats = self._cache.get(key)
        if feats is None:
            feats = self._cache[key] = front(read_audio(wav, self.sample_rate))[0]
        return feats

    def _raw_batch(self, examples: Sequence[PhoneUtterance]) -> tuple[Tensor, Tensor]:
        feats = [self._utterance_features(u.wav) for u in examples]  # each (n, f)
        lengths = torch.tensor([len(x) for x in feats], dtype=torch.long)
        return nn.utils.rnn.pad_sequence(feats, batch_first=True), lengths  # (b, n, f), (b,)

    def collate(self, examples: list[PhoneUtterance]) -> dict[str, Tensor]:
        fe = self.model_cfg.frontend
        feats, lengths = self._raw_batch(examples)
        index = {p: i for i, p in enumerate(self.labels)}
        labels = torch.full(feats.shape[:2], IGNORE, dtype=torch.long)  # (b, n)
        for i, (u, n) in enumerate(zip(examples, lengths.tolist())):
            tags = frame_labels(u.segments, n, sample_rate=self.sample_rate, win_ms=fe.win_ms,
                                hop_ms=fe.hop_ms)  # fmt: skip
            labels[i, :n] = torch.tensor([index[t] for t in tags], dtype=torch.long)
        return {"features": self.normalize(feats, lengths), "lengths": lengths, "labels": labels}

    # ---------------------------------------------------------------- model, metric
    def build_model(self, model_config: SpeechModelConfig) -> SpeechModel:
        """The speech model with one output per frame.

        Raises:
            ValueError: ``frontend.subsample`` other than ``none`` (4x fewer outputs than
                labelled frames).
        """
        if model_config.frontend.subsample != "none":
            raise ValueError(
                f"model.frontend.subsample={model_config.frontend.subsample!r}: the phones task "
                "labels every 10 ms frame, so it needs one output per frame; set "
                "model.frontend.subsample=none"
            )
        return super().build_model(model_config)

    # ---------------------------------------------------------------- commands
    def example_input(self, example: PhoneUtterance) -> tuple[Utterance, str]:
        """A recording of a split (read from its WAV file) and its phones in order."""
        return self.parse_input(example.wav), " ".join(s.phone for s in example.segments)

    def input_labels(self, input: Utterance) -> list[str]:
        """Each frame's centre time in seconds."""
        fe = self.model_cfg.frontend
        n = num_frames(len(input.audio), sample_rate=self.sample_rate, win_ms=fe.win_ms,
                       hop_ms=fe.hop_ms)  # fmt: skip
        return [f"{(t * fe.hop_ms + fe.win_ms / 2) / 1000:.2f}" for t in range(n)]

    def _segments(self, frames: Sequence[str]) -> list[dict[str, Any]]:
        fe = self.model_cfg.frontend
        segments = frames_to_segments(frames, sample_rate=self.sample_rate, win_ms=fe.win_ms,
                                      hop_ms=fe.hop_ms)  # fmt: skip
        return [s._asdict() for s in segments]

    @torch.no_grad()
    def predict(
        self, model: nn.Module, inputs: Sequence[Utterance], *, stream: bool = False,
        chunk_ms: float = 100.0,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Phone segments of each recording: ``{"file", "segments": [{"phone", "start", "end"},
        ...], "frames": [...]}``, times in seconds, equal consecutive frame labels merged.
        With ``stream``, also ``"chunks"``: the frames each ``chunk_ms`` of audio completed."""
        model.eval()
        if stream:
            records = super().predict(model, inputs, stream=True, chunk_ms=chunk_ms)
            for r in records:
                r["frames"] = [label for c in r["chunks"] for label in c["labels"]]
                r["segments"] = self._segments(r["frames"])
            return records
        batch = self.encode_inputs(inputs)
        device = next(model.parameters()).device
        ids = model({k: v.to(device) for k, v in batch.items()}).argmax(-1).cpu()  # (b, n)
        records = []
        for u, row, n in zip(inputs, ids, batch["lengths"].tolist()):
            frames = [self.labels[int(i)] for i in row[:n]]
            records.append({"file": u.name, "segments": self._segments(frames), "frames": frames})
        return records

    def format_text(self, record: Mapping[str, Any]) -> str:
        """``FILE: phone start-end ...``, e.g. ``a.wav: pau 0.00-0.22 hh 0.22-0.29 ...``."""
        segments = " ".join(
            f"{s['phone']} {s['start']:.2f}-{s['end']:.2f}" for s in record["segments"]
        )
        return f"{record['file']}: {segments}"
