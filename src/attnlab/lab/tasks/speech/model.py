r"""The speech model: features -> (SpecAugment) -> (Conv2d x4 subsampling | linear) -> encoder
-> head, and its configuration.

The encoder is any :data:`~attnlab.lab.models.ENCODERS` kind (``transformer``, ``cnn``, ``rnn``
for the BiLSTM baseline, ``fc``), configured as in the text tasks. For the transformer,
``--model.encoder.window=w`` truncates self-attention to ``|i - j| <= w`` frames (after
subsampling, a frame is 40 ms); ``--model.causal=true`` makes it causal (``0 <= i - j <= w``),
which is what streaming needs (:mod:`.stream`).

Legend: ``b`` batch, ``n`` frames, ``f`` features, ``L`` labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import torch
from torch import Tensor, nn

from attnlab.lab.audio import Conv2dSubsampling, SpecAugment
from attnlab.lab.models import (
    EncoderConfig,
    HeadConfig,
    ModelOutput,
    SequenceEncoder,
    SequenceHead,
    TokenHead,
    TransformerEncoderConfig,
    TransformerSequenceEncoder,
)

__all__ = [
    "FrontendConfig",
    "SpeechModelConfig",
    "SpeechModel",
    "CausalTransformerEncoder",
    "build_speech_model",
]


@dataclass
class FrontendConfig:
    """Features and what the model does to them before the encoder.

    Args:
        n_mels: mel bins (Slaney scale, 25 ms Hann window, 10 ms hop: :class:`~attnlab.lab.audio.LogMel`).
        mfcc: > 0 uses that many MFCCs instead of the log-mel energies.
        win_ms, hop_ms: analysis window and frame shift.
        normalize: ``utterance`` (per-utterance mean / variance), ``global`` (the train set's,
            kept with the model; streams) or ``none``.
        subsample: ``none`` (a linear map per frame) or ``conv2d`` (two stride-2 3x3
            convolutions: 4x fewer frames, ESPnet / Conformer style).
        specaugment: time and frequency masking in training.
        freq_width, time_width: widest SpecAugment frequency band (bins) and time span (frames);
            two of each per utterance.
    """

    n_mels: int = 80
    mfcc: int = 0
    win_ms: float = 25.0
    hop_ms: float = 10.0
    normalize: Literal["utterance", "global", "none"] = "utterance"
    subsample: Literal["none", "conv2d"] = "none"
    specaugment: bool = True
    freq_width: int = 8
    time_width: int = 10


def _default_encoder() -> TransformerEncoderConfig:
    return TransformerEncoderConfig(positional="rotary", dropout=0.1)


@dataclass
class SpeechModelConfig:
    """A :class:`SpeechModel`.

    Args:
        frontend: features, normalisation, subsampling and SpecAugment.
        dim: the encoder's width.
        causal: causal (streamable) self-attention, transformer only.
        encoder: the sequence encoder; its ``kind`` chooses its settings.
        head: the task head (pooling for N -> 1).
    """

    frontend: FrontendConfig = field(default_factory=FrontendConfig)
    dim: int = 128
    causal: bool = False
    encoder: EncoderConfig = field(default_factory=_default_encoder)
    head: HeadConfig = field(default_factory=lambda: HeadConfig(pooling="attention"))


class CausalTransformerEncoder(TransformerSequenceEncoder):
    """:class:`~attnlab.lab.models.TransformerSequenceEncoder` with ``causal=True``: frame ``i``
    sees frames ``i - window .. i`` (``masks.local(window, causal=True)``), or all earlier
    frames without a window: what ``--model.causal=true`` builds, and what ``--stream`` runs.
    Same parameters, so its weights load into either."""

    def __init__(self, dim: int, **kwargs: Any) -> None:
        super().__init__(dim, causal=True, **kwargs)


class SpeechModel(nn.Module):
    """Frames in, logits out.

    Args:
        in_features: feature width ``f`` (mel bins or MFCCs).
        encoder: a :class:`~attnlab.lab.models.SequenceEncoder` of width ``encoder.dim``.
        head: a :class:`~attnlab.lab.models.TokenHead` (one label per frame) or
            :class:`~attnlab.lab.models.SequenceHead` (one per utterance).
        subsample: a :class:`~attnlab.lab.audio.Conv2dSubsampling` to ``encoder.dim``, or None for
            a linear map per frame.
        specaugment: masks features in training, or None.

    Batch: ``"features"`` ``(b, n, f)`` float, ``"lengths"`` ``(b,)`` valid frames.
    ``model(batch)`` returns the logits (``(b, L)`` or ``(b, n', L)``, ``n'`` frames after
    subsampling); with ``need_weights=True`` a :class:`~attnlab.lab.models.ModelOutput`.
    """

    def __init__(
        self, *, in_features: int, encoder: SequenceEncoder, head: nn.Module,
        subsample: Conv2dSubsampling | None = None, specaugment: SpecAugment | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.in_features = in_features
        self.specaugment = specaugment
        self.subsample = subsample
        self.in_proj = None if subsample is not None else nn.Linear(in_features, encoder.dim)
        self.encoder, self.head = encoder, head
        self.out_proj = (
            nn.Identity() if encoder.out_dim == head.dim else nn.Linear(encoder.out_dim, head.dim)
        )

    def front(self, feats: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """Features ``(b, n, f)`` -> encoder inputs ``(b, n', dim)`` and their lengths."""
        if feats.dim() != 3 or feats.shape[-1] != self.in_features:
            raise ValueError(
                f"batch['features']: expected (batch, frames, {self.in_features}), got "
                f"{tuple(feats.shape)}"
            )
        if self.specaugment is not None:
            feats = self.specaugment(feats, lengths)
        if self.subsample is not None:
            return self.subsample(feats, lengths)
        return self.in_proj(feats), lengths

    def encode(
        self, batch: Mapping[str, Tensor], *, need_weights: bool = False
    ) -> tuple[Tensor, Tensor, list[Tensor] | None]:
        """``(hidden (b, n', head.dim), lengths (b,), weights)``."""
        for key in ("features", "lengths"):
            if key not in batch:
                raise ValueError(f"the batch needs {key!r}; got keys {sorted(batch)}")
        x, lengths = self.front(batch["features"], batch["lengths"])
        hidden, weights = self.encoder(x, lengths, need_weights=need_weights)
        lengths = lengths.to(device=hidden.device, dtype=torch.long)
        return self.out_proj(hidden), lengths, weights

    def forward(
        self, batch: Mapping[str, Tensor], *, need_weights: bool = False
    ) -> Tensor | ModelOutput:
        hidden, lengths, weights = self.encode(batch, need_weights=need_weights)
        logits, head_weights = self.head(hidden, lengths)
        return ModelOutput(logits, weights, head_weights) if need_weights else logits


def build_speech_model(
    cfg: SpeechModelConfig, *, num_labels: int, output: Literal["token", "sequence"]
) -> SpeechModel:
    """The :class:`SpeechModel` that ``cfg`` describes.

    Raises:
        ValueError: ``causal`` with an encoder other than the transformer; an unknown
            ``subsample`` or ``output``.
    """
    fe, enc = cfg.frontend, cfg.encoder
    causal = cfg.causal or getattr(enc, "causal", False)
    if causal and not isinstance(enc, TransformerEncoderConfig):
        raise ValueError(
            f"model.causal=true needs the transformer encoder (causal local attention); got "
            f"encoder kind {enc.kind!r}. Set model.causal=false, or model.encoder.kind=transformer"
        )
    if fe.subsample not in ("none", "conv2d"):
        raise ValueError(f"frontend.subsample: expected 'none' or 'conv2d', got {fe.subsample!r}")
    encoder = (replace(enc, causal=True) if causal else enc).build(cfg.dim)
    if output == "token":
        head = TokenHead(encoder.out_dim, num_labels, dropout=cfg.head.dropout)
    elif output == "sequence":
        head = SequenceHead(
            encoder.out_dim, num_labels, pooling=cfg.head.pooling, dropout=cfg.head.dropout
        )
    else:
        raise ValueError(f"output: expected 'token' or 'sequence', got {output!r}")
    in_features = fe.mfcc or fe.n_mels
    subsample = Conv2dSubsampling(in_features, cfg.dim) if fe.subsample == "conv2d" else None
    augment = (
        SpecAugment(freq_width=fe.freq_width, time_width=fe.time_width) if fe.specaugment else None
    )
    return SpeechModel(
        in_features=in_features, encoder=encoder, head=head, subsample=subsample,
        specaugment=augment,
    )  # fmt: skip
