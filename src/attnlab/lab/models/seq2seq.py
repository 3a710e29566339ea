r"""Encoder-decoder models (N -> M): the model reads ``m`` source tokens and writes target tokens
until it emits ``<eos>``, so it decides the output length itself.

Every model here follows one small protocol, :class:`~attnlab.lab.models.seq2seq_types.Seq2Seq`,
which :mod:`attnlab.lab.models.decoding` (greedy and beam search) and the ``g2p`` task rely on:

* ``encode(src, src_lengths) -> Memory``: the source read once;
* ``decode(memory, tokens, state=None, use_cache=True, need_weights=False) -> DecodeOutput``:
  the logits of the next token after each of ``tokens``. With ``state=None``, ``tokens`` is a
  whole prefix starting with ``<bos>``; with a state returned by an earlier call, ``tokens`` are
  the positions that follow it (incremental decoding). ``use_cache=False`` returns no state, so
  each step recomputes the whole prefix (the reference path of the decoding tests and the
  speed benchmark);
* ``reorder_state(state, index)``: the state of the rows ``index`` (beam search);
* ``forward(src, src_lengths, tgt_in) -> logits``: teacher forcing, for training.

Two models: :class:`TransformerSeq2Seq` (the core's :class:`~attnlab.blocks.TransformerEncoder`
and :class:`~attnlab.blocks.TransformerDecoder`, whose KV cache is the decoding state) and
:class:`~attnlab.lab.models.seq2seq_rnn.LSTMSeq2Seq` (BiLSTM encoder, LSTM decoder, additive
attention), built from a :class:`Seq2SeqConfig` by :func:`build_seq2seq`.

Legend: ``b`` batch, ``m`` source positions, ``n`` target positions, ``h`` heads, ``V`` target
vocabulary size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from attnlab import masks
from attnlab.attention_config import AttentionConfig
from attnlab.blocks import TrunkConfig
from attnlab.blocks.decoder import DecoderCache, TransformerDecoder
from attnlab.blocks.encoder import TransformerEncoder
from attnlab.lab.models.seq2seq_rnn import LSTMSeq2Seq
from attnlab.lab.models.seq2seq_types import DecodeOutput, Memory, Seq2Seq
from attnlab.positional import make_positional

__all__ = [
    "SEQ2SEQ_KINDS",
    "DecodeOutput",
    "LSTMSeq2Seq",
    "Memory",
    "Seq2Seq",
    "Seq2SeqConfig",
    "TransformerSeq2Seq",
    "build_seq2seq",
]

#: the model kinds of :func:`build_seq2seq`
SEQ2SEQ_KINDS = ("transformer", "lstm")


@dataclass
class Seq2SeqConfig:
    """The ``g2p`` task's model (``--model.kind=lstm``, ``--model.dim=256``, ...).

    Args:
        kind: ``"transformer"`` or ``"lstm"`` (BiLSTM encoder + LSTM decoder with additive
            attention, the classic baseline).
        dim: model width (Transformer) / embedding and hidden size (LSTM; each encoder
            direction has ``dim // 2``).
        heads: attention heads (Transformer).
        encoder_depth: encoder blocks (Transformer) or BiLSTM layers.
        decoder_depth: decoder blocks (Transformer) or LSTM layers.
        ff_hidden: feed-forward width (None: ``4 * dim``).
        dropout: dropout of the blocks / between LSTM layers.
        attention: the attention maths of every encoder and decoder block (Transformer;
            :class:`~attnlab.attention_config.AttentionConfig`, ``--attention.kernel=...``).
        positional: the Transformer's positional encoding, ``"sinusoidal"`` or ``"rotary"``
            (any name of :data:`attnlab.positional.POSITIONAL` that extrapolates).
        tie_embeddings: share the target embedding with the output projection.
        init: a ``g2p`` checkpoint or run directory whose weights the new run starts from, with
            a fresh optimizer and schedule (a second training stage); the model settings must
            be the checkpoint's. Empty: random init.
    """

    kind: str = "transformer"
    dim: int = 192
    heads: int = 4
    encoder_depth: int = 3
    decoder_depth: int = 3
    ff_hidden: int | None = None
    dropout: float = 0.1
    positional: str = "sinusoidal"
    tie_embeddings: bool = True
    init: str = ""
    attention: AttentionConfig = field(default_factory=AttentionConfig)

    def __post_init__(self) -> None:
        if self.kind not in SEQ2SEQ_KINDS:
            raise ValueError(f"model.kind must be one of {SEQ2SEQ_KINDS}, got {self.kind!r}")
        for name in ("dim", "heads", "encoder_depth", "decoder_depth"):
            if getattr(self, name) < 1:
                raise ValueError(f"model.{name} must be >= 1, got {getattr(self, name)}")
        if self.kind == "transformer" and self.dim % self.heads:
            raise ValueError(f"model.heads={self.heads} must divide model.dim={self.dim}")
        if self.kind == "lstm" and self.dim % 2:
            raise ValueError(f"model.kind='lstm' needs an even model.dim, got {self.dim}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"model.dropout must be in [0, 1), got {self.dropout}")
        if self.kind == "lstm" and self.attention != AttentionConfig():
            raise ValueError(
                "model.attention applies to kind=transformer; the LSTM's attention is its own "
                "(additive, over the encoder's outputs)"
            )
        if self.kind == "transformer":
            for part in ("encoder", "decoder"):
                self.trunk(part)  # the trunk's own checks (ff_hidden, ...), naming the field

    def trunk(self, part: str) -> TrunkConfig:
        """The encoder's or the decoder's trunk settings (``part``: ``"encoder"``,
        ``"decoder"``): this config's heads, width, dropout and attention, the part's depth."""
        depth = self.encoder_depth if part == "encoder" else self.decoder_depth
        return TrunkConfig(depth=depth, heads=self.heads, ff_hidden=self.ff_hidden,
                           dropout=self.dropout, attention=self.attention)  # fmt: skip


class TransformerSeq2Seq(nn.Module):
    r"""Pre-norm Transformer encoder-decoder (Vaswani et al. 2017) on the core's blocks.

    Embeddings are scaled by :math:`\sqrt{dim}` (their init has std :math:`dim^{-1/2}`, as in
    fairseq, so the tied output projection starts with unit-scale logits). The decoder's KV
    cache (:class:`~attnlab.blocks.decoder.DecoderCache`) is the decoding state.

    Args:
        src_vocab: source vocabulary size (id 0 = padding).
        tgt_vocab: target vocabulary size (id 0 = padding).
        dim, heads, encoder_depth, decoder_depth, ff_hidden, dropout, positional,
            tie_embeddings, attention: see :class:`Seq2SeqConfig`.

    Shapes:
        - src: ``(b, m)`` long; src_lengths: ``(b,)``; tgt_in: ``(b, n)`` long
        - forward: logits ``(b, n, V)``
    """

    def __init__(
        self,
        *,
        src_vocab: int,
        tgt_vocab: int,
        dim: int = 192,
        heads: int = 4,
        encoder_depth: int = 3,
        decoder_depth: int = 3,
        ff_hidden: int | None = None,
        dropout: float = 0.1,
        positional: str = "sinusoidal",
        tie_embeddings: bool = True,
        attention: AttentionConfig | None = None,
    ) -> None:
        super().__init__()
        self.dim = dim
        self.src_embed = nn.Embedding(src_vocab, dim, padding_idx=0)
        self.tgt_embed = nn.Embedding(tgt_vocab, dim, padding_idx=0)
        for emb in (self.src_embed, self.tgt_embed):
            nn.init.normal_(emb.weight, std=dim**-0.5)
            with torch.no_grad():
                emb.weight[0].zero_()
        cfg = Seq2SeqConfig(dim=dim, heads=heads, encoder_depth=encoder_depth,
                            decoder_depth=decoder_depth, ff_hidden=ff_hidden, dropout=dropout,
                            attention=attention or AttentionConfig())  # fmt: skip
        self.encoder = TransformerEncoder.from_config(
            dim, cfg.trunk("encoder"), positional=make_positional(positional, dim=dim, heads=heads)
        )
        self.decoder = TransformerDecoder.from_config(
            dim, cfg.trunk("decoder"), positional=make_positional(positional, dim=dim, heads=heads)
        )
        self.out = nn.Linear(dim, tgt_vocab, bias=False)
        if tie_embeddings:
            self.out.weight = self.tgt_embed.weight

    def encode(self, src: Tensor, src_lengths: Tensor) -> Memory:
        """Encode ``src`` ``(b, m)``; padded positions of the result are zero."""
        x = self.src_embed(src) * math.sqrt(self.dim)  # (b, m, dim)
        out = self.encoder(x, mask=masks.padding(src_lengths)).out
        keep = torch.arange(src.shape[1], device=src.device) < src_lengths[:, None]  # (b, m)
        return Memory(out * keep[..., None].to(out.dtype), src_lengths)

    def decode(
        self,
        memory: Memory,
        tokens: Tensor,
        *,
        state: DecoderCache | None = None,
        use_cache: bool = True,
        need_weights: bool = False,
    ) -> DecodeOutput:
        """Logits after each of ``tokens`` ``(b, n)`` (see the module docstring)."""
        if state is None and use_cache:
            state = DecoderCache()
        y = self.tgt_embed(tokens) * math.sqrt(self.dim)  # (b, n, dim)
        o = self.decoder(
            y, memory.out, context_mask=masks.padding(memory.lengths),
            cache=state if use_cache else None, need_weights=need_weights,
        )  # fmt: skip
        return DecodeOutput(self.out(o.out), state if use_cache else None, o.cross_weights)

    @staticmethod
    def reorder_state(state: DecoderCache | None, index: Tensor) -> DecoderCache | None:
        """The cache of the batch rows ``index`` (beam search keeps the surviving beams)."""
        return None if state is None else state.reorder(index)

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits ``(b, n, V)``: position ``t`` predicts ``tgt_in[:, t + 1]``
        (and the token after the last, ``<eos>``)."""
        memory = self.encode(src, src_lengths)
        return self.decode(memory, tgt_in, use_cache=False).logits


def build_seq2seq(cfg: Seq2SeqConfig, *, src_vocab: int, tgt_vocab: int) -> Seq2Seq:
    """The model of ``cfg`` for the given vocabulary sizes (id 0 = padding in both)."""
    if cfg.kind == "lstm":
        return LSTMSeq2Seq(
            src_vocab=src_vocab, tgt_vocab=tgt_vocab, dim=cfg.dim,
            encoder_depth=cfg.encoder_depth, decoder_depth=cfg.decoder_depth,
            dropout=cfg.dropout, tie_embeddings=cfg.tie_embeddings,
        )  # fmt: skip
    return TransformerSeq2Seq(
        src_vocab=src_vocab, tgt_vocab=tgt_vocab, dim=cfg.dim, heads=cfg.heads,
        encoder_depth=cfg.encoder_depth, decoder_depth=cfg.decoder_depth,
        ff_hidden=cfg.ff_hidden, dropout=cfg.dropout, positional=cfg.positional,
        tie_embeddings=cfg.tie_embeddings, attention=cfg.attention,
    )  # fmt: skip
