"""Transformer building blocks around :class:`~attnlab.attention.MultiHeadAttention`.

* :class:`FeedForward`: the position-wise network (plain or gated, e.g. SwiGLU).
* :class:`TransformerBlock`: self-attention (+ cross-attention) + feed-forward, pre-/post-norm.
* :class:`TransformerEncoder`: a stack of blocks with a positional encoding.
* :class:`TransformerDecoder`: causal blocks with cross-attention and a KV cache.
* :class:`TrunkConfig`: the settings of a stack of blocks, which every model of the lab embeds
  (``TransformerEncoder.from_config``, ``TransformerDecoder.from_config``).
"""

from .block import BlockCache, BlockOutput, TransformerBlock
from .decoder import DecoderCache, DecoderOutput, TransformerDecoder
from .encoder import EncoderOutput, TransformerEncoder
from .feedforward import FeedForward
from .trunk import TrunkConfig

__all__ = [
    "FeedForward",
    "TrunkConfig",
    "TransformerBlock",
    "BlockOutput",
    "BlockCache",
    "TransformerEncoder",
    "EncoderOutput",
    "TransformerDecoder",
    "DecoderOutput",
    "DecoderCache",
]
