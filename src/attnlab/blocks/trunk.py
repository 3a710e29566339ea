"""``TrunkConfig``: the settings of a stack of Transformer blocks, the same in every model.

Every model of the lab that runs Transformer blocks (the sequence encoder of the text, speech
and long-range tasks, Kim's CNN under blocks, the image encoders, the molecule model, g2p's
encoder and decoder) takes its blocks' settings from one :class:`TrunkConfig`, embedded in its
own model config, and builds them with :meth:`~attnlab.blocks.TransformerEncoder.from_config`
(or :meth:`~attnlab.blocks.TransformerDecoder.from_config`). So one name means one thing
everywhere (``ff_hidden=None`` is ``4 x`` the width in every task), an attention setting given
on the command line (``--attention.kernel=linear``) reaches every model the same way, and one
validator checks it.

What differs between inputs stays with the input: where the positions come from (a sequence's
``positional`` encoding and ``window``, an image's 2-D grid, a molecule's bonds) is a field of
the task's own config, next to the trunk's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..attention_config import AttentionConfig

__all__ = ["TrunkConfig"]


@dataclass
class TrunkConfig:
    """A stack of Transformer blocks (:class:`~attnlab.blocks.TransformerBlock`).

    Args:
        depth: number of blocks.
        heads: attention heads; must divide the width.
        ff_hidden: the feed-forward network's hidden width (None: 4 x the width, as in
            Vaswani et al. 2017).
        dropout: dropout on the feed-forward hidden layer and each residual branch during
            training, and on the attention weights unless ``attention_dropout`` is set.
        attention_dropout: dropout on the attention weights (None: ``dropout``; efficient
            kernels form no weights, so with a kernel it is 0).
        norm_first: pre-norm (True; Xiong et al. 2020) or post-norm (False) blocks.
        attention: the attention maths of every block: score, normalisation, backend,
            efficient kernel (:class:`~attnlab.attention_config.AttentionConfig`).

    Raises:
        ValueError: at construction, naming the field, for a depth, head count, width or
            dropout out of range.
    """

    depth: int = 2
    heads: int = 4
    ff_hidden: int | None = None
    dropout: float = 0.1
    attention_dropout: float | None = None
    norm_first: bool = True
    attention: AttentionConfig = field(default_factory=AttentionConfig)

    #: the fewest blocks a model of this config accepts (0 where blocks are optional)
    min_depth: ClassVar[int] = 1
    #: the prefix of the config's fields in error messages (``model.encoder.heads``)
    where: ClassVar[str] = "model"

    def __post_init__(self) -> None:
        checks: list[tuple[str, Any, bool, str]] = [
            ("depth", self.depth, _int(self.depth) and self.depth >= self.min_depth,
             f"an int >= {self.min_depth}"),
            ("heads", self.heads, _int(self.heads) and self.heads >= 1, "an int >= 1"),
            ("ff_hidden", self.ff_hidden,
             self.ff_hidden is None or (_int(self.ff_hidden) and self.ff_hidden >= 1),
             "None (4 x the width) or an int >= 1"),
            ("dropout", self.dropout, 0.0 <= self.dropout < 1.0, "in [0, 1)"),
            ("attention_dropout", self.attention_dropout,
             self.attention_dropout is None or 0.0 <= self.attention_dropout < 1.0,
             "None (dropout) or in [0, 1)"),
        ]  # fmt: skip
        for name, value, ok, expected in checks:
            if not ok:
                raise ValueError(f"{self.where}.{name} must be {expected}, got {value!r}")
        if not isinstance(self.attention, AttentionConfig):
            raise ValueError(
                f"{self.where}.attention: expected an AttentionConfig, got "
                f"{type(self.attention).__name__}"
            )

    def check_width(self, dim: int) -> None:
        """Raise ``ValueError`` unless :attr:`heads` divides the width ``dim``."""
        if dim % self.heads:
            raise ValueError(
                f"{self.where}.heads={self.heads} must divide the width {dim}; change one of them"
            )

    def block_options(self) -> dict[str, Any]:
        """The :class:`~attnlab.blocks.TransformerEncoder` / ``TransformerDecoder`` keyword
        arguments of these settings (the width and the positions are the caller's)."""
        return {
            "ff_hidden": self.ff_hidden, "dropout": self.dropout, "norm_first": self.norm_first,
            "attention": self.attention, "attention_dropout": self.attention_dropout,
        }  # fmt: skip


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
