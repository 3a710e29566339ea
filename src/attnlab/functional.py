r"""The maths of attention on already projected queries, keys and values.

For queries :math:`q_i`, keys :math:`k_j` and values :math:`v_j` of one head,

.. math::
    \alpha_{ij} = \mathrm{score}(q_i, k_j) + \mathrm{bias}_{ij}, \qquad
    a_{ij} = \mathrm{normalize}_j(\alpha_{ij}), \qquad
    o_i = \sum_j a_{ij} v_j ,

with :math:`a_{ij} = 0` wherever the mask forbids ``i`` to attend to ``j``. :func:`attend`
computes this for all pairs at once with matrix products: it is the readable reference path that
every fast backend is tested against.

Scores and normalisations live in registries (:data:`SCORES`, :data:`NORMALIZATIONS`); a new
one is a few lines (see :class:`DotScore` and :class:`ReLUNorm`) and satisfies the
:class:`Score` or :class:`Normalization` protocol that the backends rely on.

:func:`masked_softmax` and :func:`safe_max` (defined in :mod:`attnlab.numerics`, re-exported
here) are the package's one masked softmax and one "max that is 0 where nothing is allowed";
the backends and every efficient kernel use them.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim, ``a`` hidden size of the additive score.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .additive_blocks import additive_scores
from .dropout import dropout as drop
from .masks import Mask, check_mask, check_pair_shape, live_keys
from .numerics import at_least_float32, masked_softmax, safe_max, zero_dead_keys
from .pair_bias import PairBias
from .registry import Registry

__all__ = [
    "Score",
    "Normalization",
    "SCORES",
    "NORMALIZATIONS",
    "DotScore",
    "ScaledDotScore",
    "AdditiveScore",
    "SoftmaxNorm",
    "ReLUNorm",
    "SigmoidNorm",
    "IdentityNorm",
    "AttendOutput",
    "attend",
    "make_score",
    "get_score",
    "get_normalize",
    "key_counts",
    "at_least_float32",
    "masked_softmax",
    "safe_max",
    "zero_dead_keys",
    "check_bias",
]


@runtime_checkable
class Score(Protocol):
    """What the backends need of a relevance score: ``(q (b,h,i,d), k (b,h,j,d)) -> (b,h,i,j)``.

    Attributes:
        name: its registered name.
        pair_cost: score elements materialised per (query, key) pair and head (1 for dot
            products; the additive score's hidden size), used to size the chunked backend's
            blocks.
    """

    name: str
    pair_cost: int

    def fused_scale(self, head_dim: int) -> float | None:
        """The ``scale`` under which fused dot-product kernels (SDPA, flex) compute this score,
        or None if it is no scaled dot product."""
        ...

    def __call__(self, q: Tensor, k: Tensor) -> Tensor: ...


@runtime_checkable
class Normalization(Protocol):
    """What the backends need of a normalisation: scores ``(b,h,i,j)`` to weights.

    Attributes:
        name: its registered name.
        elementwise: True when :math:`a_{ij} = f(\\alpha_{ij}, n_i)` with ``n_i`` the number of
            allowed keys (:meth:`weights`), so key blocks normalise independently; False for
            softmax, which the chunked backend computes online.
    """

    name: str
    elementwise: bool

    def __call__(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        """Weights, zero where ``mask`` (True = may attend) forbids, float32 or wider."""
        ...

    def weights(self, scores: Tensor, counts: Tensor) -> Tensor:
        """Elementwise normalisations only: weights from scores and ``counts`` ``(..., i, 1)``
        of allowed keys, before masking."""
        ...


SCORES: Registry = Registry("score")
NORMALIZATIONS: Registry = Registry("normalization")


# ---- scores: (q (b,h,i,d), k (b,h,j,d)) -> (b,h,i,j) ----------------------------------------
@SCORES.register("dot")
class DotScore:
    """Dot-product relevance :math:`\\alpha_{ij} = q_i \\cdot k_j` (Luong et al. 2015)."""

    name = "dot"
    pair_cost = 1

    def fused_scale(self, head_dim: int) -> float | None:
        """The ``scale`` under which fused dot-product kernels compute this score (or None)."""
        return 1.0

    def __call__(self, q: Tensor, k: Tensor) -> Tensor:
        scale = self.fused_scale(q.shape[-1])
        s = q @ k.transpose(-2, -1)  # (b, h, i, j)
        return s if scale == 1.0 else s * scale

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


@SCORES.register("scaled_dot")
class ScaledDotScore(DotScore):
    """Scaled dot product :math:`q_i \\cdot k_j / \\sqrt{d}` (Vaswani et al. 2017).

    The :math:`1/\\sqrt{d}` keeps the logits' variance near 1 for unit-variance q and k, so the
    softmax does not saturate as the head dimension grows.
    """

    name = "scaled_dot"

    def fused_scale(self, head_dim: int) -> float | None:
        return 1.0 / math.sqrt(head_dim)


@SCORES.register("additive")
class AdditiveScore(nn.Module):
    """Additive (Bahdanau et al. 2015) relevance :math:`w^\\top \\tanh(W_q q_i + W_k k_j)`.

    One set of parameters per head. Its reference cost is ``O(i * j * a)`` memory; the chunked
    backend computes it in tiles.

    Args:
        head_dim: size ``d`` of each head's queries and keys.
        heads: number of heads ``h``.
        hidden: size ``a`` of the tanh layer (default ``head_dim``).
    """

    name = "additive"

    def __init__(self, *, head_dim: int, heads: int, hidden: int | None = None) -> None:
        super().__init__()
        hidden = hidden or head_dim
        bound = 1.0 / math.sqrt(head_dim)
        self.w_q = nn.Parameter(torch.empty(heads, head_dim, hidden).uniform_(-bound, bound))
        self.w_k = nn.Parameter(torch.empty(heads, head_dim, hidden).uniform_(-bound, bound))
        self.w = nn.Parameter(
            torch.empty(heads, hidden).uniform_(-1 / hidden**0.5, 1 / hidden**0.5)
        )
        #: score elements materialised per (query, key) pair and head (chunked backend sizing)
        self.pair_cost: int = hidden

    def fused_scale(self, head_dim: int) -> float | None:
        return None

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        qa = torch.einsum("bhid,hda->bhia", q, self.w_q.to(q.dtype))
        ka = torch.einsum("bhjd,hda->bhja", k, self.w_k.to(k.dtype))
        if q.device.type == "cpu" and not torch.compiler.is_compiling():
            # the same sum, a block of queries at a time, in cache (attnlab.additive_blocks)
            return additive_scores(qa, ka, self.w)
        hidden = torch.tanh(qa.unsqueeze(3) + ka.unsqueeze(2))  # (b, h, i, j, a)
        return torch.einsum("bhija,ha->bhij", hidden, self.w.to(hidden.dtype))


def make_score(name: str, *, head_dim: int, heads: int) -> Score:
    """Build the score ``name``; parametric scores get their own parameters."""
    cls = SCORES.get(name)
    if isinstance(cls, type) and issubclass(cls, nn.Module):
        return cls(head_dim=head_dim, heads=heads)
    return cls()


def get_score(score):
    """Resolve ``score`` (a name, a :class:`Score` or any callable ``(q, k) -> scores``)."""
    if not isinstance(score, str):
        return score
    cls = SCORES.get(score)
    if isinstance(cls, type) and issubclass(cls, nn.Module):
        raise ValueError(
            f"score {score!r} has parameters; build it with make_score({score!r}, head_dim=..., "
            "heads=...) (MultiHeadAttention owns it) and pass the module as score="
        )
    return cls()


# ---- normalisations: scores (b,h,i,j) -> weights (b,h,i,j) ----------------------------------
def key_counts(mask: Tensor | None, kv_len: int, like: Tensor) -> Tensor:
    """Number of keys each query may attend to, shaped ``(..., i, 1)``, in ``like``'s dtype."""
    if mask is None:
        return torch.full((1, 1, 1, 1), float(kv_len), dtype=like.dtype, device=like.device)
    return mask.sum(-1, keepdim=True).to(like.dtype)


@NORMALIZATIONS.register("softmax")
class SoftmaxNorm:
    """:math:`a_{ij} = e^{\\alpha_{ij}} / \\sum_{j'} e^{\\alpha_{ij'}}` over allowed keys
    (:func:`masked_softmax`).

    Computed in float32 even under bf16 autocast (the exponent of a bf16 logit loses most of its
    precision). A query with no allowed key gets all-zero weights, not NaN.
    """

    name = "softmax"
    elementwise = False

    def __call__(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        return masked_softmax(scores, mask)

    def weights(self, scores: Tensor, counts: Tensor) -> Tensor:
        raise TypeError("softmax is not elementwise: its weights depend on the whole row")


class _Elementwise:
    """Normalisations of the form :math:`a_{ij} = f(\\alpha_{ij}, n_i)`, ``n_i`` = allowed keys.

    Each weight depends on its own score and the row's count only: a row need not sum to one,
    and weights are computed in float32 or wider, zero where masked.
    """

    elementwise = True

    def weights(self, scores: Tensor, counts: Tensor) -> Tensor:
        raise NotImplementedError

    def __call__(self, scores: Tensor, mask: Tensor | None) -> Tensor:
        s = at_least_float32(scores)
        w = self.weights(s, key_counts(mask, s.shape[-1], s))
        return w if mask is None else w.masked_fill(~mask, 0.0)


@NORMALIZATIONS.register("relu")
class ReLUNorm(_Elementwise):
    """:math:`a_{ij} = \\mathrm{relu}(\\alpha_{ij}) / n_i` (Wortsman et al. 2023).

    Dividing by the number of attended keys ``n_i`` keeps :math:`\\sum_j a_{ij}` of order one, as
    softmax's weights are, whatever the sequence length; without it, outputs grow with ``n``.
    Each row sums to the mean, over its allowed keys, of the scores' positive parts; a row
    whose allowed scores are all negative attends to nothing (zero output).
    """

    name = "relu"

    def weights(self, scores: Tensor, counts: Tensor) -> Tensor:
        return F.relu(scores) / counts.clamp_min(1.0)


@NORMALIZATIONS.register("sigmoid")
class SigmoidNorm(_Elementwise):
    """:math:`a_{ij} = \\sigma(\\alpha_{ij} - \\log n_i)` (Ramapuram et al. 2024).

    The ``-log n`` bias makes the initial weights sum to about one, like softmax's, so training
    starts stable at any length; rows are not forced to sum to one. Allowed weights lie in
    ``(0, 1)``, increase with the score, and a row of equal scores ``s`` sums to
    :math:`n\\sigma(s - \\log n)`, one at ``s = 0`` for large ``n``.
    """

    name = "sigmoid"

    def weights(self, scores: Tensor, counts: Tensor) -> Tensor:
        return torch.sigmoid(scores - torch.log(counts.clamp_min(1.0)))


@NORMALIZATIONS.register("none")
class IdentityNorm(_Elementwise):
    """:math:`a_{ij} = \\alpha_{ij}`: raw scores as weights (masked ones are zero).

    Unnormalised: the output scale grows with the number of keys. Useful for study, not for
    training deep stacks.
    """

    name = "none"

    def weights(self, scores: Tensor, counts: Tensor) -> Tensor:
        return scores


def get_normalize(normalize):
    """Resolve ``normalize`` (a name or an object) for :func:`attend`."""
    return NORMALIZATIONS.get(normalize)() if isinstance(normalize, str) else normalize


# ---- the reference path ---------------------------------------------------------------------
class AttendOutput(NamedTuple):
    out: Tensor  # (b, h, i, e)
    weights: Tensor  # (b, h, i, j)


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    score="scaled_dot",
    normalize="softmax",
    mask: Tensor | Mask | None = None,
    bias: Tensor | None = None,
    dropout: float = 0.0,
    training: bool = False,
    q_offset: int = 0,
) -> AttendOutput:
    """Attention over all pairs at once, the readable reference path.

    Equivalent to::

        s = score(q, k) + bias                      # (b, h, i, j)
        a = normalize(s) with a[~mask] = 0          # rows with no allowed key are all zero
        a = dropout(a)
        out = a @ v                                 # (b, h, i, e)

    Args:
        q: queries ``(b, h, i, d)``.
        k: keys ``(b, h, j, d)``.
        v: values ``(b, h, j, e)``.
        score: a name from :data:`SCORES` or a callable ``(q, k) -> (b, h, i, j)``.
        normalize: a name from :data:`NORMALIZATIONS` or a normalisation object.
        mask: boolean, broadcastable to ``(b, h, i, j)``, True = may attend; or a
            :class:`~attnlab.masks.Mask`. Keys no query may attend to (padding) have their
            keys and values zeroed first (:func:`zero_dead_keys`).
        bias: float tensor ``(i, j)`` or ``(b, h, i, j)`` (sizes of 1 broadcast) added to the
            scores, e.g. relative-position biases or Hugging Face's additive masks, or a
            :class:`~attnlab.pair_bias.PairBias` (nonzero at a few pairs); finite
            values (a row that is ``-inf`` everywhere gives NaN, as in torch: forbid pairs with
            ``mask`` instead).
        dropout: dropout probability on the weights (only when ``training``).
        training: apply dropout.
        q_offset: position of the first query (for masks, under incremental decoding).

    Returns:
        ``AttendOutput(out, weights)`` with weights after normalisation, before dropout, in
        ``q``'s dtype (float32 under autocast).
    """
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(
            "attend expects q, k, v of shape (b, h, n, d); got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    b, h, i, _ = q.shape
    j = k.shape[2]
    check_mask(mask, b, h, i, j, q_offset=q_offset)
    if bias is not None:
        check_bias(bias, b, h, i, j)
    k, v = zero_dead_keys(k, v, live_keys(mask, b, j))  # 0 * NaN = NaN: see zero_dead_keys
    if isinstance(mask, Mask):
        mask = mask.dense(b, h, i, j, q_offset=q_offset, device=q.device)
    s = get_score(score)(q, k)  # (b, h, i, j)
    if bias is not None:
        s = s + (bias.dense() if isinstance(bias, PairBias) else bias)
    w = get_normalize(normalize)(s, mask)  # float32, (b, h, i, j)
    a = drop(w, dropout, training)
    out = a.to(v.dtype) @ v  # (b, h, i, e)
    # Under autocast the weights stay in float32, as autocast's own softmax returns them;
    # cast to bf16 their rows would no longer sum to one (bf16 has 8 bits of mantissa).
    return AttendOutput(out, w if torch.is_autocast_enabled(q.device.type) else w.to(q.dtype))


def check_bias(bias: Tensor, batch: int, heads: int | None, q_len: int, kv_len: int) -> None:
    """Validate an additive score bias: a float tensor of shape ``(i, j)`` or ``(b, h, i, j)``
    (sizes of 1 broadcast; the same shapes as a mask, the ambiguous ``(b, j)`` refused), or a
    :class:`~attnlab.pair_bias.PairBias` of ``(i, j)`` scores and 1 or ``heads`` heads."""
    if isinstance(bias, PairBias):
        bias.check(q_len, kv_len, heads)
        return
    if not isinstance(bias, Tensor) or not bias.is_floating_point():
        got = bias.dtype if isinstance(bias, Tensor) else type(bias).__name__
        raise ValueError(
            f"bias must be a float tensor added to the scores, broadcastable to (b, h, i, j); "
            f"got {got}. To forbid pairs pass a boolean mask= (True = may attend)"
        )
    check_pair_shape(bias, "bias", batch, heads, q_len, kv_len)
