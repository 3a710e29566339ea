"""Nested, typed configuration of a :class:`~attnlab.models.SequenceModel`, and its builder.

Defaults are a small tagger that trains on two CPU cores: width 128, two pre-norm blocks of
four heads, feed-forward 256, rotary positions, learned embeddings with word dropout and
character features for unknown words. Rotary (Su et al. 2021) makes ``q_i . k_j`` depend on the
*relative* offset ``i - j``, which is what a tag depends on ("the previous word"), costs no
parameters and keeps the fused attention path. On Brown (3,000 training sentences, 3 epochs,
600 dev sentences) it tagged 92.0% (OOV 80.7%) against 90.0% for T5 relative biases, 89.7%
for sinusoidal, 90.6% without positions and 90.3% for a BiLSTM.

A preset is a diff over these defaults, e.g.
``ModelConfig(encoder=EncoderConfig(kind="rnn", depth=1))``; :meth:`ModelConfig.to_dict`
gives the resolved configuration to write beside a run's results, and
:meth:`ModelConfig.from_dict` reads it back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from .baselines import CNNEncoder, RNNEncoder, WindowEncoder
from .encoders import ENCODERS, SequenceEncoder, TransformerSequenceEncoder
from .heads import SequenceHead, TokenHead
from .inputs import INPUTS, EmbeddingInput, OneHotInput
from .model import SequenceModel

__all__ = ["InputConfig", "EncoderConfig", "HeadConfig", "ModelConfig", "build_model"]


@dataclass
class InputConfig:
    """How token ids become vectors (:mod:`attnlab.models.inputs`).

    ``kind``: ``"embedding"`` or ``"onehot"`` (``onehot`` reads ``dim`` only; ``dim=0`` keeps
    the raw ``V``-wide one-hot vectors and the model projects them).
    """

    kind: str = "embedding"
    dim: int = 128
    char_features: bool = True  # needs batch["chars"] and a char vocabulary size
    char_dim: int = 32
    char_channels: int | None = None  # default dim // 2
    char_kernel: int = 3
    shape_dim: int = 0  # > 0: word-shape features, needs batch["shapes"]
    word_dropout: float = 0.05
    dropout: float = 0.1


@dataclass
class EncoderConfig:
    """The sequence encoder (:data:`~attnlab.models.encoders.ENCODERS`).

    Which fields each ``kind`` reads:

    * all: ``depth`` (blocks / MLP layers / conv layers / RNN layers), ``dropout``;
    * ``"transformer"``: ``heads``, ``ff_hidden``, ``norm_first``, ``positional``, ``max_len``,
      ``local_window``, ``score``, ``normalize``, ``backend``, ``kernel``, ``kernel_options``;
    * ``"window"``: ``context`` (``k``, odd), ``hidden``;
    * ``"cnn"``: ``hidden`` (channels), ``conv_kernel``, ``residual``;
    * ``"rnn"``: ``hidden`` (per direction), ``cell``, ``bidirectional``.
    """

    kind: str = "transformer"
    depth: int = 2
    dropout: float = 0.1
    # transformer
    heads: int = 4
    ff_hidden: int | None = 256
    norm_first: bool = True
    positional: str | None = "rotary"
    max_len: int | None = None
    local_window: int | None = None
    score: str = "scaled_dot"
    normalize: str = "softmax"
    backend: str = "auto"
    kernel: str | None = None
    kernel_options: dict[str, Any] = field(default_factory=dict)
    # window / cnn / rnn
    hidden: int | None = None  # default: the input width (rnn: half of it per direction)
    context: int = 3
    conv_kernel: int = 3
    residual: bool = True
    cell: str = "lstm"
    bidirectional: bool = True


@dataclass
class HeadConfig:
    """The task head; ``pooling`` is read by sequence (N -> 1) heads only."""

    pooling: str = "mean"
    dropout: float = 0.1


@dataclass
class ModelConfig:
    input: InputConfig = field(default_factory=InputConfig)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    head: HeadConfig = field(default_factory=HeadConfig)

    def to_dict(self) -> dict[str, Any]:
        """Plain (JSON-friendly) nested dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        """Inverse of :meth:`to_dict`; missing fields take their defaults, unknown ones raise."""
        parts = {"input": InputConfig, "encoder": EncoderConfig, "head": HeadConfig}
        unknown = set(d) - set(parts)
        if unknown:
            raise ValueError(
                f"unknown model config sections {sorted(unknown)}; valid: {list(parts)}"
            )
        return cls(**{k: _from_dict(parts[k], d.get(k, {})) for k in parts})


