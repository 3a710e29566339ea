"""Greedy and beam-search decoding: beam 1 = greedy, cached = uncached, sorted n-best, <eos>,
length limits, and the decoder cache's reordering."""

from __future__ import annotations

import pytest
import torch

from attnlab.blocks.decoder import DecoderCache, TransformerDecoder
from attnlab.lab.models.decoding import beam_search, greedy_decode, max_output_lengths

from .test_seq2seq import CONFIGS, batch, make

BOS, EOS = 1, 2


def decode_all(model, *, beam, use_cache, limits=None):
    src, lengths, _ = batch()
    memory = model.encode(src, lengths)
    limits = max_output_lengths(lengths) if limits is None else limits
    if beam == 0:
        return greedy_decode(model, memory, bos=BOS, eos=EOS, max_lengths=limits,
                             use_cache=use_cache)  # fmt: skip
    return beam_search(model, memory, bos=BOS, eos=EOS, max_lengths=limits, beam=beam,
                       use_cache=use_cache)  # fmt: skip


@pytest.mark.parametrize("name", CONFIGS)
def test_beam_one_is_greedy(name):
    model = make(name)
    greedy = decode_all(model, beam=0, use_cache=True)
    beam = decode_all(model, beam=1, use_cache=True)
    assert [h.tokens for h in greedy] == [hyps[0].tokens for hyps in beam]
    for g, (b,) in zip(greedy, beam):
        assert g.log_prob == pytest.approx(b.log_prob, abs=1e-9)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("beam", [0, 1, 4])
def test_cached_and_uncached_decoding_give_identical_outputs(name, beam):
    model = make(name)
    assert decode_all(model, beam=beam, use_cache=True) == decode_all(
        model, beam=beam, use_cache=False
    )


@pytest.mark.parametrize("name", CONFIGS)
def test_nbest_is_sorted_ends_on_eos_and_respects_the_limits(name):
    model = make(name)
    src, lengths, _ = batch()
    limits = max_output_lengths(lengths)
    for hyps, limit in zip(decode_all(model, beam=4, use_cache=True), limits.tolist()):
        assert len(hyps) == 4
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        for h in hyps:
            assert h.tokens[-1] == EOS and EOS not in h.tokens[:-1]
            assert 2 <= len(h.tokens) <= limit  # min_length 1: never empty
            assert BOS not in h.tokens and 0 not in h.tokens
            assert h.score == pytest.approx(h.log_prob / len(h.tokens))


def test_a_forced_limit_ends_every_output_there():
    model = make("transformer")
    limits = torch.tensor([3, 1, 2])
    for beam in (0, 3):
        out = decode_all(model, beam=beam, use_cache=True, limits=limits)
        hyps = out if beam == 0 else [h for hs in out for h in hs[:1]]
        assert all(len(h.tokens) <= int(n) and h.tokens[-1] == EOS for h, n in zip(hyps, limits))


def test_max_output_lengths_is_capped():
    got = max_output_lengths(torch.tensor([0, 3, 500]), ratio=2.0, extra=5, cap=64)
    assert got.tolist() == [5, 11, 64]
    with pytest.raises(ValueError, match="cap must be >= 1"):
        max_output_lengths(torch.tensor([1]), cap=0)


def test_bad_beam_arguments():
    model = make("lstm")
    with pytest.raises(ValueError, match="beam must be a positive int"):
        decode_all(model, beam=-1, use_cache=True)
    src, lengths, _ = batch()
    with pytest.raises(ValueError, match="n_best must be in"):
        beam_search(model, model.encode(src, lengths), bos=BOS, eos=EOS,
                    max_lengths=max_output_lengths(lengths), beam=2, n_best=3)  # fmt: skip


def test_decoder_cache_reorder_selects_batch_rows():
    torch.manual_seed(0)
    dec = TransformerDecoder(16, 2, 2).double().eval()
    x, ctx = torch.randn(3, 4, 16, dtype=torch.float64), torch.randn(3, 5, 16, dtype=torch.float64)
    cache = DecoderCache()
    dec(x, ctx, cache=cache)
    index = torch.tensor([2, 2, 0])
    reordered = cache.reorder(index)
    assert reordered is cache and cache.length == 4
    y = torch.randn(3, 1, 16, dtype=torch.float64)
    step = dec(y, ctx[index], cache=cache).out
    full = dec(torch.cat([x[index], y], dim=1), ctx[index]).out[:, -1:]
    torch.testing.assert_close(step, full)
