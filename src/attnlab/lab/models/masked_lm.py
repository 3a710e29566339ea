r"""A masked language model (Devlin et al. 2019, BERT) on the lab's sequence models.

:class:`MaskedLanguageModel` *is* a :class:`~attnlab.lab.models.SequenceModel` (same input encoder,
same sequence encoder, same parameter names: ``inputs.*``, ``encoder.*``), so the encoder it
pre-trains loads by name into a tagger or a classifier built from the same
:class:`~attnlab.lab.models.ModelConfig` (``--model.init``). Only the head differs: BERT's
transform, then the output layer tied to the input embedding (Press & Wolf 2017):

.. math::
    z_t = \mathrm{LayerNorm}(\mathrm{GELU}(W h_t + c)), \qquad
    \mathrm{logits}_t = E z_t + b

with :math:`E` (``(V, d_e)``) the word embedding of the input encoder; an input encoder
without one (``onehot``) gets an untied output layer.

The output layer runs on the positions that carry a label only (BERT's ``masked_lm_positions``):
its cost is ``V / d`` times the encoder's per position, and 15% of the positions are scored.

Legend: ``b`` batch, ``n`` positions, ``k`` scored positions, ``d`` encoder width, ``d_e``
embedding width, ``V`` vocabulary.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.lab.models.config import InputConfig, ModelConfig, build_encoder, build_inputs
from attnlab.lab.models.heads import HeadOutput
from attnlab.lab.models.inputs import EmbeddingInput
from attnlab.lab.models.model import ModelOutput, SequenceModel

__all__ = ["IGNORE_LABEL", "MaskedLMHead", "MaskedLanguageModel", "build_masked_lm"]

#: label of the positions not scored (``F.cross_entropy``'s default ``ignore_index``)
IGNORE_LABEL = -100


class MaskedLMHead(nn.Module):
    r"""BERT's masked-LM head: transform, then logits over the vocabulary (see the module).

    Args:
        dim: width of the encoded vectors (``d``).
        vocab_size: ``V``.
        embedding: the input encoder's word embedding ``(V, d_e)`` to tie the output layer
            to; None: an untied ``Linear(dim, V)``.

    Shapes:
        - hidden: ``(b, n, d)`` or ``(k, d)``; lengths: unused
        - logits: ``(b, n, V)`` or ``(k, V)``
    """

    def __init__(self, dim: int, vocab_size: int, *, embedding: nn.Embedding | None = None) -> None:
        super().__init__()
        if embedding is not None and embedding.num_embeddings != vocab_size:
            raise ValueError(
                f"the tied embedding has {embedding.num_embeddings} rows, not vocab_size="
                f"{vocab_size}"
            )
        width = dim if embedding is None else embedding.embedding_dim
        self.dim, self.num_labels = dim, vocab_size
        self.transform = nn.Linear(dim, width)
        self.norm = nn.LayerNorm(width)
        self.decoder = nn.Linear(width, vocab_size)
        if embedding is not None:
            self.decoder.weight = embedding.weight  # tied: one (V, d_e) parameter

    def forward(self, hidden: Tensor, lengths: Tensor | None = None) -> HeadOutput:
        z = self.norm(F.gelu(self.transform(hidden)))  # (..., d_e)
        return HeadOutput(self.decoder(z), None)  # (..., V)


class MaskedLanguageModel(SequenceModel):
    """A :class:`SequenceModel` with a :class:`MaskedLMHead` that scores labelled positions.

    ``model(batch)`` with ``batch["labels"]`` ``(b, n)`` (word ids to predict,
    :data:`IGNORE_LABEL` elsewhere) returns the logits of the labelled positions only,
    ``(k, V)`` in row-major order of ``labels != IGNORE_LABEL``; without labels, the logits of
    every position ``(b, n, V)``. ``need_weights=True`` returns a ``ModelOutput`` with the
    encoder's attention weights (``attnlab show``).
    """

    head: MaskedLMHead

    def forward(
        self, batch: Mapping[str, Tensor], *, need_weights: bool = False
    ) -> Tensor | ModelOutput:
        hidden, lengths, weights = self.encode(batch, need_weights=need_weights)  # (b, n, d)
        labels = batch.get("labels")
        if labels is not None:
            hidden = hidden[labels.to(hidden.device) != IGNORE_LABEL]  # (k, d)
        logits = self.head(hidden, lengths).logits  # (k, V) or (b, n, V)
        return ModelOutput(logits, weights, None) if need_weights else logits


def build_masked_lm(
    cfg: ModelConfig, *, vocab_size: int, char_vocab_size: int | None = None
) -> MaskedLanguageModel:
    """The masked LM whose input encoder and encoder are those :func:`~attnlab.lab.models.
    build_model` builds for ``cfg`` (the same classes and parameter names)."""
    inputs = build_inputs(cfg.input, vocab_size=vocab_size, char_vocab_size=char_vocab_size)
    encoder = build_encoder(cfg.encoder, dim=cfg.input.dim or InputConfig.dim)
    embedding = inputs.embed if isinstance(inputs, EmbeddingInput) else None
    head = MaskedLMHead(encoder.out_dim, vocab_size, embedding=embedding)
    return MaskedLanguageModel(inputs, encoder, head)
