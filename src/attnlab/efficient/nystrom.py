"""Nyströmformer attention (Xiong et al. 2021): a Nyström approximation of the softmax matrix.

Legend: ``b`` batch, ``h`` heads, ``i`` query positions, ``j`` key positions, ``d`` head dim,
``e`` value head dim, ``m`` landmarks.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..numerics import masked_softmax
from .base import AttentionKernel, MaskParts

__all__ = ["NystromKernel", "segment_means", "iterative_pinv"]


def segment_means(x: Tensor, valid: Tensor | None, m: int) -> tuple[Tensor, Tensor]:
    """Landmarks: means of ``m`` consecutive segments of the *real* tokens of each sequence.

    The ``L`` real tokens of a sequence (``valid``) are split in order into segments
    ``[floor(s L / m), floor((s + 1) L / m))``; with ``m >= L`` each real token is its own
    segment and the surplus segments are empty.

    Args:
        x: ``(b, h, n, d)``.
        valid: ``(b, n)`` bool, True = real token; None = all real.
        m: number of landmarks.

    Returns:
        ``(landmarks (b, h, m, d), present (b, m))``; an empty segment's landmark is zero and
        ``present`` False.
    """
    b, h, n, d = x.shape
    if valid is None and n % m == 0:
        # Every token real and n = m c: the segments are the m consecutive blocks of c tokens,
        # a reshape and a mean (O(n d)) instead of the (m, n) averaging matrix (O(m n d)).
        present = torch.ones(b, m, dtype=torch.bool, device=x.device)
        return x.view(b, h, m, n // m, d).mean(3), present  # (b, h, m, d)
    if valid is None:
        valid = torch.ones(b, n, dtype=torch.bool, device=x.device)
    rank = valid.long().cumsum(-1) - 1  # (b, n) rank among real tokens
    count = valid.sum(-1, keepdim=True)  # (b, 1)
    seg = torch.div(rank * m, count.clamp_min(1), rounding_mode="floor")  # (b, n)
    segments = torch.arange(m, device=x.device).view(1, m, 1)
    onehot = (seg.unsqueeze(1) == segments) & valid.unsqueeze(1)  # (b, m, n)
    sizes = onehot.sum(-1)  # (b, m)
    weights = onehot.to(x.dtype) / sizes.clamp_min(1).unsqueeze(-1).to(x.dtype)  # (b, m, n)
    return torch.einsum("bmn,bhnd->bhmd", weights, x), sizes > 0


def iterative_pinv(a: Tensor, iterations: int) -> Tensor:
    r"""Moore-Penrose pseudo-inverse by the iteration of Razavi et al. 2014 (Xiong et al. 2021,
    Eq. 15): :math:`Z_0 = A^\top / (\lVert A\rVert_1 \lVert A\rVert_\infty)`,
    :math:`Z_{t+1} = \tfrac14 Z_t (13 I - A Z_t (15 I - A Z_t (7 I - A Z_t)))`.

    The scaling makes :math:`\lVert I - A Z_0\rVert < 1`, from which the iteration converges to
    :math:`A^+` (per matrix of the batch; the paper's code uses one batch-wide scale).
    """
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    norm1 = a.abs().sum(-2).amax(-1, keepdim=True).unsqueeze(-1)  # max column sum
    norm_inf = a.abs().sum(-1).amax(-1, keepdim=True).unsqueeze(-1)  # max row sum
    z = a.transpose(-2, -1) / (norm1 * norm_inf)
    for _ in range(iterations):
        az = a @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z


class NystromKernel(AttentionKernel):
    r"""Nyströmformer attention (Xiong et al. 2021, "Nyströmformer: A Nyström-Based Algorithm
    for Approximating Self-Attention", Eq. 14):

    .. math::
        \hat S = F A^{+} B, \qquad o = \hat S V, \qquad
        F = \mathrm{softmax}\Big(\frac{Q \tilde K^\top}{\sqrt d}\Big),\;
        A = \mathrm{softmax}\Big(\frac{\tilde Q \tilde K^\top}{\sqrt d}\Big),\;
        B = \mathrm{softmax}\Big(\frac{\tilde Q K^\top}{\sqrt d}\Big),

    (``F`` is ``n x m``, ``A`` is ``m x m``, ``B`` is ``m x n``)
    with landmarks :math:`\tilde Q, \tilde K` the means of ``m`` segments of the queries and keys
    (Sec. 3.3) and :math:`A^+` from :func:`iterative_pinv` (``pinv="iterative"``, the paper's
    choice) or ``torch.linalg.pinv`` (``pinv="exact"``). With one token per landmark
    (``landmarks >= n``), :math:`F = A = B = S` and :math:`S S^+ S = S`: the approximation is
    then exact up to the pseudo-inverse's error. With fewer landmarks, ``A`` is often badly
    conditioned (flat attention: cond ~1e5 already at ``n = 64``) and an exact ``A^+`` amplifies
    the approximation error; the paper's few iterations act as a regulariser (random inputs,
    ``n = 1024``, ``m = 64``: relative error 0.77 with 6 iterations, 3.5 with 20).

    Padding: landmarks average real tokens only (the real tokens are cut into ``m`` segments),
    padded keys are masked out of :math:`B`, and empty landmarks are masked out of :math:`F` and
    given an identity block in :math:`A`, so the result does not depend on padded inputs. For a
    square problem (self-attention) query landmarks skip the padded positions too. Landmarks
    summarise the whole sequence, so causal and other structured masks raise.

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        landmarks: number of landmarks ``m`` (default 64).
        pinv_iterations: iterations of :func:`iterative_pinv` (default 6, as the paper).
        pinv: ``"iterative"`` (default) or ``"exact"`` (SVD-based ``torch.linalg.pinv``).
        conv_kernel: odd length of the optional depthwise convolution over the values added to
            the output (the paper's skip connection, kernel 33); default None (off).

    Complexity: time ``O(n m d + m^3)``, memory ``O(n m)``.
    """

    name = "nystrom"
    causal_reason = "every landmark averages queries and keys from the whole sequence"

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        landmarks: int = 64,
        pinv_iterations: int = 6,
        pinv: str = "iterative",
        conv_kernel: int | None = None,
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if not isinstance(landmarks, int) or landmarks <= 0:
            raise ValueError(f"landmarks must be a positive int, got {landmarks!r}")
        if pinv not in ("iterative", "exact"):
            raise ValueError(f"pinv must be 'iterative' or 'exact', got {pinv!r}")
        if not isinstance(pinv_iterations, int) or pinv_iterations < 0:
            raise ValueError(f"pinv_iterations must be an int >= 0, got {pinv_iterations!r}")
        if conv_kernel is not None and (conv_kernel <= 0 or conv_kernel % 2 == 0):
            raise ValueError(f"conv_kernel must be a positive odd int or None, got {conv_kernel!r}")
        self.landmarks, self.pinv_iterations, self.pinv = landmarks, pinv_iterations, pinv
        self.conv = None
        if conv_kernel is not None:
            self.conv = nn.Conv2d(
                heads, heads, (conv_kernel, 1), padding=(conv_kernel // 2, 0), groups=heads,
                bias=False,
            )  # fmt: skip

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        i, j = q.shape[2], k.shape[2]
        m = self.landmarks
        dtype = torch.promote_types(q.dtype, torch.float32)
        q, k = q.to(dtype) / math.sqrt(q.shape[-1]), k.to(dtype)
        # Padded keys and values are already zero (AttentionKernel.attention).
        key_valid = None if parts.key_valid is None else parts.key_valid[:, 0, 0]  # (b, j)
        query_valid = key_valid if (i == j and q_offset == 0) else None
        if query_valid is not None:
            q = q.masked_fill(~query_valid[:, None, :, None], 0.0)
        q_l, q_present = segment_means(q, query_valid, m)  # (b, h, m, d)
        k_l, k_present = segment_means(k, key_valid, m)  # (b, h, m, d)
        kp = k_present[:, None, None, :]  # (b, 1, 1, m)
        # With no padding and at least m tokens no landmark is empty: plain softmaxes.
        k_all, q_all = key_valid is None and j >= m, query_valid is None and i >= m
        f = masked_softmax(q @ k_l.transpose(-2, -1), None if k_all else kp)  # (b, h, i, m)
        a = masked_softmax(q_l @ k_l.transpose(-2, -1), None if k_all else kp)  # (b, h, m, m)
        if not q_all:
            # Rows of empty query landmarks: e_r where key landmark r is empty too, else 0. With
            # the same landmarks empty on both sides, A = diag(A_real, I) and
            # A+ = diag(A_real+, I), so empty landmarks drop out of F A+ B exactly.
            eye = torch.eye(m, dtype=a.dtype, device=a.device)
            a = torch.where(q_present[:, None, :, None], a, eye * ~kp)
        kv_valid = None if key_valid is None else key_valid[:, None, None, :]
        bmat = masked_softmax(q_l @ k.transpose(-2, -1), kv_valid)  # (b, h, m, j)
        if self.pinv == "iterative":
            a_pinv = iterative_pinv(a, self.pinv_iterations)  # (b, h, m, m)
        else:
            a_pinv = torch.linalg.pinv(a)
        vv = v.to(dtype)
        out = f @ (a_pinv @ (bmat @ vv))  # (b, h, i, e), cheapest order: m x e in the middle
        if self.conv is not None:
            if i != j:
                raise ValueError("nystrom: the conv skip needs as many queries as keys")
            out = out + self.conv(vv.to(self.conv.weight.dtype)).to(out.dtype)
        return out.to(v.dtype)

    def extra_repr(self) -> str:
        conv = None if self.conv is None else self.conv.kernel_size[0]
        return (
            f"landmarks={self.landmarks}, pinv={self.pinv!r}, "
            f"pinv_iterations={self.pinv_iterations}, conv_kernel={conv}"
        )
