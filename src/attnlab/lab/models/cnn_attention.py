r"""The lecture's "use both": multi-width convolutions, then self-attention over their features.

Kim (2014) classifies a sentence from the max over time of ReLU convolutions of widths 3, 4, 5
(100 feature maps each) over its word vectors; the convolutions see n-grams, nothing beyond.
:class:`ConvAttentionEncoder` keeps that front end and lets Transformer blocks relate the
n-gram features across the whole sentence (Vaswani et al. 2017); with ``depth=0`` it *is*
Kim's CNN (pair it with ``max`` pooling, dropout 0.5 before the classifier).

.. math::
    c^{(w)}_t = \mathrm{ReLU}\big(W^{(w)} [x_{t - \lfloor (w-1)/2 \rfloor}; \dots;
        x_{t + \lfloor w/2 \rfloor}] + b^{(w)}\big), \qquad
    h^{(0)}_t = [c^{(w_1)}_t; \dots; c^{(w_k)}_t], \qquad
    h = \mathrm{Blocks}(h^{(0)}, \text{mask} = \text{padding})

Each window is centred (one more position on the right for an even width), with zeros beyond
the sequence, so every valid position has one feature vector of width ``len(widths) * maps``
(Kim's "valid" convolution would give ``n - w + 1`` positions per width, which cannot be
stacked for attention; the max over time sees the same n-grams plus the edge ones).

Legend: ``b`` batch, ``n`` positions, ``c`` feature channels (``len(widths) * maps``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab import masks
from attnlab.attention_config import AttentionConfig
from attnlab.blocks import TransformerEncoder, TrunkConfig
from attnlab.lab.models.encoders import ENCODERS, SequenceEncoder, valid_positions
from attnlab.positional import make_positional

__all__ = ["ConvAttentionEncoder"]


@ENCODERS.register("cnn-attention")
class ConvAttentionEncoder(SequenceEncoder):
    r"""Kim's multi-width CNN front end with Transformer blocks on top (see the module).

    Args:
        dim: input width (the word vectors; Kim: 300).
        widths: convolution widths, one bank of ``maps`` filters each (Kim: 3, 4, 5).
        maps: feature maps per width (Kim: 100).
        depth: Transformer blocks over the convolution features; 0 = Kim's CNN alone.
        heads: attention heads; must divide ``len(widths) * maps``.
        ff_hidden: feed-forward hidden width (None: 4 x the feature width).
        dropout: dropout in the blocks during training (and on the attention weights, unless
            ``attention_dropout`` is set).
        positional: positional encoding of the blocks (a name of
            :data:`~attnlab.positional.POSITIONAL`), or None: the convolutions already see
            word order within their windows.
        attention: the attention maths (default exact scaled-dot softmax).
        attention_dropout: dropout on the attention weights (None: ``dropout``).

    Shapes:
        - x: ``(b, n, dim)``; lengths: ``(b,)``
        - hidden: ``(b, n, len(widths) * maps)``; weights: ``depth`` x ``(b, heads, n, n)``
          (None when ``depth == 0``)
    """

    def __init__(
        self,
        dim: int,
        *,
        widths: Sequence[int] = (3, 4, 5),
        maps: int = 100,
        depth: int = 1,
        heads: int = 4,
        ff_hidden: int | None = None,
        dropout: float = 0.0,
        norm_first: bool = True,
        positional: str | None = None,
        attention: AttentionConfig | None = None,
        attention_dropout: float | None = None,
    ) -> None:
        super().__init__()
        widths = tuple(widths)
        if not widths or any(not isinstance(w, int) or w < 1 for w in widths):
            raise ValueError(f"widths must be a non-empty list of ints >= 1, got {widths!r}")
        if not isinstance(maps, int) or maps < 1:
            raise ValueError(f"maps must be an int >= 1, got {maps!r}")
        if not isinstance(depth, int) or depth < 0:
            raise ValueError(f"depth must be an int >= 0 (0: the CNN alone), got {depth!r}")
        channels = len(widths) * maps
        if depth and channels % heads:
            raise ValueError(
                f"heads={heads} must divide the feature width len(widths) * maps = {channels}; "
                "change heads or maps"
            )
        self.dim, self.out_dim, self.widths = dim, channels, widths
        self.convs = nn.ModuleList(nn.Conv1d(dim, maps, w) for w in widths)
        self.blocks: TransformerEncoder | None = None
        if depth:
            trunk = TrunkConfig(depth=depth, heads=heads, ff_hidden=ff_hidden, dropout=dropout,
                                attention_dropout=attention_dropout, norm_first=norm_first,
                                attention=attention or AttentionConfig())  # fmt: skip
            pos = make_positional(positional, dim=channels, heads=heads) if positional else None
            self.blocks = TransformerEncoder.from_config(channels, trunk, positional=pos)

    def features(self, x: Tensor, lengths: Tensor) -> Tensor:
        """The convolution features ``(b, n, c)``, zero at padded positions."""
        valid = valid_positions(lengths, x.shape[1]).unsqueeze(-1)  # (b, n, 1)
        xt = (x * valid).transpose(1, 2)  # (b, dim, n); zeros past the end, as in the padding
        # A centred window: (w - 1) // 2 positions on the left, w // 2 on the right, so the
        # output keeps n positions for every width.
        feats = [F.relu(conv(F.pad(xt, ((w - 1) // 2, w // 2)))) for w, conv in
                 zip(self.widths, self.convs)]  # fmt: skip
        return torch.cat(feats, dim=1).transpose(1, 2) * valid  # (b, n, c)

    def encode(
        self, x: Tensor, lengths: Tensor, *, need_weights: bool
    ) -> tuple[Tensor, list[Tensor] | None]:
        h = self.features(x, lengths)  # (b, n, c)
        if self.blocks is None:
            return h, None
        out = self.blocks(h, mask=masks.padding(lengths), need_weights=need_weights)
        return out.out, (list(out.weights) if need_weights else None)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, widths={self.widths}, out_dim={self.out_dim}"
