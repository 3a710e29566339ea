"""Sparse Sinkhorn attention (Tay et al. 2020): attention within a block and a learned,
softly sorted block.

Legend: ``b`` batch, ``h`` heads, ``n`` positions (queries = keys), ``d`` head dim, ``e`` value
head dim, ``r``/``s`` blocks, ``c``/``t`` positions within a block.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..numerics import masked_softmax
from .base import AttentionKernel, MaskParts, key_valid_rows

__all__ = ["SinkhornKernel", "sinkhorn_normalize"]


def sinkhorn_normalize(logits: Tensor, iterations: int) -> Tensor:
    r"""Log-space Sinkhorn balancing (Sinkhorn 1964; Mena et al. 2018): alternately normalise
    rows and columns of :math:`\exp(\text{logits})`; returns the log of an (approximately)
    doubly stochastic matrix ``(..., r, r)``."""
    for _ in range(iterations):
        logits = logits - torch.logsumexp(logits, dim=-1, keepdim=True)  # rows sum to 1
        logits = logits - torch.logsumexp(logits, dim=-2, keepdim=True)  # columns sum to 1
    return logits


class SinkhornKernel(AttentionKernel):
    r"""Sparse Sinkhorn attention (Tay, Bahri, Yang, Metzler & Juan 2020, "Sparse Sinkhorn
    Attention", Sec. 3).

    The sequence is cut into ``n_B`` blocks of ``block`` tokens. A sorting network (per head, a
    two-layer ReLU MLP, Sec. 3.2) maps each block's summary :math:`\psi(X_r)` (the mean of its
    real queries) to a row of logits :math:`R \in \mathbb{R}^{n_B \times n_B}`; Sinkhorn
    balancing of :math:`\exp(R / \tau)` for ``iterations`` steps (Eq. 5-7) gives a soft
    permutation :math:`P`. Block ``r`` then attends to its own keys and to the sorted block
    :math:`\sum_s P_{rs} K_s` (Eq. 3-4, "local + sorted" attention):

    .. math::
        o_{r,c} = \mathrm{softmax}\Big(\frac{q_{r,c} [K_r; \hat K_r]^\top}{\sqrt d}\Big)
        [V_r; \hat V_r], \qquad \hat K_r = \frac{\sum_s P_{rs} K_s}{\sum_s P_{rs} m_s} .

    Padding: padded keys and values are zeroed and left out of every summary; a sorted slot
    mixes real keys only (normalised by its real mass :math:`\sum_s P_{rs} m_s`, and its score
    offset by the log of that mass, :math:`-\infty` when it holds none). A sequence of at most one
    block is exact full attention. Sorting brings future blocks next to past ones, so causal
    and structured masks raise (the paper's causal variant is not implemented); no Gumbel noise
    is added (deterministic sorting).

    Args:
        dim, heads: model width and number of heads (head dim ``d = dim // heads``).
        block: block length (default 64).
        iterations: Sinkhorn iterations (default 8).
        temperature: :math:`\tau` of the Sinkhorn logits (default 0.75).
        max_len: the longest sequence (default 1024; the sort net has ``max_len / block``
            outputs).
        hidden: hidden width of the sorting network (default ``d``).

    Complexity: time ``O(n block d + n_B^2 (d + n_B))``, memory ``O(n block + n_B^2)``.
    """

    name = "sinkhorn"
    causal_reason = "its learned block sort places future blocks next to past ones"

    def __init__(
        self,
        *,
        dim: int,
        heads: int,
        block: int = 64,
        iterations: int = 8,
        temperature: float = 0.75,
        max_len: int = 1024,
        hidden: int | None = None,
    ) -> None:
        super().__init__(dim=dim, heads=heads)
        if not isinstance(block, int) or block <= 0:
            raise ValueError(f"block must be a positive int, got {block!r}")
        if not isinstance(iterations, int) or iterations < 0:
            raise ValueError(f"iterations must be an int >= 0, got {iterations!r}")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        if not isinstance(max_len, int) or max_len <= 0:
            raise ValueError(f"max_len must be a positive int, got {max_len!r}")
        self.block, self.iterations, self.temperature = block, iterations, temperature
        self.max_len = max_len
        d, hid, blocks = self.head_dim, hidden or self.head_dim, -(-max_len // block)
        self.hidden = hid
        self.w1 = nn.Parameter(torch.empty(heads, d, hid).uniform_(-1, 1) / math.sqrt(d))
        self.b1 = nn.Parameter(torch.zeros(heads, hid))
        self.w2 = nn.Parameter(torch.empty(heads, hid, blocks).uniform_(-1, 1) / math.sqrt(hid))
        self.b2 = nn.Parameter(torch.zeros(heads, blocks))

    def sort_logits(self, summary: Tensor) -> Tensor:
        """Sorting network: block summaries ``(b, h, r, d)`` to logits ``(b, h, r, r)``."""
        r = summary.shape[2]
        x = torch.einsum("bhrd,hdk->bhrk", summary, self.w1.to(summary.dtype))
        x = torch.relu(x + self.b1[:, None].to(x.dtype))
        w2, b2 = self.w2[:, :, :r].to(x.dtype), self.b2[:, None, :r].to(x.dtype)
        return torch.einsum("bhrk,hks->bhrs", x, w2) + b2

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, parts: MaskParts, *, q_offset: int = 0
    ) -> Tensor:
        b, h, n, d = q.shape
        e = v.shape[-1]
        self.check_self_attention(
            n, k.shape[2], q_offset, why="sinkhorn attention sorts blocks of one sequence"
        )
        self.check_length(n, self.max_len)
        c = self.block
        r = -(-n // c)
        pad = r * c - n
        dtype = torch.promote_types(q.dtype, torch.float32)
        valid = key_valid_rows(parts, b, n, q.device)  # (b, n)
        valid = F.pad(valid, (0, pad), value=False).view(b, 1, r, c, 1)  # (b, 1, r, c, 1)

        def blocks(t: Tensor) -> Tensor:  # (b, h, n, f) -> (b, h, r, c, f), padding zeroed
            t = F.pad(t.to(dtype), (0, 0, 0, pad)).view(b, h, r, c, t.shape[-1])
            return t.masked_fill(~valid, 0.0)

        qb, kb, vb = blocks(q), blocks(k), blocks(v)
        real = valid.squeeze(-1).to(dtype)  # (b, 1, r, c)
        summary = qb.sum(3) / real.sum(-1, keepdim=True).clamp_min(1)  # (b, h, r, d)
        log_p = sinkhorn_normalize(self.sort_logits(summary) / self.temperature, self.iterations)
        p = log_p.exp()  # (b, h, r, s) soft permutation
        mass = torch.einsum("bhrs,bxst->bhrt", p, real)  # (b, h, r, t) real mass per sorted slot
        norm = mass.clamp_min(torch.finfo(dtype).tiny).unsqueeze(-1)
        k_sorted = torch.einsum("bhrs,bhstd->bhrtd", p, kb) / norm  # (b, h, r, c, d)
        v_sorted = torch.einsum("bhrs,bhste->bhrte", p, vb) / norm  # (b, h, r, c, e)
        scale = 1.0 / math.sqrt(d)
        s_local = torch.einsum("bhrcd,bhrtd->bhrct", qb, kb) * scale  # (b, h, r, c, c)
        s_sorted = torch.einsum("bhrcd,bhrtd->bhrct", qb, k_sorted) * scale
        s_sorted = s_sorted + torch.log(mass.clamp_min(torch.finfo(dtype).tiny)).unsqueeze(-2)
        s = torch.cat([s_local, s_sorted], dim=-1)  # (b, h, r, c, 2c)
        local_ok = valid.transpose(-2, -1).expand(b, h, r, c, c)  # real keys of the block
        sorted_ok = (mass > 0).unsqueeze(-2).expand(b, h, r, c, c)  # slots holding real keys
        allowed = torch.cat([local_ok, sorted_ok], dim=-1)
        w = masked_softmax(s, allowed)
        out = w[..., :c] @ vb + w[..., c:] @ v_sorted  # (b, h, r, c, e)
        return out.reshape(b, h, r * c, e)[:, :, :n].to(v.dtype)

    def extra_repr(self) -> str:
        return (
            f"block={self.block}, iterations={self.iterations}, temperature={self.temperature}, "
            f"max_len={self.max_len}, hidden={self.hidden}"
        )
