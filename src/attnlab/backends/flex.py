"""The ``flex`` backend: FlexAttention under ``torch.compile``, block-sparse for structured
masks (it skips fully masked blocks). Forward only on CPU (PyTorch has no CPU backward for it).

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..functional import Normalization, Score
from ..masks.block_cache import Build
from .base import BACKENDS, Backend, Problem
from .sdpa import SDPABackend

__all__ = ["FlexBackend"]


_compiled_flex = None

#: compiled variants of ``flex_attention`` one process may make (one per mask kind and its
#: parameters, score scale, shape and strides; each costs seconds of C++ compilation on CPU).
#: Past dynamo's default limit (8) it would silently run ``flex_attention`` uncompiled: dense
#: ``(b, h, i, j)`` scores, no block sparsity, far slower. Here that is an error instead
#: (:class:`FlexRecompileLimit`), which ``auto`` answers by running ``sdpa``.
RECOMPILE_LIMIT = 64


class FlexRecompileLimit(ValueError):
    """``flex`` would have run uncompiled: :data:`RECOMPILE_LIMIT` variants were compiled."""


def _flex_attention():
    """``flex_attention`` compiled once per process (FlexAttention runs on CPU only compiled)."""
    global _compiled_flex
    if _compiled_flex is None:
        from torch.nn.attention.flex_attention import flex_attention

        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    return _compiled_flex


def _run_compiled(*args, **kwargs) -> Tensor:
    """The compiled ``flex_attention``, refusing to fall back to its uncompiled self."""
    if torch.compiler.is_compiling():  # traced into an outer compiled model: its rules apply
        return _flex_attention()(*args, **kwargs)
    from torch._dynamo.exc import FailOnRecompileLimitHit

    try:
        with torch._dynamo.config.patch(recompile_limit=RECOMPILE_LIMIT,
                                        fail_on_recompile_limit_hit=True):  # fmt: skip
            return _flex_attention()(*args, **kwargs)
    except FailOnRecompileLimitHit:
        raise FlexRecompileLimit(
            f"backend 'flex' has compiled {RECOMPILE_LIMIT} variants in this process (one per "
            "mask kind, score scale, shape and strides), and would now run uncompiled on dense "
            "scores; use backend='sdpa' (the same result with a dense mask), or pad inputs to "
            "a few lengths"
        ) from None


#: dtypes PyTorch's CPU FlexAttention kernel accepts (float64 fails inside inductor)
_FLEX_CPU_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@BACKENDS.register("flex")
class FlexBackend(Backend):
    name = "flex"
    block_size = 128

    def refuses(self, score: Score, normalize: Normalization) -> str | None:
        return SDPABackend().refuses(score, normalize)

    def unsupported(self, p: Problem) -> str | None:
        reason = SDPABackend().unsupported(p)
        if reason:
            return reason
        if p.dropout > 0:
            return "FlexAttention has no attention dropout"
        if p.bias is not None:
            return "score bias tensors are not routed to flex; use backend='sdpa'"
        if p.q_offset:
            return "incremental decoding (q_offset > 0) is not supported"
        if p.q.device.type == "cpu" and p.needs_grad:
            return "PyTorch's FlexAttention has no backward pass on CPU (use torch.no_grad())"
        if p.q.shape[-1] != p.v.shape[-1]:
            return "value head dim differs from query head dim"
        if p.q.device.type == "cpu" and p.q.dtype not in _FLEX_CPU_DTYPES:
            return f"FlexAttention on CPU supports float32, float16 and bfloat16, not {p.q.dtype}"
        return None

    def block_mask(self, p: Problem, *, build: Build = "always"):
        """The block mask of ``p``'s mask (None without a mask), cached by the mask's value;
        ``build`` as in :meth:`attnlab.masks.Mask.block_mask` (None when not built)."""
        mask = p.mask_object()
        if mask is None:
            return None
        b, h, i, j = p.shape
        return mask.block_mask(
            b, h, i, j, device=p.q.device, block_size=self.block_size, build=build
        )

    def __call__(self, p: Problem) -> tuple[Tensor, Tensor | None]:
        # FlexAttention already returns zeros for queries with no allowed key (its row sum is
        # zero), so no dense O(i * j) clean-up is needed here; tests/test_backends.py checks it.
        scale = p.score.fused_scale(p.q.shape[-1])
        out = _run_compiled(p.q, p.k, p.v, block_mask=self.block_mask(p), scale=scale)
        return out, None
