"""attnlab: self-attention, complete and exact, and a lab to train and compare it."""

from . import functional, masks
from ._version import __version__ as __version__
from .attention import AttentionOutput, KVCache, MultiHeadAttention
from .attention_config import AttentionConfig
from .blocks.conv_attention import ConvAsAttention, conv_as_attention
from .efficient.linear import RecurrentCache
from .functional import attend
from .pair_bias import PairBias

__all__ = [
    "MultiHeadAttention",
    "AttentionOutput",
    "AttentionConfig",
    "KVCache",
    "PairBias",
    "RecurrentCache",
    "attend",
    "conv_as_attention",
    "ConvAsAttention",
    "functional",
    "masks",
]
