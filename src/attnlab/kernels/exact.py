"""The exact attention maths as a kernel: the default kernel of every layer.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim.
"""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor, nn

from ..backends import BACKENDS, Problem, check_backend_name, run_backend
from ..functional import Normalization, Score, check_bias, get_normalize, make_score
from ..masks import Mask, check_mask, live_keys
from ..numerics import zero_dead_keys
from .base import AttentionKernel, KernelOutput, MaskParts

__all__ = ["ExactKernel"]


class ExactKernel(AttentionKernel):
    r"""Exact attention, :func:`attnlab.functional.attend`'s maths, on the fastest backend
    that computes the request:

    .. math::
        o_i = \sum_j \mathrm{normalize}_j\big(\mathrm{score}(q_i, k_j) + \mathrm{bias}_{ij}
        \;\big|\; M_{ij}\big)\, v_j .

    ``backend="auto"`` chooses per call among the exact backends of :mod:`attnlab.backends`
    (fused SDPA, block-sparse flex, the memory-bounded chunked backend, the reference path
    that returns the weights); a named backend always runs, or says why it cannot. Every mask
    applies, a score bias is added, and the weights come back when asked for. Keys and values
    that no query may attend to (padding) are zeroed first, so that a NaN there cannot reach a
    real output through ``0 * NaN``.

    Args:
        dim: model width.
        heads: number of heads (head dim ``d = dim // heads``).
        score: a name from :data:`~attnlab.functional.SCORES` or a
            :class:`~attnlab.functional.Score`. A score *module* given here (the additive
            score) belongs to the caller, who registers its parameters:
            :class:`~attnlab.MultiHeadAttention` keeps them as ``score.*``; one built here from
            its name is registered here.
        normalize: a name from :data:`~attnlab.functional.NORMALIZATIONS` or a
            :class:`~attnlab.functional.Normalization`.
        backend: ``"auto"`` (default) or a registered backend's name.
        dropout: dropout on the attention weights in training mode.

    Raises:
        ValueError: at construction, for an unknown name or a backend that never computes this
            score with this normalisation (e.g. ``sdpa`` with the additive score).
    """

    name = "exact"
    supports_causal: ClassVar[bool] = True
    supports_structured: ClassVar[bool] = True
    bias_reason: ClassVar[str | None] = None
    weights_reason: ClassVar[str | None] = None
    handles_padding: ClassVar[bool] = True  # its backends zero padding and key-less queries

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        score: str | Score = "scaled_dot",
        normalize: str | Normalization = "softmax",
        backend: str = "auto",
        dropout: float = 0.0,
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if isinstance(score, str):
            self.score = make_score(score, head_dim=self.head_dim, heads=heads)
        elif isinstance(score, nn.Module):
            # Not registered a second time: the state-dict key stays the caller's (score.*).
            self.__dict__["score"] = score
        else:
            self.score = score
        self.normalize = get_normalize(normalize)
        self.backend, self.dropout = check_backend_name(backend), dropout
        if backend == "auto":
            return  # auto picks, per call, a backend that computes the request
        reason = BACKENDS.get(backend)().refuses(self.score, self.normalize)
        if reason is not None:
            raise ValueError(
                f"backend {backend!r} {reason}. Use backend='chunked' (any score and "
                "normalization, memory O(n)) or 'reference' (returns the weights), or 'auto'."
            )

    def mask_parts(
        self, mask: Tensor | Mask | None, q: Tensor, k: Tensor, q_offset: int
    ) -> MaskParts:
        """The whole mask, checked and unsplit: every backend applies any mask (splitting it
        would compare a dense one with itself on every call)."""
        b, h, i, _ = q.shape
        check_mask(mask, b, h, i, k.shape[2], q_offset=q_offset)
        return MaskParts(None, False, None, mask)

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        parts: MaskParts,
        *,
        q_offset: int = 0,
        bias: Tensor | None = None,
        need_weights: bool = False,
    ) -> KernelOutput:
        b, h, i, _ = q.shape
        j = k.shape[2]
        mask = parts.mask
        if bias is not None:
            check_bias(bias, b, h, i, j)
        k, v = zero_dead_keys(k, v, live_keys(mask, b, j))
        p = Problem(
            q, k, v, self.score, self.normalize, mask=mask, bias=bias,
            dropout=self.dropout if self.training else 0.0, need_weights=need_weights,
            q_offset=q_offset,
        )  # fmt: skip
        return KernelOutput(*run_backend(self.backend, p))

    def extra_repr(self) -> str:
        return (
            f"score={self.score.name}, normalize={self.normalize.name}, "
            f"backend={self.backend}, dropout={self.dropout}"
        )