def _from_dict(cls: type, d: dict[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - names
    if unknown:
        raise ValueError(
            f"{cls.__name__}: unknown fields {sorted(unknown)}; valid: {', '.join(sorted(names))}"
        )
    return cls(**d)


def build_inputs(
    cfg: InputConfig, *, vocab_size: int, char_vocab_size: int | None
) -> OneHotInput | EmbeddingInput:
    """The input encoder that ``cfg`` describes."""
    INPUTS.get(cfg.kind)  # unknown kinds list the valid ones
    if cfg.kind == "onehot":
        return OneHotInput(vocab_size, dim=cfg.dim or None)
    if cfg.char_features and char_vocab_size is None:
        raise ValueError(
            "input.char_features=True needs char_vocab_size (build a CharVocabulary), or set "
            "input.char_features=False"
        )
    return EmbeddingInput(
        vocab_size, cfg.dim,
        char_vocab_size=char_vocab_size if cfg.char_features else None,
        char_dim=cfg.char_dim,
        char_channels=cfg.char_channels if cfg.char_features else None,
        char_kernel=cfg.char_kernel, shape_dim=cfg.shape_dim,
        word_dropout=cfg.word_dropout, dropout=cfg.dropout,
    )  # fmt: skip


def build_encoder(cfg: EncoderConfig, *, dim: int) -> SequenceEncoder:
    """The sequence encoder that ``cfg`` describes, for inputs of width ``dim``."""
    ENCODERS.get(cfg.kind)  # unknown kinds list the valid ones
    if cfg.kind == "transformer":
        if cfg.kernel_options and cfg.kernel is None:
            raise ValueError("encoder.kernel_options need encoder.kernel (a kernel name)")
        attention: dict[str, Any] = {
            "score": cfg.score, "normalize": cfg.normalize, "backend": cfg.backend,
        }  # fmt: skip
        if cfg.kernel is not None:
            attention.update(kernel=cfg.kernel, **cfg.kernel_options)
        return TransformerSequenceEncoder(
            dim, depth=cfg.depth, heads=cfg.heads, ff_hidden=cfg.ff_hidden, dropout=cfg.dropout,
            norm_first=cfg.norm_first, positional=cfg.positional, max_len=cfg.max_len,
            window=cfg.local_window, attention=attention,
        )  # fmt: skip
    if cfg.kind == "window":
        return WindowEncoder(
            dim, context=cfg.context, hidden=cfg.hidden, depth=cfg.depth, dropout=cfg.dropout
        )
    if cfg.kind == "cnn":
        return CNNEncoder(
            dim, channels=cfg.hidden, depth=cfg.depth, kernel=cfg.conv_kernel,
            residual=cfg.residual, dropout=cfg.dropout,
        )  # fmt: skip
    if cfg.kind == "rnn":
        return RNNEncoder(
            dim, hidden=cfg.hidden, depth=cfg.depth, cell=cfg.cell,
            bidirectional=cfg.bidirectional, dropout=cfg.dropout,
        )  # fmt: skip
    # A registered encoder without a config mapping: pass the shared fields.
    return ENCODERS.get(cfg.kind)(dim, depth=cfg.depth, dropout=cfg.dropout)


def build_model(
    cfg: ModelConfig,
    *,
    vocab_size: int,
    char_vocab_size: int | None = None,
    num_labels: int,
    output: Literal["token", "sequence"] = "token",
) -> SequenceModel:
    """Build a :class:`SequenceModel` from ``cfg``.

    Args:
        cfg: the model configuration.
        vocab_size: word vocabulary size (``len(vocab)``).
        char_vocab_size: character vocabulary size (``len(char_vocab)``), for character
            features.
        num_labels: number of output labels.
        output: ``"token"`` (one label per position, N -> N) or ``"sequence"`` (one label per
            sequence, N -> 1). Sequence-to-sequence models plug a ``Seq2SeqHead`` into
            :class:`SequenceModel` directly.
    """
    if output not in ("token", "sequence"):
        raise ValueError(
            f"output must be 'token' or 'sequence', got {output!r}; for N -> M build a "
            "SequenceModel with a Seq2SeqHead"
        )
    inputs = build_inputs(cfg.input, vocab_size=vocab_size, char_vocab_size=char_vocab_size)
    # The encoder works at the input width; raw one-hot vectors (dim=0) are projected to the
    # encoder's width, which then defaults to 128.
    dim = cfg.input.dim or InputConfig.dim
    encoder = build_encoder(cfg.encoder, dim=dim)
    if output == "token":
        head = TokenHead(encoder.out_dim, num_labels, dropout=cfg.head.dropout)
    else:
        head = SequenceHead(
            encoder.out_dim, num_labels, pooling=cfg.head.pooling, dropout=cfg.head.dropout
        )
    return SequenceModel(inputs, encoder, head)
