r"""Streaming inference: a speech model fed fixed-size chunks of audio, with bounded latency
and memory whatever the length of the input.

What streams, and why each constraint:

* features: not-centred log-mel frames (:class:`~attnlab.lab.audio.StreamingLogMel`) normalised
  with fixed statistics (``model.frontend.normalize=global`` or ``none``): per-utterance
  normalisation needs the whole utterance and is refused;
* subsampling: none, or the Conv2d x4 front end, whose receptive field is 7 frames
  (:class:`~attnlab.lab.audio.StreamingSubsampler`: a fixed 60 ms look-ahead);
* the encoder: the transformer with **causal local** attention (``model.causal=true`` and
  ``model.encoder.window=w``): frame ``i`` sees frames ``i - w .. i``, so each layer keeps the
  last ``w`` inputs of that layer (its cache) and recomputes their keys and values with each
  chunk; a bidirectional or unwindowed encoder, a CNN or a BiLSTM is refused. Positions are
  relative inside the window (rotary, ALiBi, relative biases), or added to the input at the
  absolute frame index (sinusoidal);
* the head: per-frame logits (N -> N), or for N -> 1 a running pool (mean, max or attention
  pooling kept as a few ``(d,)`` vectors), so a label is available after every chunk.

Per chunk of ``c`` encoder frames the work is ``O(depth (w + c)^2 d)`` and the state
``O(depth w d)``: constant in the input length. The streamed frames equal the offline model's
under the same mask (tested to 1e-5 in float32).

Legend: ``n`` / ``c`` frames, ``w`` window, ``d`` width.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from attnlab.lab.audio import StreamingLogMel, StreamingSubsampler
from attnlab.lab.models import (
    AttentionPool,
    MaxPool,
    MeanPool,
    SequenceHead,
    TransformerSequenceEncoder,
)
from attnlab.lab.tasks.speech.model import SpeechModel

__all__ = ["SpeechStreamer", "RunningPool", "check_streamable", "stream_file"]


def check_streamable(task: Any, model: SpeechModel) -> None:
    """Refuse, with what to change, a model or front end that cannot stream."""
    cfg = task.model_cfg
    how = (
        "train a streaming model with --model.causal=true --model.encoder.window=W "
        "--model.frontend.normalize=global"
    )
    encoder = getattr(model, "encoder", None)
    if not getattr(encoder, "causal", False):
        kind = type(encoder).__name__
        raise ValueError(
            f"--stream needs causal local self-attention; this model's encoder is {kind}"
            f"{' (bidirectional)' if isinstance(encoder, TransformerSequenceEncoder) else ''}: "
            f"{how}"
        )
    if encoder.window is None:
        raise ValueError(
            "--stream needs a bounded cache: this model attends to all earlier frames (no "
            f"model.encoder.window); {how}"
        )
    if cfg.frontend.normalize == "utterance":
        raise ValueError(
            "--stream cannot use per-utterance normalisation (its mean and variance need the "
            f"whole file); {how}"
        )


class RunningPool:
    """Mean, max or attention pooling over frames that arrive in chunks, in ``O(d)`` state.

    Attention pooling keeps the running maximum score ``m``, ``s = sum exp(a_t - m)`` and
    ``v = sum exp(a_t - m) h_t`` (rescaled when ``m`` grows), so ``v / s`` is the softmax-
    weighted mean of every frame so far.
    """

    def __init__(self, pool: torch.nn.Module) -> None:
        if not isinstance(pool, MeanPool | MaxPool | AttentionPool):
            raise ValueError(
                f"--stream: pooling {type(pool).__name__} cannot run over a stream; use mean, "
                "max or attention pooling"
            )
        self.pool = pool
        self.count = 0
        self.total: Tensor | None = None  # mean: sum; max: max; attention: v
        self.m = self.s = None

    def update(self, h: Tensor) -> None:
        """Add frames ``h`` ``(c, d)``."""
        if h.shape[0] == 0:
            return
        self.count += h.shape[0]
        if isinstance(self.pool, MeanPool):
            part = h.sum(0)
            self.total = part if self.total is None else self.total + part
        elif isinstance(self.pool, MaxPool):
            part = h.amax(0)
            self.total = part if self.total is None else torch.maximum(self.total, part)
        else:
            a = h @ self.pool.query / math.sqrt(h.shape[-1])  # (c,) scaled-dot scores
            m = a.max() if self.m is None else torch.maximum(self.m, a.max())
            e = (a - m).exp()  # (c,)
            scale = 1.0 if self.m is None else (self.m - m).exp()
            self.s = e.sum() + (0.0 if self.s is None else self.s * scale)
            v = e @ h
            self.total = v if self.total is None else self.total * scale + v
            self.m = m

    def value(self) -> Tensor:
        """The pooled ``(d,)`` vector of every frame so far."""
        if self.total is None:
            raise RuntimeError("RunningPool.value: no frames yet")
        if isinstance(self.pool, MeanPool):
            return self.total / self.count
        if isinstance(self.pool, MaxPool):
            return self.total
        return self.total / self.s


class SpeechStreamer:
    """Feed audio chunks, get the encoder's new frames (and the running prediction).

    Args:
        task: a :class:`~attnlab.lab.tasks.speech.base.SpeechTask` (its front end and statistics).
        model: a :class:`~attnlab.lab.tasks.speech.model.SpeechModel` that streams
            (:func:`check_streamable`), in eval mode.
    """

    def __init__(self, task: Any, model: SpeechModel) -> None:
        check_streamable(task, model)
        self.task, self.model = task, model.eval()
        self.logmel = StreamingLogMel(task.frontend())
        self.subsampler = (
            StreamingSubsampler(model.subsample) if model.subsample is not None else None
        )
        self.window: int = model.encoder.window
        self.stack = model.encoder.encoder  # attnlab.blocks.TransformerEncoder
        self.caches: list[Tensor | None] = [None] * len(self.stack.blocks)  # (1, <= w, d) each
        self.frames = 0  # encoder frames so far
        head = model.head
        self.pool = RunningPool(head.pool) if isinstance(head, SequenceHead) else None

    @torch.no_grad()
    def push(self, samples: Tensor) -> Tensor:
        """Append ``samples`` ``(s,)``; return the new frames' hidden vectors ``(c, d)`` (the
        head's input; ``c`` may be 0)."""
        feats = self.logmel.push(samples)  # (n, f)
        if feats.shape[0]:
            lengths = torch.tensor([feats.shape[0]])
            feats = self.task.normalize(feats[None], lengths)[0]
        if self.subsampler is not None:
            x = self.subsampler.push(feats) if feats.shape[0] else feats.new_zeros(0, 1)
        else:
            x = self.model.in_proj(feats) if feats.shape[0] else feats
        c = x.shape[0]
        if c == 0:
            return torch.zeros(0, self.model.head.dim)
        h, block_pe = self.stack._input_positions(x[None], offset=self.frames)  # (1, c, d)
        for layer, block in enumerate(self.stack.blocks):
            past = self.caches[layer]
            xin = h if past is None else torch.cat([past, h], dim=1)  # (1, p + c, d)
            p = xin.shape[1] - c
            i = torch.arange(xin.shape[1])
            offset = i[:, None] - i[None, :]  # (i, j): query minus key position
            mask = (offset >= 0) & (offset <= self.window)  # causal local, as offline
            out = block(xin, mask=mask, positional=block_pe).out[:, p:]  # (1, c, d)
            self.caches[layer] = xin[:, -self.window :] if self.window else xin[:, :0]
            h = out
        self.frames += c
        hidden = self.model.out_proj(self.stack._final_norm(h))[0]  # (c, d)
        if self.pool is not None:
            self.pool.update(hidden)
        return hidden

    @torch.no_grad()
    def logits(self, hidden: Tensor | None = None) -> Tensor:
        """N -> 1: the logits ``(L,)`` of everything so far; N -> N: of ``hidden`` ``(c, L)``."""
        head = self.model.head
        if self.pool is not None:
            return head.proj(self.pool.value())
        return head.proj(hidden)

    def state_size(self) -> int:
        """Numbers held between chunks (samples, frames, caches, pooling): bounded."""
        n = self.logmel.buffer.numel() + sum(c.numel() for c in self.caches if c is not None)
        if self.subsampler is not None and self.subsampler.buffer is not None:
            n += self.subsampler.buffer.numel()
        return n


