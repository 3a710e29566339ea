"""Models of the lab: input encoders, sequence encoders and task heads, composed.

``SequenceModel(inputs, encoder, head)`` serves one label per vector (N -> N, tagging), one
label per sequence (N -> 1, classification); encoder-decoders (N -> M, :class:`Seq2Seq`).

Quick start::

    from attnlab.lab.models import (
        CharVocabulary, ModelConfig, Vocabulary, build_model, encode_batch,
    )

    vocab = Vocabulary.build(train_sentences, min_count=2)
    chars = CharVocabulary.build(train_sentences)
    model = build_model(ModelConfig(), vocab_size=len(vocab), char_vocab_size=len(chars),
                        num_labels=len(tags))
    batch = encode_batch(sentences, vocab, char_vocab=chars)
    logits = model(batch)  # (b, n, L)
    out = model(batch, need_weights=True)  # ModelOutput(logits, weights, head_weights)
"""

from attnlab.lab.models.baselines import CNNEncoder, FCEncoder, RNNEncoder
from attnlab.lab.models.batch import WORD_SHAPES, encode_batch, word_shape
from attnlab.lab.models.chars import CharCNN
from attnlab.lab.models.cnn_attention import ConvAttentionEncoder
from attnlab.lab.models.config import (
    CNNEncoderConfig,
    EncoderConfig,
    FCEncoderConfig,
    HeadConfig,
    InputConfig,
    ModelConfig,
    RNNEncoderConfig,
    TransformerEncoderConfig,
    build_encoder,
    build_inputs,
    build_model,
)
from attnlab.lab.models.encoder_config import ConvAttentionEncoderConfig
from attnlab.lab.models.encoders import (
    ENCODERS,
    EncodedSequence,
    SequenceEncoder,
    TransformerSequenceEncoder,
    valid_positions,
)
from attnlab.lab.models.ensemble import Ensemble
from attnlab.lab.models.heads import HeadOutput, SequenceHead, TokenHead
from attnlab.lab.models.inputs import INPUTS, EmbeddingInput, OneHotInput, word_dropout
from attnlab.lab.models.model import ModelOutput, SequenceModel
from attnlab.lab.models.pooling import POOLINGS, AttentionPool, FirstPool, MaxPool, MeanPool, Pooled
from attnlab.lab.models.seq2seq_types import Seq2Seq
from attnlab.lab.models.vocab import PAD, PAD_ID, UNK, UNK_ID, CharVocabulary, Vocabulary

__all__ = [
    "ENCODERS",
    "Ensemble",
    "INPUTS",
    "POOLINGS",
    "WORD_SHAPES",
    "PAD",
    "PAD_ID",
    "UNK",
    "UNK_ID",
    "AttentionPool",
    "CNNEncoder",
    "CNNEncoderConfig",
    "CharCNN",
    "CharVocabulary",
    "ConvAttentionEncoder",
    "ConvAttentionEncoderConfig",
    "EmbeddingInput",
    "EncodedSequence",
    "EncoderConfig",
    "FCEncoder",
    "FCEncoderConfig",
    "FirstPool",
    "HeadConfig",
    "HeadOutput",
    "InputConfig",
    "MaxPool",
    "MeanPool",
    "ModelConfig",
    "ModelOutput",
    "OneHotInput",
    "Pooled",
    "RNNEncoder",
    "RNNEncoderConfig",
    "Seq2Seq",
    "SequenceEncoder",
    "SequenceHead",
    "SequenceModel",
    "TokenHead",
    "TransformerEncoderConfig",
    "TransformerSequenceEncoder",
    "Vocabulary",
    "build_encoder",
    "build_inputs",
    "build_model",
    "encode_batch",
    "valid_positions",
    "word_dropout",
    "word_shape",
]
