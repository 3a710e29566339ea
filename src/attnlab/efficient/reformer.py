"""Reformer attention (Kitaev et al. 2020): shared-QK attention within LSH buckets.

Legend: ``b`` batch, ``h`` heads, ``n`` positions (queries = keys), ``d`` head dim, ``e`` value
head dim, ``R`` hash rounds, ``u`` buckets, ``r`` chunks, ``c`` chunk length.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from .base import AttentionKernel, MaskParts, key_valid_rows, masked_softmax

__all__ = ["ReformerKernel", "shared_qk_attention", "SELF_SCORE"]

#: score of a token for itself: it attends to itself only when nothing else is allowed (Sec. 2)
SELF_SCORE = -5e4


def shared_qk_attention(
    q: Tensor, v: Tensor, *, key_valid: Tensor | None = None, causal: bool = False
) -> Tensor:
    """Full (exact) shared-QK attention, the reference for :class:`ReformerKernel`.

    Keys are the unit-normalised queries; a token's score for itself is :data:`SELF_SCORE`, so
    it attends to itself only when no other key is allowed.

    Args:
        q: ``(b, h, n, d)``; v: ``(b, h, n, e)``.
        key_valid: ``(b, 1, 1, n)`` True = real key, or None.
        causal: query ``i`` sees keys ``j <= i`` only.
    """
    n, d = q.shape[2], q.shape[3]
    qf = q.to(torch.promote_types(q.dtype, torch.float32))
    s = qf @ F.normalize(qf, dim=-1).transpose(-2, -1) / math.sqrt(d)  # (b, h, n, n)
    eye = torch.eye(n, dtype=torch.bool, device=q.device)
    s = s.masked_fill(eye, SELF_SCORE)
    allowed = key_valid
    if causal:
        tri = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        allowed = tri if allowed is None else allowed & tri
    return (masked_softmax(s, allowed) @ v.to(s.dtype)).to(v.dtype)


class ReformerKernel(AttentionKernel):
    r"""Reformer LSH attention (Kitaev, Kaiser & Levskaya 2020, "Reformer: The Efficient
    Transformer", Sec. 2).

    *Shared QK*: keys are the unit-normalised queries, :math:`k_j = q_j / \lVert q_j\rVert`, so
    **the kernel ignores its** ``k`` **argument** (the layer's key projection gets no gradient).
    *Angular LSH* (Eq. 3): for a random rotation :math:`R \in \mathbb{R}^{d \times u/2}`,
    :math:`h(x) = \arg\max([xR; -xR])`; a query attends only to keys in its own bucket:

    .. math::
        o_i = \sum_{j \in P_i} \mathrm{softmax}_j\Big(\frac{q_i \cdot k_j}{\sqrt d}\Big) v_j,
        \qquad P_i = \{j : h(q_i) = h(k_j)\}.

    Tokens are sorted by (bucket, position) and cut into chunks of ``c``; each chunk attends to
    itself and the previous chunk (Eq. 4-5), keys of other buckets masked. A token does not
    attend to itself unless nothing else is allowed (score :data:`SELF_SCORE`). With
    ``rounds > 1`` independent hashes are combined by their log-sum-exp weights,
    :math:`o_i = \sum_r e^{L_r(i) - \log\sum_{r'} e^{L_{r'}(i)}} o_i^{(r)}` (Eq. 6-7; the
    paper's correction for keys found in several rounds is not applied). With ``buckets=1``
    and the default chunk (``n / buckets = n``) this is exactly full shared-QK attention
    (:func:`shared_qk_attention`).

    Padded tokens go to an extra last bucket: they never displace real tokens in the sort and
    are masked as keys. Causal masks compare original positions. The rotations are drawn once
    from ``seed`` (a buffer). Self-attention only: ``k`` must have the queries' length and
    there can be no KV cache.

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        buckets: number of buckets ``u`` (1 or even; default 32).
        rounds: hash rounds ``R`` (default 2).
        chunk: chunk length ``c`` (default None: ``ceil(n / buckets)``, the mean bucket size).
        seed: seed of the random rotations (default 0).

    Complexity: time ``O(R n c d)``, memory ``O(R n c)`` (``c`` = chunk; plus ``O(R n d)``).
    """

    name = "reformer"
    supports_causal = True
    reads = "qv"

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        buckets: int = 32,
        rounds: int = 2,
        chunk: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if not isinstance(buckets, int) or buckets < 1 or (buckets > 1 and buckets % 2):
            raise ValueError(f"buckets must be 1 or an even int >= 2, got {buckets!r}")
        if not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
        if chunk is not None and (not isinstance(chunk, int) or chunk < 1):
            raise ValueError(f"chunk must be a positive int or None, got {chunk!r}")
        self.buckets, self.rounds, self.chunk, self.seed = buckets, rounds, chunk, seed
        gen = torch.Generator().manual_seed(seed)
        rot = torch.randn(rounds, self.head_dim, max(buckets // 2, 1), generator=gen)
        self.register_buffer("rotations", rot)  # (R, d, u/2)

    def hash(self, x: Tensor) -> Tensor:
        """Bucket of each position in each round: ``(b, h, R, n)`` in ``[0, buckets)``."""
        b, h, n, _ = x.shape
        if self.buckets == 1:
            return torch.zeros(b, h, self.rounds, n, dtype=torch.long, device=x.device)
        rot = torch.einsum("bhnd,Rdu->bhRnu", x, self.rotations.to(x.dtype))  # (b, h, R, n, u/2)
        return torch.cat([rot, -rot], dim=-1).argmax(-1)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        b, h, n, d = q.shape
        e = v.shape[-1]
        self.check_self_attention(
            n, k.shape[2], q_offset,
            why="reformer shares queries and keys (keys = normalised queries)",
            advice="Use kernel='linear' for incremental decoding",
        )  # fmt: skip
        R = self.rounds
        c = self.chunk or max(1, -(-n // self.buckets))
        r = -(-n // c)
        big_n, pad = r * c, r * c - n
        qf = q.to(torch.promote_types(q.dtype, torch.float32))
        kn = F.normalize(qf, dim=-1)  # shared QK: keys are the unit-normalised queries
        valid = key_valid_rows(parts, b, n, q.device)  # (b, n)
        buckets = self.hash(kn).masked_fill(~valid[:, None, None, :], self.buckets)
        buckets = F.pad(buckets, (0, pad), value=self.buckets)  # (b, h, R, N) padding sorts last
        valid = F.pad(valid, (0, pad), value=False)
        pos = torch.arange(big_n, device=q.device)
        perm = (buckets * big_n + pos).argsort(-1)  # (b, h, R, N) sort by (bucket, position)
        undo = perm.argsort(-1)

        def sort(t: Tensor) -> Tensor:  # (b, h, N, f) -> (b, h, R, r, c, f) in sorted order
            t = F.pad(t, (0, 0, 0, pad)).unsqueeze(2).expand(-1, -1, R, -1, -1)
            idx = perm.unsqueeze(-1).expand(-1, -1, -1, -1, t.shape[-1])
            return t.gather(3, idx).view(b, h, R, r, c, t.shape[-1])

        def look_back(t: Tensor) -> Tensor:  # keys of each chunk: itself and the previous chunk
            return t if r == 1 else torch.cat([t, t.roll(1, dims=3)], dim=4)

        sq, sk, sv = sort(qf), look_back(sort(kn)), look_back(sort(v.to(qf.dtype)))
        spos = perm.view(b, h, R, r, c)
        sbucket = buckets.gather(-1, perm).view(b, h, R, r, c)
        svalid = valid[:, None, None, :].expand(-1, h, R, -1).gather(-1, perm).view(b, h, R, r, c)
        kpos, kbucket, kvalid = look_back(spos), look_back(sbucket), look_back(svalid)
        s = torch.einsum("bhRrcd,bhRrkd->bhRrck", sq, sk) / math.sqrt(d)  # (b, h, R, r, c, 2c)
        s = s.masked_fill(spos.unsqueeze(-1) == kpos.unsqueeze(-2), SELF_SCORE)
        allowed = kvalid.unsqueeze(-2) & (sbucket.unsqueeze(-1) == kbucket.unsqueeze(-2))
        if parts.causal:
            allowed = allowed & (kpos.unsqueeze(-2) <= spos.unsqueeze(-1))
        s = s.masked_fill(~allowed, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)  # (b, h, R, r, c); -inf: nothing allowed
        safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
        w = torch.exp(s - safe.unsqueeze(-1))  # softmax within the chunk
        out = (w @ sv).view(b, h, R, big_n, e)  # sorted order
        out = out.gather(3, undo.unsqueeze(-1).expand(-1, -1, -1, -1, e))  # (b, h, R, N, e)
        lse = lse.view(b, h, R, big_n).gather(-1, undo)  # (b, h, R, N)
        weights = masked_softmax(lse, torch.isfinite(lse), dim=2)  # rounds by their mass
        out = (weights.unsqueeze(-1) * out).sum(2)  # (b, h, N, e)
        return out[:, :, :n].to(v.dtype)

    def extra_repr(self) -> str:
        return f"buckets={self.buckets}, rounds={self.rounds}, chunk={self.chunk}, seed={self.seed}"