def stream_file(task: Any, model: SpeechModel, utterance: Any, *, chunk_ms: float = 100.0) -> dict:
    """Stream one utterance in ``chunk_ms`` chunks: its record, with the running label after
    each chunk that produced frames (``"chunks"``)."""
    if chunk_ms <= 0:
        raise ValueError(f"--chunk-ms: expected a positive duration, got {chunk_ms}")
    streamer = SpeechStreamer(task, model)
    step = max(1, round(task.sample_rate * chunk_ms / 1000))
    chunks: list[dict[str, Any]] = []
    audio = utterance.audio
    for start in range(0, audio.shape[0], step):
        hidden = streamer.push(audio[start : start + step])
        end = round(min(start + step, audio.shape[0]) / task.sample_rate, 3)
        if streamer.pool is None:  # N -> N: the labels of the frames this chunk completed
            ids = streamer.logits(hidden).argmax(-1).tolist() if hidden.shape[0] else []
            chunks.append({"end_s": end, "labels": [task.labels[i] for i in ids]})
        elif streamer.pool.count:
            probs = streamer.logits().float().softmax(-1)
            chunks.append({"end_s": end, "label": task.labels[int(probs.argmax())],
                           "p": round(float(probs.max()), 4)})  # fmt: skip
    if streamer.pool is None:
        return {"file": utterance.name, "chunks": chunks}
    if streamer.pool.count == 0:
        raise ValueError(f"{utterance.name}: too short to give a single encoder frame")
    record = task.record(utterance.name, streamer.logits().float().softmax(-1))
    record["chunks"] = chunks
    return record
