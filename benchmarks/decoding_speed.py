"""Incremental decoding on the KV cache against recomputing the prefix at every step.

For each model kind, beam width (1: greedy, 5), batch (1, 64 sources) and output length (10,
100 tokens: a synthetic long-output check), decodes the same random sources twice in one
process, side by side, with ``use_cache=True`` and ``use_cache=False``, and reports output
tokens per second (``batch * length / seconds``, beams not counted) and their ratio. The output
length is forced (``min_length = max_length = L``: ``<eos>`` is suppressed until step ``L``),
so the timing does not depend on the weights; a random model of the ``g2p`` size is used
unless ``--checkpoint`` names a trained run.

Quiet machine only (this measures speed). One line of JSON per cell goes to ``--out``; the
markdown table for BENCHMARKS.md is printed::

    OMP_NUM_THREADS=1 python benchmarks/decoding_speed.py --out results/decoding_speed.jsonl
    OMP_NUM_THREADS=1 python benchmarks/decoding_speed.py --tiny   # a smoke test, seconds
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from attnlab.lab.bench import time_call
from attnlab.lab.models.decoding import beam_search, greedy_decode
from attnlab.lab.models.seq2seq import Seq2SeqConfig, build_seq2seq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

SRC_V, TGT_V = 29, 42  # the g2p vocabularies (letters, phones + specials)
BOS, EOS = 1, 2


def model_for(kind: str, checkpoint: str | None, dim: int) -> torch.nn.Module:
    if checkpoint:
        from attnlab.lab.commands import load_for_inference

        _, model, _ = load_for_inference(checkpoint)
        return model.eval()
    torch.manual_seed(0)
    cfg = Seq2SeqConfig(kind=kind, dim=dim, ff_hidden=2 * dim, decoder_depth=2, dropout=0.0)
    return build_seq2seq(cfg, src_vocab=SRC_V, tgt_vocab=TGT_V).eval()


def decode_seconds(model, *, beam: int, batch: int, length: int, cache: bool, repeats: int):
    gen = torch.Generator().manual_seed(0)
    src = torch.randint(2, SRC_V, (batch, 8), generator=gen)
    lengths = torch.full((batch,), 8)
    limits = torch.full((batch,), length)

    @torch.no_grad()
    def run():
        memory = model.encode(src, lengths)
        kw = dict(bos=BOS, eos=EOS, max_lengths=limits, min_length=length, use_cache=cache)
        if beam == 1:
            return greedy_decode(model, memory, **kw)
        return beam_search(model, memory, beam=beam, **kw)

    out = run()  # the forced length holds: every output is `length` tokens
    first = out[0] if beam == 1 else out[0][0]
    assert len(first.tokens) == length, (len(first.tokens), length)
    return time_call(run, repeats=repeats)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kinds", nargs="+", default=["transformer", "lstm"])
    p.add_argument("--beams", nargs="+", type=int, default=[1, 5])
    p.add_argument("--batches", nargs="+", type=int, default=[1, 64])
    p.add_argument("--lengths", nargs="+", type=int, default=[10, 100])
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--checkpoint", help="a trained run (then --kinds is ignored)")
    p.add_argument("--out", help="append one JSON line per cell here")
    p.add_argument("--tiny", action="store_true", help="smoke test: tiny sizes, one repeat")
    args = p.parse_args(argv)
    if args.tiny:
        args.batches, args.lengths, args.dim, args.repeats = [2], [4], 32, 1
    kinds = ["checkpoint"] if args.checkpoint else args.kinds
    print(f"machine: {machine()}")
    print("| model | beam | batch | out len | cached tok/s | recompute tok/s | speed-up |")
    print("|---|---|---|---|---|---|---|")
    out = Path(args.out) if args.out else None
    for kind in kinds:
        model = model_for(kind, args.checkpoint, args.dim)
        for beam in args.beams:
            for batch in args.batches:
                for length in args.lengths:
                    s = {c: decode_seconds(model, beam=beam, batch=batch, length=length, cache=c,
                                           repeats=args.repeats) for c in (True, False)}  # fmt: skip
                    rate = {c: batch * length / s[c] for c in s}
                    row = {"model": kind, "beam": beam, "batch": batch, "length": length,
                           "cached_tok_s": rate[True], "recompute_tok_s": rate[False],
                           "speedup": s[False] / s[True], "machine": machine()}  # fmt: skip
                    print(f"| {kind} | {beam} | {batch} | {length} | {rate[True]:.0f} | "
                          f"{rate[False]:.0f} | {row['speedup']:.2f}x |", flush=True)  # fmt: skip
                    if out:
                        out.parent.mkdir(parents=True, exist_ok=True)
                        with out.open("a") as f:
                            f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
