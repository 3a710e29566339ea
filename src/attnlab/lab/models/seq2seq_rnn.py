r"""The classic encoder-decoder baseline: a BiLSTM encoder, an LSTM decoder and additive
(Bahdanau et al. 2015) attention, on the protocol of :mod:`attnlab.lab.models.seq2seq`.

The decoder is Luong et al. (2015)'s arrangement with Bahdanau's score: the LSTM runs over the
previous target tokens, its state :math:`s_t` queries the encoder states :math:`h_j` with the
core's additive score, and the context joins the state before the output layer:

.. math::
    e_{tj} = w^\top \tanh(W_q s_t + W_k h_j), \quad
    c_t = \sum_j \mathrm{softmax}_j(e_{tj})\, h_j, \quad
    \tilde s_t = \tanh(W_c [s_t; c_t]), \quad p(y_{t+1}) = \mathrm{softmax}(W_o \tilde s_t).

Because the attention does not feed back into the LSTM (no "input feeding"), teacher forcing
runs the decoder LSTM over the whole target in one call, which keeps training fast on a CPU; the
decoding state is just the LSTM's ``(h, c)``.

Legend: ``b`` batch, ``m`` source positions, ``n`` target positions, ``L`` LSTM layers.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlab import masks
from attnlab.dropout import Dropout
from attnlab.functional import AdditiveScore, attend
from attnlab.lab.models.seq2seq_types import DecodeOutput, Memory

__all__ = ["LSTMSeq2Seq"]

LSTMState = tuple[Tensor, Tensor]  # (h, c), each (L, b, dim)


class LSTMSeq2Seq(nn.Module):
    """BiLSTM encoder + LSTM decoder with additive attention (module docstring).

    Args:
        src_vocab: source vocabulary size (id 0 = padding).
        tgt_vocab: target vocabulary size (id 0 = padding).
        dim: embedding size, decoder hidden size and memory width (each encoder direction has
            ``dim // 2``).
        encoder_depth: BiLSTM layers.
        decoder_depth: decoder LSTM layers.
        dropout: on the embeddings, between LSTM layers and before the output layer.
        tie_embeddings: share the target embedding with the output projection.

    Shapes:
        - src: ``(b, m)`` long; src_lengths: ``(b,)``; tgt_in: ``(b, n)`` long
        - forward: logits ``(b, n, V)``; cross_weights: one ``(b, 1, n, m)`` tensor
    """

    def __init__(
        self,
        *,
        src_vocab: int,
        tgt_vocab: int,
        dim: int = 256,
        encoder_depth: int = 1,
        decoder_depth: int = 1,
        dropout: float = 0.1,
        tie_embeddings: bool = True,
    ) -> None:
        super().__init__()
        if dim % 2:
            raise ValueError(f"dim must be even (two encoder directions of dim // 2), got {dim}")
        self.dim, self.decoder_depth = dim, decoder_depth
        self.src_embed = nn.Embedding(src_vocab, dim, padding_idx=0)
        self.tgt_embed = nn.Embedding(tgt_vocab, dim, padding_idx=0)
        self.encoder = nn.LSTM(dim, dim // 2, num_layers=encoder_depth, bidirectional=True,
                               batch_first=True, dropout=dropout if encoder_depth > 1 else 0.0)  # fmt: skip
        self.bridge = nn.Linear(dim, dim)  # initial decoder state from the mean memory
        self.decoder = nn.LSTM(dim, dim, num_layers=decoder_depth, batch_first=True,
                               dropout=dropout if decoder_depth > 1 else 0.0)  # fmt: skip
        self.score = AdditiveScore(head_dim=dim, heads=1)
        self.combine = nn.Linear(2 * dim, dim)
        self.drop = Dropout(dropout)
        self.out = nn.Linear(dim, tgt_vocab, bias=False)
        if tie_embeddings:
            self.out.weight = self.tgt_embed.weight

    def encode(self, src: Tensor, src_lengths: Tensor) -> Memory:
        """Encode ``src`` ``(b, m)``; padded positions of the result are zero."""
        x = self.drop(self.src_embed(src))  # (b, m, dim)
        packed = pack_padded_sequence(x, src_lengths.clamp(min=1).cpu(), batch_first=True,
                                      enforce_sorted=False)  # fmt: skip
        out, _ = self.encoder(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        return Memory(out, src_lengths)  # (b, m, dim)

    def _initial_state(self, memory: Memory) -> LSTMState:
        mean = memory.out.sum(1) / memory.lengths.clamp(min=1)[:, None].to(memory.out.dtype)
        h = torch.tanh(self.bridge(mean))  # (b, dim)
        h = h.unsqueeze(0).expand(self.decoder_depth, -1, -1).contiguous()  # (L, b, dim)
        return h, torch.zeros_like(h)

    def decode(
        self,
        memory: Memory,
        tokens: Tensor,
        *,
        state: LSTMState | None = None,
        use_cache: bool = True,
        need_weights: bool = False,
    ) -> DecodeOutput:
        """Logits after each of ``tokens`` ``(b, n)`` (see :mod:`attnlab.lab.models.seq2seq`)."""
        if state is None:
            state = self._initial_state(memory)
        s, new_state = self.decoder(self.drop(self.tgt_embed(tokens)), state)  # (b, n, dim)
        a = attend(
            s[:, None], memory.out[:, None], memory.out[:, None], score=self.score,
            mask=masks.padding(memory.lengths),
        )  # fmt: skip  # out (b, 1, n, dim), weights (b, 1, n, m)
        mixed = torch.tanh(self.combine(torch.cat([s, a.out[:, 0]], dim=-1)))  # (b, n, dim)
        logits = self.out(self.drop(mixed))
        weights = [a.weights] if need_weights else None
        return DecodeOutput(logits, new_state if use_cache else None, weights)

    @staticmethod
    def reorder_state(state: LSTMState | None, index: Tensor) -> LSTMState | None:
        """The LSTM state of the batch rows ``index``."""
        if state is None:
            return None
        return state[0].index_select(1, index), state[1].index_select(1, index)

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits ``(b, n, V)``."""
        memory = self.encode(src, src_lengths)
        return self.decode(memory, tgt_in, use_cache=False).logits
