"""What the speech tasks share: utterances as waveforms, features in ``collate``, the speech
model (:mod:`.model`), losses and accuracy for one label per utterance (N -> 1) or per frame
(N -> N), ``predict`` on WAV files (optionally streamed, :mod:`.stream`), and the picture of
``show`` (:mod:`.draw`).

A subclass sets :attr:`SpeechTask.sample_rate` and :attr:`SpeechTask.output`, loads its
:class:`Utterance` lists in :meth:`setup` and fills :attr:`SpeechTask.labels`.

Legend: ``b`` batch, ``s`` samples, ``n`` frames, ``f`` features, ``L`` labels.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.audio import LogMel, normalize_utterance, read_audio
from attnlab.lab.audio.subsample import subsampled_lengths
from attnlab.lab.tasks.base import IGNORE_INDEX, Task, classification_metrics
from attnlab.lab.tasks.commands import TaskCommands
from attnlab.lab.tasks.speech.model import SpeechModel, SpeechModelConfig, build_speech_model

__all__ = ["SpeechTask", "Utterance", "IGNORE"]

IGNORE = IGNORE_INDEX  # frame label of padding (cross_entropy's ignore_index)


class Utterance(NamedTuple):
    """One recording.

    Attributes:
        audio: ``(s,)`` float32 samples at the task's sample rate.
        label: a class index (N -> 1), a ``(frames,)`` long tensor of frame labels (N -> N),
            or None (an unlabelled input of ``predict``).
        name: the file name or id.
    """

    audio: Tensor
    label: Any
    name: str


class SpeechTask(Task, TaskCommands):
    """Base class of the speech tasks (see the module docstring)."""

    sample_rate: ClassVar[int] = 16000
    output: ClassVar[str] = "sequence"  # "sequence" (N -> 1) or "token" (N -> N, frame labels)
    unit = "seq"

    def __init__(self) -> None:
        self.labels: list[str] = []
        self.model_cfg: SpeechModelConfig = self.default_model_config()
        self.stats: dict[str, list[float]] | None = None  # global feature mean / std
        self._splits: dict[str, list[Utterance]] = {}
        self._frontend: tuple[tuple, LogMel] | None = None

    @classmethod
    def default_model_config(cls) -> SpeechModelConfig:
        return SpeechModelConfig()

    def splits(self) -> dict[str, list]:
        return self._splits

    # ---------------------------------------------------------------- features
    def frontend(self) -> LogMel:
        """The :class:`~attnlab.lab.audio.LogMel` of the model configuration."""
        fe = self.model_cfg.frontend
        key = (self.sample_rate, fe.n_mels, fe.mfcc, fe.win_ms, fe.hop_ms)
        if self._frontend is None or self._frontend[0] != key:
            module = LogMel(self.sample_rate, n_mels=fe.n_mels, win_ms=fe.win_ms,
                            hop_ms=fe.hop_ms, mfcc=fe.mfcc)  # fmt: skip
            self._frontend = (key, module)
        return self._frontend[1]

    def raw_features(self, audios: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """Un-normalised features ``(b, n, f)`` of waveforms and their frame counts ``(b,)``."""
        fe = self.frontend()
        sizes = torch.tensor([a.shape[0] for a in audios])
        short = [i for i, s in enumerate(sizes.tolist()) if s < fe.n_fft]
        if short:
            raise ValueError(
                f"{self._label()}: input {short[0]} has {int(sizes[short[0]])} samples, shorter "
                f"than one {fe.n_fft}-sample frame"
            )
        wave = torch.zeros(len(audios), int(sizes.max()))
        for i, a in enumerate(audios):
            wave[i, : a.shape[0]] = a
        return fe(wave), fe.num_frames(sizes)

    def normalize(self, feats: Tensor, lengths: Tensor) -> Tensor:
        """Normalise features as ``model.frontend.normalize`` says (padded frames become 0)."""
        mode = self.model_cfg.frontend.normalize
        valid = (torch.arange(feats.shape[1]) < lengths[:, None]).unsqueeze(-1)  # (b, n, 1)
        if mode == "utterance":
            return normalize_utterance(feats, lengths)
        if mode == "global":
            if self.stats is None:
                raise RuntimeError(
                    f"{self._label()}: global statistics not computed; build_model first"
                )
            mean, std = torch.tensor(self.stats["mean"]), torch.tensor(self.stats["std"])
            return (feats - mean) / std * valid
        if mode == "none":
            return feats * valid
        raise ValueError(
            f"model.frontend.normalize: expected utterance, global or none, got {mode!r}"
        )

    def features(self, audios: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
        """Normalised features ``(b, n, f)`` and frame counts ``(b,)`` of waveforms."""
        feats, lengths = self.raw_features(audios)
        return self.normalize(feats, lengths), lengths

    def _raw_batch(self, utterances: Sequence[Utterance]) -> tuple[Tensor, Tensor]:
        """Unnormalised padded features ``(b, n, bins)`` and lengths of some utterances (a task
        that caches its features overrides this)."""
        return self.raw_features([u.audio for u in utterances])

    def _global_stats(self, utterances: Sequence[Utterance], chunk: int = 64) -> None:
        """The train split's feature mean and standard deviation (``normalize=global``)."""
        total = total_sq = None
        count = 0
        for start in range(0, len(utterances), chunk):
            feats, lengths = self._raw_batch(utterances[start : start + chunk])
            valid = (torch.arange(feats.shape[1]) < lengths[:, None]).unsqueeze(-1)
            x = (feats * valid).double()
            s, sq = x.sum((0, 1)), x.square().sum((0, 1))
            total = s if total is None else total + s
            total_sq = sq if total_sq is None else total_sq + sq
            count += int(lengths.sum())
        mean = total / count
        std = (total_sq / count - mean.square()).clamp(min=1e-10).sqrt()
        self.stats = {"mean": mean.float().tolist(), "std": std.float().tolist()}

    # ---------------------------------------------------------------- batches
    def batch_size_of(self, example: Utterance) -> int:
        return int(example.audio.shape[0]) // max(self.frontend().hop, 1)

    #: log-mel frames, masked by ``lengths`` beyond each recording's end (padding is inert)
    padded_floats = ("features",)

    def collate(self, examples: list) -> dict[str, Tensor]:
        feats, lengths = self.features([u.audio for u in examples])
        batch = {"features": feats, "lengths": lengths}
        if self.output == "sequence":
            batch["labels"] = torch.tensor([int(u.label) for u in examples], dtype=torch.long)
        else:
            labels = torch.full(feats.shape[:2], IGNORE, dtype=torch.long)
            for i, u in enumerate(examples):
                n = min(int(lengths[i]), len(u.label))
                labels[i, :n] = torch.as_tensor(u.label[:n])
            batch["labels"] = labels
        return batch

    # ---------------------------------------------------------------- model, loss, metric
    def build_model(self, model_config: SpeechModelConfig) -> SpeechModel:
        """A :class:`SpeechModel`; with ``normalize=global`` the train split's feature
        statistics are computed first (unless restored)."""
        self.model_cfg = model_config
        if model_config.frontend.normalize == "global" and self.stats is None:
            train = self._splits.get("train")
            if not train:
                raise RuntimeError(
                    f"{self._label()}: normalize=global needs the train split; call setup() first"
                )
            self._global_stats(train)
        return build_speech_model(model_config, num_labels=len(self.labels), output=self.output)

    @staticmethod
    def frame_labels(labels: Tensor, frames: int) -> Tensor:
        """Frame labels ``(b, n)`` for logits of ``frames`` frames: unchanged without
        subsampling; after Conv2d x4 subsampling, output ``t`` (input frames ``4t .. 4t + 6``)
        takes the label of the centre frame ``4t + 3``."""
        if labels.shape[1] == frames:
            return labels
        idx = torch.arange(frames, device=labels.device) * 4 + 3
        return labels[:, idx.clamp(max=labels.shape[1] - 1)]

    def _logits_labels(
        self, model: nn.Module, batch: Mapping[str, Tensor]
    ) -> tuple[Tensor, Tensor]:
        logits = model(batch).float()
        labels = batch["labels"]
        if self.output == "token":
            labels = self.frame_labels(labels, logits.shape[1])
            return logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
        return logits, labels

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, int | Tensor]:
        logits, labels = self._logits_labels(model, batch)
        loss = F.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="sum")
        return loss, (labels != IGNORE).sum()

    def evaluate(self, model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> dict[str, float]:
        return classification_metrics(self._logits_labels(model, b) for b in batches)

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {"labels": list(self.labels), "stats": self.stats}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.labels = list(state["labels"])
        self.stats = state.get("stats")

    # ---------------------------------------------------------------- commands
    def parse_input(self, text: str) -> Utterance:
        """A WAV (or FLAC) file's path -> its :class:`Utterance` at the task's sample rate
        (another rate is resampled; one below half the task's rate is refused, one between that
        and the task's rate is upsampled with a warning: :func:`~attnlab.lab.audio.read_wav`).

        Raises:
            ValueError: no such file, a directory, or not a usable WAV file (the reason is
                named).
        """
        path = Path(text.strip())
        if path.is_dir():
            raise ValueError(f"{self._label()}: expected a WAV file, got {text!r} (a directory)")
        if not path.is_file():
            raise ValueError(f"{self._label()}: expected a WAV file, got {text!r} (no such file)")
        return Utterance(read_audio(path, self.sample_rate), None, str(path))

    def encode_inputs(self, inputs: Sequence[Utterance]) -> dict[str, Tensor]:
        feats, lengths = self.features([u.audio for u in inputs])
        return {"features": feats, "lengths": lengths}

    def input_labels(self, input: Utterance) -> list[str]:
        """Times (s) of the encoder's frames, after any subsampling."""
        hop = self.frontend().hop / self.sample_rate
        n = int(self.frontend().num_frames(input.audio.shape[0]))
        if self.model_cfg.frontend.subsample == "conv2d":
            return [f"{(4 * t + 3) * hop:.2f}" for t in range(subsampled_lengths(n))]
        return [f"{t * hop:.2f}" for t in range(n)]

    def add_arguments(self, parser: argparse.ArgumentParser, command: str) -> None:
        if command == "predict":
            parser.add_argument(
                "--stream", action="store_true",
                help="feed the file in chunks (causal local attention, bounded cache) and print "
                "the label after each chunk",
            )  # fmt: skip
            parser.add_argument("--chunk-ms", dest="chunk_ms", type=float, default=100.0,
                                help="chunk length for --stream (default 100 ms)")  # fmt: skip

    def example_input(self, example: Utterance) -> tuple[Utterance, str]:
        """A recording of a split and its label (frame labels: the labels in order, each
        once)."""
        if isinstance(example.label, int):
            return example, self.labels[example.label]
        ids = (
            [int(i) for i in example.label.tolist() if int(i) >= 0]
            if example.label is not None
            else []
        )
        runs = [i for k, i in enumerate(ids) if k == 0 or ids[k - 1] != i]
        return example, " ".join(self.labels[i] for i in runs)

    @torch.no_grad()
    def predict(
        self, model: nn.Module, inputs: Sequence[Utterance], *, stream: bool = False,
        chunk_ms: float = 100.0,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """N -> 1: ``{"file", "label", "probabilities"}`` per input; with ``stream``, also
        ``"chunks"``: ``{"end_s", "label", "p"}`` after every ``chunk_ms`` of audio."""
        model.eval()
        if stream:
            from attnlab.lab.tasks.speech.stream import stream_file

            return [stream_file(self, model, u, chunk_ms=chunk_ms) for u in inputs]
        if self.output != "sequence":
            raise NotImplementedError(f"task {self._label()} overrides predict for frame labels")
        probs = model(self.encode_inputs(inputs)).float().softmax(-1)  # (b, L)
        return [self.record(u.name, p) for u, p in zip(inputs, probs)]

    def record(self, name: str, probs: Tensor) -> dict[str, Any]:
        """The prediction record of one file from its class probabilities ``(L,)``."""
        return {
            "file": name,
            "label": self.labels[int(probs.argmax())],
            "probabilities": {lab: round(float(p), 4) for lab, p in zip(self.labels, probs)},
        }

    def format_text(self, record: Mapping[str, Any]) -> str:
        p = record["probabilities"][record["label"]]
        line = f"{record['file']}: {record['label']} ({p:.2f})"
        if "chunks" in record:
            steps = [f"  {c['end_s']:.2f}s {c['label']} ({c['p']:.2f})" for c in record["chunks"]]
            line = "\n".join([line, *steps])
        return line

    def attention_view(self, model: nn.Module, input: Utterance, *, title: str = "",
                       **options: Any):  # fmt: skip
        """The spectrogram, the chosen frame's attention over time, the window and the
        pooling attention, as a page (:func:`.view.speech_view`)."""
        from attnlab.lab.tasks.speech.view import speech_view

        return speech_view(self, model, input, title=title)

    def draw(
        self, model: nn.Module, input: Utterance, out: str | Path, *, title: str = "",
        **options: Any,
    ) -> Path:  # fmt: skip
        """The log-mel spectrogram above the attention over frames of every layer and head
        (and the pooling weights), on one time axis (:func:`.draw.draw_speech`)."""
        from attnlab.lab.tasks.speech.draw import draw_speech

        return draw_speech(self, model, input, out, title=title)
