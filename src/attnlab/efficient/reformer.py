"""Reformer attention (Kitaev et al. 2020): shared-QK attention within LSH buckets.

Legend: ``b`` batch, ``h`` heads, ``n`` positions (queries = keys), ``d`` head dim, ``e`` value
head dim, ``R`` hash rounds, ``u`` buckets, ``r`` chunks, ``c`` chunk length, ``S = r c``
slots.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..numerics import safe_max
from .base import AttentionKernel, MaskParts, key_valid_rows, masked_softmax

__all__ = [
    "ReformerKernel",
    "shared_qk_attention",
    "sorted_layout",
    "aligned_layout",
    "SELF_SCORE",
]

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


def sorted_layout(buckets: Tensor, chunk: int) -> tuple[Tensor, Tensor]:
    """The paper's layout (Sec. 2): tokens sorted by (bucket, position), cut into chunks.

    Args:
        buckets: ``(..., n)`` bucket of each token.
        chunk: chunk length ``c``.

    Returns:
        ``slots (..., S)``: the token in each slot (``n`` = empty), ``S`` a multiple of ``c``;
        ``where (..., n)``: the slot of each token.
    """
    n = buckets.shape[-1]
    pos = torch.arange(n, device=buckets.device)
    perm = (buckets * n + pos).argsort(-1)  # sorted by (bucket, position)
    size = -(-n // chunk) * chunk
    return F.pad(perm, (0, size - n), value=n), perm.argsort(-1)


def aligned_layout(buckets: Tensor, chunk: int, num_buckets: int) -> tuple[Tensor, Tensor]:
    """The causal layout: sorted by (bucket, position), each bucket starting a new chunk, so a
    token's slot is its bucket's first slot plus its rank among the earlier tokens of its
    bucket, and which tokens share its chunk depends on no later token.

    Args:
        buckets: ``(..., n)`` bucket of each token, in ``[0, num_buckets)``.
        chunk: chunk length ``c``.
        num_buckets: the number of buckets ``u``.

    Returns:
        As :func:`sorted_layout`; ``S = (ceil(n / c) + min(u, n) - 1) * c``, enough for any
        bucket sizes (bucket ``k`` fills ``ceil(n_k / c)`` chunks).
    """
    n = buckets.shape[-1]
    pos = torch.arange(n, device=buckets.device)
    perm = (buckets * n + pos).argsort(-1)  # sorted by (bucket, position)
    sorted_buckets = buckets.gather(-1, perm)
    counts = torch.zeros(*buckets.shape[:-1], num_buckets, dtype=torch.long, device=pos.device)
    counts.scatter_add_(-1, buckets, torch.ones_like(buckets))  # (..., u) tokens per bucket
    first = counts.cumsum(-1) - counts  # sorted index of each bucket's first token
    padded = -(-counts // chunk) * chunk
    base = padded.cumsum(-1) - padded  # first slot of each bucket
    rank = pos - first.gather(-1, sorted_buckets)  # rank within the bucket, by position
    slot_sorted = base.gather(-1, sorted_buckets) + rank
    where = torch.empty_like(perm).scatter_(-1, perm, slot_sorted)
    size = (-(-n // chunk) + min(num_buckets, n) - 1) * chunk
    slots = torch.full((*buckets.shape[:-1], size), n, dtype=torch.long, device=pos.device)
    return slots.scatter_(-1, where, pos.expand_as(where)), where


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

    Tokens are sorted by (bucket, position) and cut into chunks of ``c = block``; each chunk
    attends to
    itself and the previous chunk (Eq. 4-5), keys of other buckets masked. A token does not
    attend to itself unless nothing else is allowed (score :data:`SELF_SCORE`). With
    ``rounds > 1`` independent hashes are combined by their log-sum-exp weights,
    :math:`o_i = \sum_r e^{L_r(i) - \log\sum_{r'} e^{L_{r'}(i)}} o_i^{(r)}` (Eq. 6-7; the
    paper's correction for keys found in several rounds is not applied). With ``buckets=1``
    and the default block (``n / buckets = n``) this is exactly full shared-QK attention
    (:func:`shared_qk_attention`).

    Padded tokens go to an extra last bucket: they never displace real tokens in the sort and
    are masked as keys. The rotations are drawn once from ``seed`` (a buffer). Self-attention
    only: ``k`` must have the queries' length and there can be no KV cache.

    *Causal masks* (the paper's language models, Sec. 5) need more than comparing positions:
    in the sorted order a token's slot counts every token of a lower bucket, future ones
    included, so one later token hashed low shifts the chunk boundaries of earlier ones and
    changes which past keys they see. Under a causal mask each bucket therefore starts a new
    chunk (:func:`aligned_layout`): a token's chunk is its rank among the *earlier* tokens of its
    bucket divided by ``c``, so query ``i`` attends to same-bucket keys ``j <= i`` of its chunk
    and the previous one, chosen by tokens ``<= i`` only. This is strictly causal, at the cost
    of at most ``buckets + 1`` partly empty chunks (about twice the slots with the default
    block). Refusing causal masks would have been simpler but drops the model the paper
    evaluates; a layout that depends only on the past keeps it. With the default block
    (``ceil(n / buckets)``) outputs still depend on the length ``n`` (not on later tokens);
    set ``block`` to make a prefix's outputs independent of what follows it.

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        buckets: number of buckets ``u`` (1 or even; default 32).
        rounds: hash rounds ``R`` (default 2).
        block: the chunk length ``c`` (the paper's chunks; default None: ``ceil(n / buckets)``,
            the mean bucket size).
        seed: seed of the random rotations (default 0).

    Complexity: time ``O(R n c d)``, memory ``O(R n c)`` (``c`` = block; plus ``O(R n d)``).
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
        block: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if not isinstance(buckets, int) or buckets < 1 or (buckets > 1 and buckets % 2):
            raise ValueError(f"buckets must be 1 or an even int >= 2, got {buckets!r}")
        if not isinstance(rounds, int) or rounds < 1:
            raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
        if block is not None and (not isinstance(block, int) or block < 1):
            raise ValueError(f"block must be a positive int or None, got {block!r}")
        self.buckets, self.rounds, self.block, self.seed = buckets, rounds, block, seed
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
        c = self.block or max(1, -(-n // self.buckets))
        qf = q.to(torch.promote_types(q.dtype, torch.float32))
        kn = F.normalize(qf, dim=-1)  # shared QK: keys are the unit-normalised queries
        valid = key_valid_rows(parts, b, n, q.device)  # (b, n)
        # Padding gets its own last bucket: it never displaces real tokens.
        buckets = self.hash(kn).masked_fill(~valid[:, None, None, :], self.buckets)  # (b,h,R,n)
        if parts.causal:
            slots, where = aligned_layout(buckets, c, self.buckets + 1)  # (b, h, R, S), (.., n)
        else:
            slots, where = sorted_layout(buckets, c)
        S = slots.shape[-1]
        r = S // c

        def gather(t: Tensor) -> Tensor:  # (b, h, n, f) -> (b, h, R, r, c, f); empty slots: 0
            t = F.pad(t, (0, 0, 0, 1)).unsqueeze(2).expand(-1, -1, R, -1, -1)  # token n: empty
            idx = slots.unsqueeze(-1).expand(-1, -1, -1, -1, t.shape[-1])
            return t.gather(3, idx).view(b, h, R, r, c, t.shape[-1])

        def look_back(t: Tensor) -> Tensor:  # keys of each chunk: itself and the previous chunk
            return t if r == 1 else torch.cat([t, t.roll(1, dims=3)], dim=4)

        # 1 / sqrt(d) on the queries' (.., c, d), not on the scores' (.., c, 2c): a pass fewer
        sq = gather(qf * d**-0.5)
        sk, sv = look_back(gather(kn)), look_back(gather(v.to(qf.dtype)))
        spos = slots.view(b, h, R, r, c)  # original positions (n: empty slot)
        sbucket = F.pad(buckets, (0, 1), value=self.buckets).gather(-1, slots).view_as(spos)
        svalid = F.pad(valid, (0, 1), value=False)[:, None, None, :].expand(-1, h, R, -1)
        svalid = svalid.gather(-1, slots).view_as(spos)
        # A key that is not a real token (padding, an empty slot) is in no query's bucket.
        kbucket = look_back(sbucket.masked_fill(~svalid, -1))
        # The (.., c, 2c) scores are the largest tensors here, so each pass over them counts:
        # they are filled in place (the product's backward does not read its output), masked
        # by one comparison of buckets, and never divided; the (.., c, e) outputs are.
        s = torch.einsum("bhRrcd,bhRrkd->bhRrck", sq, sk)  # (b, h, R, r, c, 2c)
        blocked = sbucket.unsqueeze(-1) != kbucket.unsqueeze(-2)
        if parts.causal:
            kpos = look_back(spos)
            blocked = blocked | (kpos.unsqueeze(-2) > spos.unsqueeze(-1))
        s.masked_fill_(blocked, float("-inf"))
        # A token's own key: the diagonal of its chunk's first c keys (it holds one slot a
        # round); a real token's is never blocked (its own bucket), a padded one's always is.
        s[..., :c].diagonal(dim1=-2, dim2=-1).masked_fill_(svalid, SELF_SCORE)
        shift = safe_max(s)  # (b, h, R, r, c, 1); 0 where nothing is allowed
        w = (s - shift).exp_()  # 0 where not allowed
        z = w.sum(-1, keepdim=True)
        lse = (shift + z.log()).squeeze(-1)  # (b, h, R, r, c); -inf: nothing allowed
        out = (w @ sv) / z.clamp_min(torch.finfo(w.dtype).tiny)  # softmax in the chunk; else 0
        out = out.view(b, h, R, S, e)  # slot order
        out = out.gather(3, where.unsqueeze(-1).expand(-1, -1, -1, -1, e))  # (b, h, R, n, e)
        lse = lse.view(b, h, R, S).gather(-1, where)  # (b, h, R, n)
        weights = masked_softmax(lse, torch.isfinite(lse), dim=2)  # rounds by their mass
        out = (weights.unsqueeze(-1) * out).sum(2)  # (b, h, n, e)
        return out.to(v.dtype)

    def extra_repr(self) -> str:
        return f"buckets={self.buckets}, rounds={self.rounds}, block={self.block}, seed={self.seed}"
