"""One configuration dataclass per kind of sequence encoder, chosen by its ``kind`` field.

:class:`EncoderConfig` is the base (and the config of a registered encoder without one of its
own); :class:`TransformerEncoderConfig`, :class:`FCEncoderConfig`, :class:`CNNEncoderConfig`,
:class:`RNNEncoderConfig` and :class:`ConvAttentionEncoderConfig` hold only their kind's
settings, so a setting of another kind is an error that names the kind and its fields rather
than a silently ignored value. ``--model.encoder.kind=cnn`` swaps the dataclass
(:meth:`EncoderConfig.switch_kind`), keeping the settings the kinds share. (Old runs' spellings
are read by :mod:`attnlab.lab.train.legacy`, for their checkpoints only.)
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from attnlab.attention_config import AttentionConfig
from attnlab.blocks import TrunkConfig
from attnlab.lab.models.baselines import CNNEncoder, FCEncoder, RNNEncoder
from attnlab.lab.models.cnn_attention import ConvAttentionEncoder
from attnlab.lab.models.encoders import ENCODERS, SequenceEncoder, TransformerSequenceEncoder
from attnlab.positional import POSITIONAL

__all__ = [
    "EncoderConfig",
    "TransformerEncoderConfig",
    "FCEncoderConfig",
    "CNNEncoderConfig",
    "RNNEncoderConfig",
    "ConvAttentionEncoderConfig",
]

#: kind name -> its config dataclass (filled by ``@_encoder_config``)
_KINDS: dict[str, type[EncoderConfig]] = {}


def _config_class(kind: str) -> type[EncoderConfig]:
    """The dataclass of encoder ``kind`` (aliases resolved); :class:`EncoderConfig` itself for a
    registered encoder without a config of its own."""
    if kind in _KINDS:
        return _KINDS[kind]
    if isinstance(kind, str) and kind in ENCODERS:
        return EncoderConfig
    valid = [*_KINDS, *sorted(set(ENCODERS) - set(_KINDS))]
    raise ValueError(f"unknown encoder kind {kind!r}; valid choices: {', '.join(valid)}")


@dataclass
class EncoderConfig:
    """The sequence encoder (:data:`~attnlab.lab.models.encoders.ENCODERS`): the base of one
    dataclass per kind, and the config of a registered encoder that has none of its own (built
    as ``ENCODERS.get(kind)(dim, depth=depth, dropout=dropout)``).

    Args:
        kind: which encoder: ``transformer``, ``fc`` (fully connected over a context of ``k``
            vectors), ``cnn``, ``rnn``, ``cnn-attention`` (Kim's CNN
            under Transformer blocks) or another registered encoder;
            setting it switches to that kind's settings.
        depth: number of layers (blocks / hidden layers / convolutions / recurrent layers).
        dropout: dropout in the encoder during training.
    """

    kind: str = "transformer"
    depth: int = 2
    dropout: float = 0.1

    def __post_init__(self) -> None:
        expected = _config_class(self.kind)
        if expected is not type(self):
            raise ValueError(
                f"{type(self).__name__} is not the config of encoder kind {self.kind!r}; use "
                f"{expected.__name__} (or switch_kind({self.kind!r}))"
            )

    # ---- the protocol of train.overrides for sections chosen by kind -----------------------
    @classmethod
    def kinds(cls) -> dict[str, type[EncoderConfig]]:
        """``{kind: config dataclass}`` of every registered encoder (those with a config of
        their own first)."""
        names = [*_KINDS, *sorted(set(ENCODERS) - set(_KINDS))]
        return {name: _config_class(name) for name in names}

    def switch_kind(self, kind: str) -> EncoderConfig:
        """This config as encoder ``kind``: that kind's defaults, with the values of the fields
        both kinds have (``depth``, ``dropout``, ...) carried over.

        Raises:
            ValueError: an unknown kind; the message lists the valid ones.
        """
        cls = _config_class(kind)
        if cls is type(self) and kind == self.kind:
            return dataclasses.replace(self)
        names = {f.name for f in dataclasses.fields(self)} - {"kind"}
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(cls) if f.name in names}
        return cls(kind=kind, **shared)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EncoderConfig:
        """The config that ``data`` describes (its ``kind`` picks the dataclass; default
        ``transformer``); missing fields take their defaults, unknown ones raise."""
        data = dict(data)
        kind = data.pop("kind", "transformer")
        target = _config_class(kind)
        names = [f.name for f in dataclasses.fields(target)]
        unknown = set(data) - set(names)
        if unknown:
            raise ValueError(
                f"encoder kind {kind!r} ({target.__name__}): unknown fields {sorted(unknown)}; "
                f"valid: {', '.join(names)}"
            )
        if isinstance(data.get("attention"), Mapping):
            data["attention"] = _from_dict(AttentionConfig, data["attention"])
        return target(kind=kind, **data)

    def build(self, dim: int) -> SequenceEncoder:
        """The encoder these settings describe, for inputs of width ``dim``."""
        return ENCODERS.get(self.kind)(dim, depth=self.depth, dropout=self.dropout)


def _encoder_config(kind: str):
    """Register a config dataclass as the one of encoder ``kind``."""

    def add(cls: type[EncoderConfig]) -> type[EncoderConfig]:
        _KINDS[kind] = cls
        return cls

    return add


@_encoder_config("transformer")
@dataclass
class TransformerEncoderConfig(EncoderConfig, TrunkConfig):
    """A stack of Transformer blocks (:class:`~attnlab.lab.models.TransformerSequenceEncoder`): the
    trunk's settings (:class:`~attnlab.blocks.TrunkConfig`: ``depth``, ``heads``,
    ``ff_hidden``, ``dropout``, ``norm_first``, ``attention``) and a sequence's positions.

    Args:
        ff_hidden: feed-forward hidden width (the tagger's 256; None: 4 x the width).
        positional: positional encoding (``rotary``, ``sinusoidal``, ``learned``, ``relative``,
            ``alibi``, ...), or none.
        max_len: longest sequence, for encodings that need it (``learned``).
        positional_options: the encoding's options (JSON on the command line), e.g.
            ``{"interleaved": true, "fraction": 0.5}`` for GPT-J / x-transformers style rotary
            (interleaved pairs, half of each head rotated) or ``{"base": 500000}``; one at a
            time: ``--model.encoder.positional_options.interleaved=true``.
        window: local attention radius (position i sees ``|i - j| <= window``); none for full
            attention.
        causal: position i attends to j <= i only (a decoder-only reader of the sequence).
    """

    kind: str = "transformer"
    ff_hidden: int | None = 256
    positional: str | None = "rotary"
    max_len: int | None = None
    positional_options: dict[str, Any] = field(default_factory=dict)
    window: int | None = None
    causal: bool = False

    where: ClassVar[str] = "model.encoder"

    def __post_init__(self) -> None:
        EncoderConfig.__post_init__(self)
        TrunkConfig.__post_init__(self)
        _check_positional_options(self.positional, self.positional_options)
        if self.window is not None and (not isinstance(self.window, int) or self.window < 0):
            raise ValueError(
                f"model.encoder.window must be None or an int >= 0, got {self.window!r}"
            )

    def build(self, dim: int) -> SequenceEncoder:
        return TransformerSequenceEncoder(
            dim, depth=self.depth, heads=self.heads, ff_hidden=self.ff_hidden,
            dropout=self.dropout, norm_first=self.norm_first, positional=self.positional,
            max_len=self.max_len, positional_options=self.positional_options,
            window=self.window, causal=self.causal, attention=self.attention,
            attention_dropout=self.attention_dropout,
        )  # fmt: skip


@_encoder_config("fc")
@dataclass
class FCEncoderConfig(EncoderConfig):
    """A fully connected network over a context of ``k`` vectors around each position
    (:class:`~attnlab.lab.models.FCEncoder`; the lecture's "window" baseline).

    Args:
        context: the context size ``k`` (odd, centred); 1 = each vector on its own.
        hidden: hidden and output width (None: the input width).
    """

    kind: str = "fc"
    context: int = 3
    hidden: int | None = None

    def build(self, dim: int) -> SequenceEncoder:
        return FCEncoder(
            dim, context=self.context, hidden=self.hidden, depth=self.depth, dropout=self.dropout
        )


@_encoder_config("cnn")
@dataclass
class CNNEncoderConfig(EncoderConfig):
    """Stacked 1-D convolutions (:class:`~attnlab.lab.models.CNNEncoder`).

    Args:
        hidden: channels, hidden and output width (None: the input width).
        conv_kernel: convolution width (odd).
        residual: add each layer's input to its output.
    """

    kind: str = "cnn"
    hidden: int | None = None
    conv_kernel: int = 3
    residual: bool = True

    def build(self, dim: int) -> SequenceEncoder:
        return CNNEncoder(
            dim, channels=self.hidden, depth=self.depth, kernel=self.conv_kernel,
            residual=self.residual, dropout=self.dropout,
        )  # fmt: skip


@_encoder_config("rnn")
@dataclass
class RNNEncoderConfig(EncoderConfig):
    """An LSTM or GRU (:class:`~attnlab.lab.models.RNNEncoder`).

    Args:
        hidden: hidden width per direction (None: half the input width if bidirectional, so
            the output keeps the input width).
        cell: ``lstm`` or ``gru``.
        bidirectional: run both directions and concatenate.
    """

    kind: str = "rnn"
    hidden: int | None = None
    cell: Literal["lstm", "gru"] = "lstm"
    bidirectional: bool = True

    def build(self, dim: int) -> SequenceEncoder:
        return RNNEncoder(
            dim, hidden=self.hidden, depth=self.depth, cell=self.cell,
            bidirectional=self.bidirectional, dropout=self.dropout,
        )  # fmt: skip


@_encoder_config("cnn-attention")
@dataclass
class ConvAttentionEncoderConfig(EncoderConfig, TrunkConfig):
    """Kim's multi-width CNN with Transformer blocks on top
    (:class:`~attnlab.lab.models.cnn_attention.ConvAttentionEncoder`; the lecture's "use both"):
    the convolutions, then a trunk (:class:`~attnlab.blocks.TrunkConfig`) over their features.
    ``depth`` counts the Transformer blocks (0: Kim's CNN alone); the feature width is
    ``len(widths) * maps``, which ``heads`` must divide and ``ff_hidden`` (None) is 4 x of.

    Args:
        widths: convolution widths (Kim: 3, 4, 5); ``--model.encoder.widths=[3,4,5]``.
        maps: feature maps per width (Kim: 100).
        positional: positional encoding of the blocks, or none (the convolutions see word
            order within their windows).
    """

    kind: str = "cnn-attention"
    depth: int = 1
    widths: tuple[int, ...] = (3, 4, 5)
    maps: int = 100
    positional: str | None = None

    min_depth: ClassVar[int] = 0
    where: ClassVar[str] = "model.encoder"

    def __post_init__(self) -> None:
        EncoderConfig.__post_init__(self)
        TrunkConfig.__post_init__(self)

    def build(self, dim: int) -> SequenceEncoder:
        return ConvAttentionEncoder(
            dim, widths=self.widths, maps=self.maps, depth=self.depth, heads=self.heads,
            ff_hidden=self.ff_hidden, dropout=self.dropout, norm_first=self.norm_first,
            positional=self.positional, attention=self.attention,
            attention_dropout=self.attention_dropout,
        )  # fmt: skip


def _check_positional_options(name: str | None, options: Mapping[str, Any]) -> None:
    """Refuse, where the config is written, options the encoding ``name`` does not take (the
    same rule as :func:`~attnlab.positional.make_positional`, without the model's sizes)."""
    if not isinstance(options, Mapping):
        raise ValueError(
            f"positional_options must be a dict of options, got {type(options).__name__}"
        )
    if not options:
        return
    if name is None:
        raise ValueError(
            f"positional_options {dict(options)} need a positional encoding; set positional "
            "(e.g. rotary)"
        )
    params = inspect.signature(POSITIONAL.get(name)).parameters
    sizes = {"dim", "heads", "head_dim", "max_len"}  # set by the model, not by options
    unknown = sorted((set(options) - set(params)) | (set(options) & sizes))
    if unknown:
        valid = ", ".join(sorted(set(params) - sizes)) or "none"
        raise ValueError(
            f"positional_options: {name!r} does not take {unknown}; valid options: {valid}"
            + ("; max_len is its own setting" if "max_len" in unknown else "")
        )


def _from_dict(cls: type, d: Mapping[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(d) - names
    if unknown:
        raise ValueError(
            f"{cls.__name__}: unknown fields {sorted(unknown)}; valid: {', '.join(sorted(names))}"
        )
    return cls(**d)
