"""Transformer building blocks around :class:`~attnlab.attention.MultiHeadAttention`.

* :class:`FeedForward`: the position-wise network (plain or gated, e.g. SwiGLU).
* :class:`TransformerBlock`: self-attention (+ cross-attention) + feed-forward, pre-/post-norm.
* :class:`TransformerEncoder`: a stack of blocks with a positional encoding.
* :class:`TransformerDecoder`: causal blocks with cross-attention and a KV cache.
"""

from .block import BlockCache, BlockOutput, TransformerBlock
from .decoder import DecoderCache, DecoderOutput, TransformerDecoder
from .encoder import EncoderOutput, TransformerEncoder
from .feedforward import FeedForward

__all__ = [
    "FeedForward",
    "TransformerBlock",
    "BlockOutput",
    "BlockCache",
    "TransformerEncoder",
    "EncoderOutput",
    "TransformerDecoder",
    "DecoderOutput",
    "DecoderCache",
]
