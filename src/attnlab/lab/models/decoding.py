r"""Greedy and beam-search decoding for the encoder-decoders of :mod:`attnlab.lab.models.seq2seq`.

Both decode a batch of sources at once and stop a sequence at ``<eos>`` or at its own maximum
length (:func:`max_output_lengths`, derived from its source length), where ``<eos>`` is forced,
so every hypothesis ends with ``<eos>``. A finished sequence is continued with padding at no cost
until the whole batch has finished.

Beam search (width ``k``) keeps, per source, the ``k`` prefixes of highest total log-probability
:math:`\log p(y_{1..t} \mid x)`; finished hypotheses stay in the beam with their score frozen.
At the end the hypotheses are ranked by the length-normalised score
:math:`\log p(y \mid x) / |y|^{\alpha}` (:math:`|y|` counts ``<eos>``; :math:`\alpha` =
``length_penalty``, 0 = raw log-probability). With ``beam=1`` it is greedy decoding.

Each step runs the model's decoder incrementally on its state (the Transformer's KV cache, the
LSTM's ``(h, c)``), reordered to the surviving beams; ``use_cache=False`` instead recomputes the
whole prefix at every step: the same outputs, the reference for tests and the speed benchmark.

Legend: ``b`` sources, ``k`` beam width, ``N = b * k`` rows, ``t`` steps, ``V`` vocabulary.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from attnlab.lab.models.seq2seq_types import Memory, Seq2Seq

__all__ = ["Hypothesis", "beam_search", "greedy_decode", "max_output_lengths"]


class Hypothesis(NamedTuple):
    """One decoded sequence."""

    tokens: list[int]  # the output ids, without <bos>, ending with <eos>
    log_prob: float  # log p(tokens | source)
    score: float  # log_prob / len(tokens) ** length_penalty (the ranking score)


def max_output_lengths(
    src_lengths: Tensor, *, ratio: float = 2.0, extra: int = 5, cap: int = 256
) -> Tensor:
    """The longest output (in tokens, ``<eos>`` included) of each source: ``ratio * length +
    extra``, at most ``cap`` (a 500-letter word does not decode for 1,000 steps).

    Shapes: src_lengths ``(b,)`` -> ``(b,)`` long.
    """
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    limit = (src_lengths.float() * ratio).floor().long() + extra
    return limit.clamp(min=1, max=cap)


def _next_log_probs(
    model: Seq2Seq, memory: Memory, prefix: Tensor, state: Any, use_cache: bool
) -> tuple[Tensor, Any]:
    """Log-probabilities ``(N, V)`` of the token after ``prefix`` ``(N, t)``, and the state."""
    if use_cache:  # only the new token, after the cached ones (the whole prefix at first)
        tokens = prefix if state is None else prefix[:, -1:]
        out = model.decode(memory, tokens, state=state, use_cache=True)
    else:
        out = model.decode(memory, prefix, use_cache=False)
    return out.logits[:, -1].float().log_softmax(-1), out.state


def _constrain(
    log_probs: Tensor,
    finished: Tensor,
    force_eos: Tensor,
    *,
    bos: int,
    eos: int,
    pad: int,
    allow_eos: bool = True,
) -> Tensor:
    """``<bos>`` and padding are never generated (nor ``<eos>`` before ``min_length``); finished
    rows may only continue with ``pad`` (cost 0); rows at their length limit only with ``<eos>``
    (at the model's cost)."""
    forbidden = [bos, pad] if allow_eos else [bos, pad, eos]
    eos_lp = log_probs[:, eos]
    log_probs = log_probs.index_fill(-1, torch.tensor(forbidden, device=log_probs.device),
                                     float("-inf"))  # fmt: skip
    eos_only = torch.full_like(log_probs, float("-inf"))
    eos_only[:, eos] = eos_lp
    log_probs = torch.where(force_eos[:, None], eos_only, log_probs)
    pad_only = torch.full_like(log_probs, float("-inf"))
    pad_only[:, pad] = 0.0
    return torch.where(finished[:, None], pad_only, log_probs)


@torch.no_grad()
def greedy_decode(
    model: Seq2Seq,
    memory: Memory,
    *,
    bos: int,
    eos: int,
    max_lengths: Tensor,
    pad: int = 0,
    min_length: int = 1,
    use_cache: bool = True,
) -> list[Hypothesis]:
    """The most likely next token at every step, for each source of ``memory``.

    Args:
        model: a model of the :mod:`~attnlab.lab.models.seq2seq` protocol (in eval mode).
        memory: ``model.encode(...)`` of ``b`` sources.
        bos, eos, pad: the target vocabulary's start, end and padding ids.
        max_lengths: ``(b,)`` the longest output of each source (:func:`max_output_lengths`).
        min_length: ``<eos>`` is not generated before this many tokens (default 1: no empty
            output), unless a source's ``max_lengths`` forces it.
        use_cache: decode incrementally on the model's state (default) or recompute the prefix.

    Returns:
        One :class:`Hypothesis` per source (score = log_prob / length).
    """
    b = memory.out.shape[0]
    device = memory.out.device
    prefix = torch.full((b, 1), bos, dtype=torch.long, device=device)  # (b, 1 + t)
    finished = torch.zeros(b, dtype=torch.bool, device=device)
    log_prob = torch.zeros(b, device=device)
    lengths = torch.zeros(b, dtype=torch.long, device=device)
    max_lengths = max_lengths.to(device)
    state = None
    for t in range(int(max_lengths.max())):
        lp, state = _next_log_probs(model, memory, prefix, state, use_cache)  # (b, V)
        lp = _constrain(lp, finished, t + 1 >= max_lengths, bos=bos, eos=eos, pad=pad,
                        allow_eos=t >= min_length)  # fmt: skip
        best, token = lp.max(-1)  # (b,)
        log_prob += best
        lengths += (~finished).long()
        finished = finished | (token == eos)
        prefix = torch.cat([prefix, token[:, None]], dim=1)
        if bool(finished.all()):
            break
    return [
        Hypothesis(
            prefix[i, 1 : 1 + lengths[i]].tolist(),
            float(log_prob[i]),
            float(log_prob[i] / lengths[i].clamp(min=1)),
        )  # fmt: skip
        for i in range(b)
    ]


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    memory: Memory,
    *,
    bos: int,
    eos: int,
    max_lengths: Tensor,
    beam: int = 5,
    length_penalty: float = 1.0,
    n_best: int | None = None,
    pad: int = 0,
    min_length: int = 1,
    use_cache: bool = True,
) -> list[list[Hypothesis]]:
    """Beam search of width ``beam``, batched over the sources of ``memory`` (module docstring).

    Args:
        model, memory, bos, eos, max_lengths, pad, min_length, use_cache: as
            :func:`greedy_decode`.
        beam: beam width ``k`` (>= 1).
        length_penalty: :math:`\\alpha` of the final ranking score ``log_prob / len ** alpha``.
        n_best: hypotheses returned per source (default ``beam``).

    Returns:
        Per source, its ``n_best`` hypotheses sorted by score, best first.
    """
    if not isinstance(beam, int) or beam < 1:
        raise ValueError(f"beam must be a positive int, got {beam!r}")
    n_best = beam if n_best is None else n_best
    if not 1 <= n_best <= beam:
        raise ValueError(f"n_best must be in [1, beam={beam}], got {n_best}")
    b, k = memory.out.shape[0], beam
    device = memory.out.device
    memory = Memory(memory.out.repeat_interleave(k, 0), memory.lengths.repeat_interleave(k, 0))
    limits = max_lengths.to(device).repeat_interleave(k, 0)  # (N,)
    prefix = torch.full((b * k, 1), bos, dtype=torch.long, device=device)  # (N, 1 + t)
    finished = torch.zeros(b * k, dtype=torch.bool, device=device)
    lengths = torch.zeros(b * k, dtype=torch.long, device=device)
    scores = torch.full((b, k), float("-inf"), device=device)
    scores[:, 0] = 0.0  # all beams start equal: expand the first one only
    base = torch.arange(b, device=device)[:, None] * k  # (b, 1): row of each source's beam 0
    state = None
    for t in range(int(limits.max())):
        lp, state = _next_log_probs(model, memory, prefix, state, use_cache)  # (N, V)
        lp = _constrain(lp, finished, t + 1 >= limits, bos=bos, eos=eos, pad=pad,
                        allow_eos=t >= min_length)  # fmt: skip
        vocab = lp.shape[-1]
        candidates = (scores.reshape(-1, 1) + lp).reshape(b, k * vocab)  # (b, k * V)
        scores, index = candidates.topk(k, dim=-1)  # (b, k), best first
        rows = (base + torch.div(index, vocab, rounding_mode="floor")).reshape(-1)  # (N,)
        token = (index % vocab).reshape(-1)
        was_finished = finished[rows]
        lengths = lengths[rows] + (~was_finished).long()
        finished = was_finished | (token == eos)
        prefix = torch.cat([prefix[rows], token[:, None]], dim=1)
        state = model.reorder_state(state, rows)
        if bool(finished.all()):
            break
    normalised = scores / lengths.reshape(b, k).clamp(min=1).float() ** length_penalty
    results = []
    for i in range(b):
        hyps = [
            Hypothesis(
                prefix[i * k + j, 1 : 1 + lengths[i * k + j]].tolist(),
                float(scores[i, j]),
                float(normalised[i, j]),
            )  # fmt: skip
            for j in range(k)
            if torch.isfinite(scores[i, j])
        ]
        results.append(sorted(hyps, key=lambda h: h.score, reverse=True)[:n_best])
    return results
