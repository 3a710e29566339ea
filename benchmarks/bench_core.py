"""Speed and memory of the attention core, measured side by side in one run.

Usage: python benchmarks/bench_core.py [--quick] [--only NAME ...] [--out results/bench_core.json]

1. eval, no grad, fp32, dim 512, 8 heads: attnlab (auto) vs nn.MultiheadAttention, same weights
2. training step (fwd + bwd) at n = 1024, also against Hugging Face's BertSelfAttention
3. dense exact attention vs the fp32 matmul rate measured in this run
4. local(256) at n = 16384: flex (block-sparse) vs the same mask computed densely
5. chunked additive attention vs the reference path: equality and peak extra memory
6. bf16 autocast vs fp32 for the whole layer
7. the local(256) loop as users write it (a new mask per call) vs a reused mask vs a dense mask
8. short sequences in bf16: PyTorch's CPU flash kernel in bf16 vs the sdpa backend's float32
   path (``CPU_LOWP_FLOAT32_MAX_WORK``; head dims up to 16 at any length), forward + backward,
   at a fixed number of tokens
9. the banded local kernel in bf16 (its query-block tiles through the flash kernel): bf16 tiles
   vs float32 tiles (the same rule), forward + backward under autocast, n = 4096
10. short problems under bf16 autocast, what ``auto`` picks (sdpa: the float32 kernel) vs the
    reference backend (bf16 matrix products), 4 heads, without a mask, with a key-padding mask
    and with an additive bias (a lead for ``auto``'s rule; nothing uses it yet)
11. attention dropout on a CPU, what the sdpa backend runs when eager (queries in blocks,
    ``attnlab.backends.dropout_blocks``) vs the weights materialised (SDPA's math path, what it
    runs under ``torch.compile``), forward + backward with p = 0.1, a key-padding mask on half
    the batch, fp32 and bf16 autocast; and the peak memory of each
12. the additive score, forward + backward: a block of queries at a time in float32 (what
    ``AdditiveScore`` runs on a CPU, ``attnlab.additive_blocks``) vs the one-broadcast formula,
    fp32 and bf16 autocast; and the peak memory of each
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, matmul_gflops  # noqa: E402

from attnlab import MultiHeadAttention, masks  # noqa: E402
from attnlab.backends import (  # noqa: E402
    ChunkedBackend,
    FlexBackend,
    Problem,
    ReferenceBackend,
    SDPABackend,
)
from attnlab.lab.bench import peak_tensor_bytes, time_call, time_interleaved  # noqa: E402
from attnlab.functional import ScaledDotScore, SoftmaxNorm, attend, make_score  # noqa: E402
from attnlab.convert import attention_from_hf_bert, attention_from_torch

torch.manual_seed(0)


def layers(dim=512, heads=8):
    ref = nn.MultiheadAttention(dim, heads, batch_first=True)
    return ref, attention_from_torch(ref)


def eval_speed(lengths):
    rows = []
    ref, ours = layers()
    ref.eval(), ours.eval()
    for n in lengths:
        x = torch.randn(1, n, 512)
        with torch.no_grad():
            t_ours = time_call(lambda x=x: ours(x), min_time=3)
            t_ref = time_call(lambda x=x: ref(x, x, x), min_time=3)
            t_ref_nw = time_call(lambda x=x: ref(x, x, x, need_weights=False), min_time=3)
            backend = ours(x).backend
        rows.append(dict(n=n, attnlab_ms=t_ours * 1e3, torch_ms=t_ref * 1e3,
                         torch_no_weights_ms=t_ref_nw * 1e3, speedup=t_ref / t_ours,
                         speedup_vs_no_weights=t_ref_nw / t_ours, backend=backend))  # fmt: skip
        print(f"  eval n={n:5d}: attnlab {t_ours*1e3:8.2f} ms ({backend}), torch {t_ref*1e3:8.2f} ms "
              f"(x{t_ref/t_ours:.2f}), torch need_weights=False {t_ref_nw*1e3:8.2f} ms "
              f"(x{t_ref_nw/t_ours:.2f})", flush=True)  # fmt: skip
    return rows


def train_speed(n=1024, rounds=12):
    """One training step (fwd + bwd) of the same weights in attnlab, ``nn.MultiheadAttention``
    (need_weights True and False) and, with ``transformers``, Hugging Face's
    BertSelfAttention + output dense, timed in turns (:func:`time_interleaved`: medians over
    ``rounds``, the order reversed every round, so no layer is always timed first)."""
    ref, ours = layers()
    x = torch.randn(1, n, 512)
    steps = {
        "attnlab": lambda: ours(x).out.sum().backward(),
        "torch": lambda: ref(x, x, x)[0].sum().backward(),
        "torch_no_weights": lambda: ref(x, x, x, need_weights=False)[0].sum().backward(),
    }
    hf = hf_bert_attention()
    if hf is not None:  # the same weights in Hugging Face's BertSelfAttention (sdpa) + output dense
        hf_self, hf_dense = hf
        ours_hf = attention_from_hf_bert(hf_self, output=hf_dense)
        steps["attnlab_hf_weights"] = lambda: ours_hf(x).out.sum().backward()
        steps["hf"] = lambda: hf_dense(hf_self(x)[0]).sum().backward()
    t = time_interleaved(steps, rounds=rounds)
    print(f"  train n={n} (medians of {rounds} rounds in turns): attnlab {t['attnlab']*1e3:.1f} ms, "
          f"torch {t['torch']*1e3:.1f} ms (x{t['torch']/t['attnlab']:.2f}), torch need_weights=False "
          f"{t['torch_no_weights']*1e3:.1f} ms (x{t['torch_no_weights']/t['attnlab']:.2f})",
          flush=True)  # fmt: skip
    row = dict(n=n, rounds=rounds, attnlab_ms=t["attnlab"] * 1e3, torch_ms=t["torch"] * 1e3,
               torch_no_weights_ms=t["torch_no_weights"] * 1e3,
               speedup=t["torch"] / t["attnlab"],
               speedup_vs_no_weights=t["torch_no_weights"] / t["attnlab"])  # fmt: skip
    if hf is not None:
        t_oh, t_h = t["attnlab_hf_weights"], t["hf"]
        print(f"  train n={n}: attnlab {t_oh*1e3:.1f} ms, HF BertSelfAttention+dense "
              f"{t_h*1e3:.1f} ms (x{t_h/t_oh:.2f})", flush=True)  # fmt: skip
        row.update(attnlab_vs_hf_ms=t_oh * 1e3, hf_ms=t_h * 1e3, speedup_vs_hf=t_h / t_oh)
    return row


def hf_bert_attention(dim=512, heads=8):
    """Hugging Face's BertSelfAttention (sdpa) and its output dense layer, or None without
    ``transformers`` (the ``peers`` extra)."""
    try:
        from transformers import BertConfig
        from transformers.models.bert.modeling_bert import BertAttention
    except ImportError:
        print("  (transformers not installed: no Hugging Face row; pip install -e '.[peers]')")
        return None
    cfg = BertConfig(hidden_size=dim, num_attention_heads=heads, attention_probs_dropout_prob=0.0,
                     hidden_dropout_prob=0.0)  # fmt: skip
    cfg._attn_implementation = "sdpa"
    attn = BertAttention(cfg)
    return attn.self, attn.output.dense


def dense_rate(lengths, heads=8, d=64):
    mm = matmul_gflops()
    print(f"  fp32 matmul rate (2048^3): {mm:.1f} GFLOP/s", flush=True)
    rows = []
    for n in lengths:
        q, k, v = torch.randn(3, 1, heads, n, d).unbind(0)
        p = Problem(q, k, v, ScaledDotScore(), SoftmaxNorm())
        with torch.no_grad():
            t = time_call(lambda p=p: SDPABackend()(p), min_time=1)
            t_ref = time_call(lambda: attend(q, k, v), repeats=3) if n <= 4096 else float("nan")
        flops = 4 * heads * n * n * d
        rows.append(dict(n=n, gflops=flops / t / 1e9, matmul_gflops=mm, fraction=flops / t / 1e9 / mm,
                         reference_gflops=flops / t_ref / 1e9))  # fmt: skip
        print(f"  dense n={n:5d}: sdpa {flops/t/1e9:6.1f} GFLOP/s = {flops/t/1e9/mm:.0%} of matmul; "
              f"reference path {flops/t_ref/1e9:6.1f} GFLOP/s", flush=True)  # fmt: skip
    return rows


def local_flex(n=16384, window=256, heads=8, d=64):
    q, k, v = torch.randn(3, 1, heads, n, d).unbind(0)
    m = masks.local(window)
    flex = FlexBackend()
    p = Problem(q, k, v, ScaledDotScore(), SoftmaxNorm(), mask=m)
    with torch.no_grad():
        bm = flex.block_mask(p)
        density = 1 - bm.sparsity() / 100
        t_flex = time_call(lambda: flex(p), repeats=5)  # after two warm-up calls
        dense = m.dense(1, heads, n, n)
        pd = Problem(q, k, v, ScaledDotScore(), SoftmaxNorm(), mask=dense)
        t_dense = time_call(lambda: SDPABackend()(pd), repeats=2)
        t_full = time_call(lambda: SDPABackend()(Problem(q, k, v, ScaledDotScore(), SoftmaxNorm())),
                           repeats=2)  # fmt: skip
        err = (flex(p)[0] - SDPABackend()(pd)[0]).abs().max().item()
        # flex's own cost with every block computed: the sparse kernel's dense baseline
        every = masks.from_tensor(torch.ones(1, 1, n, n, dtype=torch.bool))
        pf = Problem(q, k, v, ScaledDotScore(), SoftmaxNorm(), mask=every)
        t_flex_full = time_call(lambda: flex(pf), repeats=1)
    implied = t_full * density
    implied_flex = t_flex_full * density
    print(f"  local({window}) n={n}: flex {t_flex*1e3:.1f} ms, dense-mask sdpa {t_dense*1e3:.1f} ms "
          f"(x{t_dense/t_flex:.1f}); block density {density:.4f}; unmasked sdpa {t_full*1e3:.1f} ms "
          f"-> implied {implied*1e3:.1f} ms, flex/implied = {t_flex/implied:.2f}; flex with every "
          f"block {t_flex_full*1e3:.0f} ms -> implied {implied_flex*1e3:.1f} ms, "
          f"flex/implied = {t_flex/implied_flex:.2f}; max err {err:.1e}", flush=True)  # fmt: skip
    return dict(n=n, window=window, flex_ms=t_flex * 1e3, dense_ms=t_dense * 1e3,
                speedup=t_dense / t_flex, block_density=density, full_ms=t_full * 1e3,
                implied_ms=implied * 1e3, flex_over_implied=t_flex / implied,
                flex_every_block_ms=t_flex_full * 1e3, flex_over_own_implied=t_flex / implied_flex,
                max_abs_err=err)  # fmt: skip


def bench_local_loop(n=16384, window=256, dim=512, heads=8, repeats=3):
    """``layer(x, mask=masks.local(window))`` with a new mask object per call, as users write it
    (block masks cached by value), against one reused mask, the same loop with the block-mask
    cache off (a build per call), and the mask as a dense tensor (auto picks SDPA)."""
    layer = MultiHeadAttention(dim, heads).eval()
    x = torch.randn(1, n, dim)
    cache = masks.block_mask_cache()
    size = cache.maxsize
    cache.clear()
    reused = masks.local(window)
    dense = reused.dense(1, 1, n, n)  # (1, 1, n, n)
    with torch.no_grad():
        t = time.perf_counter()
        first = layer(x, mask=masks.local(window))  # compiles and builds
        t_first = time.perf_counter() - t
        t_loop = time_call(lambda: layer(x, mask=masks.local(window)), repeats=repeats)
        looped = layer(x, mask=masks.local(window))
        loop_backend = looped.backend
        builds = cache.info().builds
        t_reused = time_call(lambda: layer(x, mask=reused), repeats=repeats)
        cache.maxsize = 0  # the loop without the value cache: one build per call
        t_uncached = time_call(lambda: layer(x, mask=masks.local(window)), repeats=repeats)
        uncached_backend = layer(x, mask=masks.local(window)).backend
        cache.maxsize = size
        t_dense = time_call(lambda: layer(x, mask=dense), repeats=max(1, repeats - 1))
        dense_out = layer(x, mask=dense)
    err = max((o.out - dense_out.out).abs().max().item() for o in (first, looped))
    print(f"  local({window}) loop n={n}: new mask per call {t_loop*1e3:.1f} ms ({loop_backend}, "
          f"{builds} build(s)); reused mask {t_reused*1e3:.1f} ms; new mask, cache off "
          f"{t_uncached*1e3:.1f} ms ({uncached_backend}); dense mask {t_dense*1e3:.1f} ms "
          f"({dense_out.backend}, x{t_dense/t_loop:.1f}); first call {t_first:.1f} s; "
          f"max err {err:.1e}", flush=True)  # fmt: skip
    return dict(n=n, window=window, dim=dim, heads=heads, loop_ms=t_loop * 1e3,
                loop_backend=loop_backend, loop_builds=builds, reused_ms=t_reused * 1e3,
                uncached_ms=t_uncached * 1e3, uncached_backend=uncached_backend,
                dense_ms=t_dense * 1e3, dense_backend=dense_out.backend,
                speedup_vs_dense=t_dense / t_loop, first_call_s=t_first, max_abs_err=err)  # fmt: skip


# ---- chunked additive attention: peak live tensor bytes from the profiler's allocator events --
ADD_HEADS, ADD_D = 4, 32


def _additive(n: int, backend: str):
    torch.manual_seed(0)
    score = make_score("additive", head_dim=ADD_D, heads=ADD_HEADS)
    q, k, v = torch.randn(3, 1, ADD_HEADS, n, ADD_D).unbind(0)

    def run():
        with torch.no_grad():
            if backend == "reference":
                return attend(q, k, v, score=score).out
            return ChunkedBackend()(Problem(q, k, v, score, SoftmaxNorm()))[0]

    return run


def chunked_additive(max_ref_bytes=12 << 30, big_n=16384):
    # the reference materialises (b, h, n, n, a) at least twice (sum, tanh): largest n that fits
    n = 512
    while 3 * ADD_HEADS * (2 * n) ** 2 * ADD_D * 4 <= max_ref_bytes:
        n *= 2
    m_ref, o_ref = peak_tensor_bytes(_additive(n, "reference"))
    m_chk, o_chk = peak_tensor_bytes(_additive(n, "chunked"))
    err = (o_ref - o_chk).abs().max().item()
    print(f"  additive n={n}: reference peak +{m_ref/2**20:.0f} MiB, chunked +{m_chk/2**20:.1f} MiB "
          f"(1/{m_ref/max(m_chk,1):.0f}); max |diff| {err:.1e}", flush=True)  # fmt: skip
    t = time.perf_counter()
    m_big, _ = peak_tensor_bytes(_additive(big_n, "chunked"))
    t_big = time.perf_counter() - t
    print(f"  additive n={big_n}: chunked peak +{m_big / 2**20:.0f} MiB, {t_big:.1f} s", flush=True)
    return dict(n=n, heads=ADD_HEADS, head_dim=ADD_D, reference_peak_mib=m_ref / 2**20,
                chunked_peak_mib=m_chk / 2**20, ratio=m_ref / max(m_chk, 1), max_abs_diff=err,
                big_n=big_n, big_chunked_peak_mib=m_big / 2**20, big_seconds=t_big)  # fmt: skip


def bf16_speed(lengths):
    rows = []
    _, ours = layers()
    for n in lengths:
        x = torch.randn(1, n, 512)

        def fwd():
            with torch.no_grad():
                ours(x)

        def fwd_bf16():
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                ours(x)

        def step():
            ours(x).out.float().sum().backward()

        def step_bf16():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = ours(x).out
            out.float().sum().backward()

        t = [time_call(f, min_time=1) for f in (fwd, fwd_bf16, step, step_bf16)]
        rows.append(dict(n=n, fwd_fp32_ms=t[0] * 1e3, fwd_bf16_ms=t[1] * 1e3, fwd_speedup=t[0] / t[1],
                         step_fp32_ms=t[2] * 1e3, step_bf16_ms=t[3] * 1e3, step_speedup=t[2] / t[3]))  # fmt: skip
        print(f"  bf16 n={n}: fwd x{t[0]/t[1]:.2f} ({t[0]*1e3:.1f} -> {t[1]*1e3:.1f} ms), "
              f"fwd+bwd x{t[2]/t[3]:.2f} ({t[2]*1e3:.1f} -> {t[3]*1e3:.1f} ms)", flush=True)  # fmt: skip
    return rows


def lowp_sdpa(lengths, dims=(16, 32, 64, 128), tokens=1 << 17):
    """Forward + backward of bf16 ``q, k, v`` ``(b, 1, n, d)`` with ``b * n * d = tokens``:
    ``F.scaled_dot_product_attention`` in bf16 vs :class:`SDPABackend` (float32 where
    ``n * d <= CPU_LOWP_FLOAT32_MAX_WORK`` or ``d <= 16``, bf16 past it), interleaved."""
    from attnlab.backends.sdpa import _float32_on_cpu

    rows = []
    for d in dims:
        for n in lengths:
            q, k, v = (torch.randn(max(1, tokens // (n * d)), 1, n, d, dtype=torch.bfloat16,
                                   requires_grad=True) for _ in range(3))  # fmt: skip
            problem = Problem(q, k, v, ScaledDotScore(), SoftmaxNorm())

            def kernel():
                F.scaled_dot_product_attention(q, k, v).float().sum().backward()

            def backend():
                SDPABackend()(problem)[0].float().sum().backward()

            t = time_interleaved({"bf16": kernel, "backend": backend}, rounds=4, min_time=0.3)
            float32 = _float32_on_cpu(problem)  # the backend's own rule, not a copy
            rows.append(dict(d=d, n=n, batch=q.shape[0], backend_float32=float32,
                             bf16_ms=t["bf16"] * 1e3, backend_ms=t["backend"] * 1e3,
                             speedup=t["bf16"] / t["backend"]))  # fmt: skip
            print(f"  d={d} n={n}: bf16 kernel {t['bf16'] * 1e3:.1f} ms, backend "
                  f"({'float32' if float32 else 'bf16'}) {t['backend'] * 1e3:.1f} ms, "
                  f"x{t['bf16'] / t['backend']:.2f}", flush=True)  # fmt: skip
    return rows


def lowp_banded(windows, dims=(32, 64), n=4096, heads=4):
    """Forward + backward of the banded local kernel (``gathered_attention`` over each query
    block's band, as ``kernel="local"`` runs it) on fp32 ``q, k, v`` ``(1, heads, n, d)`` under
    bf16 autocast: the tiles in bf16 (the float32 rule switched off) vs the kernel as it is
    (float32 tiles where ``max(block, keys) * d <= CPU_LOWP_FLOAT32_MAX_WORK``), interleaved."""
    from attnlab.efficient import _sparse
    from attnlab.efficient.local import default_block, sliding_band

    rule = _sparse.lowp_runs_float32_on_cpu
    rows = []
    for d in dims:
        for w in windows:
            block = default_block(w)
            band = sliding_band("banded", block=block, window=w, causal=False, q_len=n,
                                kv_len=n, q_offset=0)  # fmt: skip
            q, k, v = (torch.randn(1, heads, n, d, requires_grad=True) for _ in range(3))

            def step():
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out = _sparse.gathered_attention(q, k, v, band, block=block, mask=None)
                out.float().sum().backward()

            def bf16_tiles():
                _sparse.lowp_runs_float32_on_cpu = lambda q, positions: False
                try:
                    step()
                finally:
                    _sparse.lowp_runs_float32_on_cpu = rule

            t = time_interleaved({"bf16": bf16_tiles, "kernel": step}, rounds=4, min_time=0.3)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                float32 = rule(q, max(block, band.shape[1]))
            rows.append(dict(d=d, window=w, block=block, keys=band.shape[1], kernel_float32=float32,
                             bf16_ms=t["bf16"] * 1e3, kernel_ms=t["kernel"] * 1e3,
                             speedup=t["bf16"] / t["kernel"]))  # fmt: skip
            print(f"  d={d} window={w} ({band.shape[1]} keys a block): bf16 tiles "
                  f"{t['bf16'] * 1e3:.1f} ms, kernel ({'float32' if float32 else 'bf16'}) "
                  f"{t['kernel'] * 1e3:.1f} ms, x{t['bf16'] / t['kernel']:.2f}", flush=True)  # fmt: skip
    return rows


def lowp_reference(lengths, dims=(28, 32, 64), heads=4, tokens=1 << 18):
    """Forward + backward under bf16 autocast of ``(b, heads, n, d)`` inputs (``b * heads * n *
    d = tokens``) with ``n * d <= CPU_LOWP_FLOAT32_MAX_WORK``: :class:`SDPABackend` (the
    float32 kernel there, what ``auto`` picks) against :class:`ReferenceBackend` (bf16 matrix
    products, float32 softmax), interleaved; no mask, a key-padding mask (half the batch
    without its last quarter), and an additive ``(1, heads, n, n)`` bias with a gradient."""
    from attnlab.backends.sdpa import CPU_LOWP_FLOAT32_MAX_WORK

    rows = []
    for d in dims:
        for n in (n for n in lengths if n * d <= CPU_LOWP_FLOAT32_MAX_WORK):
            b = max(1, tokens // (heads * n * d))
            x = [torch.randn(b, heads, n, d, requires_grad=True) for _ in range(3)]
            pad = torch.ones(b, 1, 1, n, dtype=torch.bool)
            pad[: b // 2, ..., n * 3 // 4 :] = False
            bias = torch.randn(1, heads, n, n, requires_grad=True)
            for kind, mask, add in (("none", None, None), ("padding", pad, None),
                                    ("bias", None, bias)):  # fmt: skip

                def step(backend, mask=mask, add=add):
                    with torch.autocast("cpu", torch.bfloat16):
                        q, k, v = (t * 1.0 for t in x)  # bf16 under autocast's matmuls
                        problem = Problem(q, k, v, ScaledDotScore(), SoftmaxNorm(), mask=mask,
                                          bias=add)  # fmt: skip
                        out = backend(problem)[0]
                    out.float().sum().backward()

                t = time_interleaved({"sdpa": lambda: step(SDPABackend()),
                                      "reference": lambda: step(ReferenceBackend())},
                                     rounds=3, min_time=0.2)  # fmt: skip
                rows.append(dict(d=d, n=n, batch=b, mask=kind, sdpa_ms=t["sdpa"] * 1e3,
                                 reference_ms=t["reference"] * 1e3,
                                 speedup=t["sdpa"] / t["reference"]))  # fmt: skip
                print(f"  d={d} n={n} {kind}: sdpa {t['sdpa'] * 1e3:.2f} ms, reference "
                      f"{t['reference'] * 1e3:.2f} ms, reference x{t['sdpa'] / t['reference']:.2f}",
                      flush=True)  # fmt: skip
    return rows


def _blocks_against(shape: dict, dtype: str, other: str, step) -> dict:
    """One row of sections 11 and 12: ``step(True)`` (the blocks) and ``step(False)`` (the
    ``other`` path) timed in turns, their speed ratio and, in fp32, each one's peak tensor
    memory; printed as it is measured."""
    t = time_interleaved({"blocks": lambda: step(True), other: lambda: step(False)},
                         rounds=3, min_time=0.3)  # fmt: skip
    row = dict(**shape, dtype=dtype, blocks_ms=t["blocks"] * 1e3, **{f"{other}_ms": t[other] * 1e3},
               speedup=t[other] / t["blocks"])  # fmt: skip
    memory = ""
    if dtype == "fp32":
        row["blocks_peak_mb"] = peak_tensor_bytes(lambda: step(True))[0] / 2**20
        row[f"{other}_peak_mb"] = peak_tensor_bytes(lambda: step(False))[0] / 2**20
        memory = f", peak {row['blocks_peak_mb']:.0f} vs {row[f'{other}_peak_mb']:.0f} MiB"
    sizes = " ".join(f"{k}={v}" for k, v in shape.items())
    print(f"  {sizes} {dtype}: blocks {row['blocks_ms']:.2f} ms, {other} {row[f'{other}_ms']:.2f} "
          f"ms, x{row['speedup']:.2f}{memory}", flush=True)  # fmt: skip
    return row


def dropout_blocks(shapes):
    """Forward + backward with attention dropout, ``(b, h, n, d)`` per row: the sdpa
    backend's eager path (blocks of queries) against its materialised path, interleaved, in
    fp32 and under bf16 autocast; and each one's peak tensor memory (fp32)."""
    from attnlab.backends.sdpa import _math_with_dropout

    rows = []
    for b, h, n, d in shapes:
        x = [torch.randn(b, h, n, d, requires_grad=True) for _ in range(3)]
        pad = torch.ones(b, 1, 1, n, dtype=torch.bool)
        pad[: b // 2, ..., n * 3 // 4 :] = False
        for dtype in ("fp32", "bf16"):

            def step(blocks, dtype=dtype):
                with torch.autocast("cpu", torch.bfloat16, enabled=dtype == "bf16"):
                    q, k, v = (t * 1.0 for t in x)
                    problem = Problem(q, k, v, ScaledDotScore(), SoftmaxNorm(), mask=pad,
                                      dropout=0.1)  # fmt: skip
                    out = _math_with_dropout(problem, blocks=blocks)
                out.float().sum().backward()

            rows.append(_blocks_against(dict(b=b, h=h, n=n, d=d), dtype, "materialised", step))
    return rows


def additive_blocks(shapes):
    """Forward + backward of the additive scores of ``(b, h, n, a)`` projected queries and keys:
    :func:`attnlab.additive_blocks.additive_scores` against the broadcast formula (the tanh
    tensor ``(b, h, n, n, a)`` materialised), interleaved, fp32 and under bf16 autocast (the
    inputs in bf16, as the projections give them there)."""
    from attnlab.additive_blocks import additive_scores

    def broadcast(qa, ka, w):
        hidden = torch.tanh(qa.unsqueeze(3) + ka.unsqueeze(2))
        return torch.einsum("bhija,ha->bhij", hidden, w.to(hidden.dtype))

    rows = []
    for b, h, n, a in shapes:
        for dtype in ("fp32", "bf16"):
            kind = torch.bfloat16 if dtype == "bf16" else torch.float32
            qa, ka = (torch.randn(b, h, n, a, dtype=kind, requires_grad=True) for _ in range(2))
            w = torch.randn(h, a, requires_grad=True)

            def step(blocks, dtype=dtype, qa=qa, ka=ka, w=w):
                with torch.autocast("cpu", torch.bfloat16, enabled=dtype == "bf16"):
                    out = (additive_scores if blocks else broadcast)(qa, ka, w)
                out.float().sum().backward()

            rows.append(_blocks_against(dict(b=b, h=h, n=n, a=a), dtype, "broadcast", step))
    return rows


#: the comparisons, in the order of the module docstring (``--only`` picks some)
SECTIONS = ("eval", "train", "dense", "local", "additive", "bf16", "loop", "lowp", "banded",
            "lowpref", "dropout", "addblocks")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    ap.add_argument("--out", default="results/bench_core.json")
    ap.add_argument("--only", nargs="*", default=None, help=" ".join(SECTIONS))
    args = ap.parse_args()
    only = set(args.only or SECTIONS)
    print(f"machine: {machine()}", flush=True)
    res: dict = {"machine": machine()}
    q = args.quick
    if "eval" in only:
        print("1. eval, no grad, fp32, dim 512, 8 heads", flush=True)
        res["eval"] = eval_speed([256, 1024] if q else [256, 1024, 4096])
    if "train" in only:
        print("2. training step", flush=True)
        res["train"] = train_speed(256 if q else 1024)
    if "dense" in only:
        print("3. dense exact attention vs matmul rate", flush=True)
        res["dense"] = dense_rate([1024] if q else [1024, 2048, 4096, 8192])
    if "local" in only:
        print("4. local(256) with flex", flush=True)
        res["local"] = local_flex(n=4096 if q else 16384)
    if "additive" in only:
        print("5. chunked additive attention", flush=True)
        res["additive"] = chunked_additive(max_ref_bytes=(1 << 30) if q else (12 << 30),
                                           big_n=2048 if q else 16384)  # fmt: skip
    if "bf16" in only:
        print("6. bf16 autocast vs fp32, whole layer", flush=True)
        res["bf16"] = bf16_speed([256] if q else [1024, 4096])
    if "loop" in only:
        print("7. local(256) loop: a new mask per call vs reused vs dense", flush=True)
        res["loop"] = bench_local_loop(n=4096 if q else 16384)
    if "lowp" in only:
        print("8. short sequences in bf16: flash kernel vs the sdpa backend", flush=True)
        res["lowp"] = lowp_sdpa([64, 512] if q else [16, 64, 128, 256, 512, 1024, 2048])
    if "banded" in only:
        print("9. the banded local kernel in bf16: bf16 tiles vs float32 tiles", flush=True)
        res["banded"] = lowp_banded([16, 64] if q else [8, 16, 32, 64, 128])
    if "lowpref" in only:
        print("10. short problems under bf16 autocast: sdpa (float32) vs reference", flush=True)
        res["lowpref"] = lowp_reference([12, 64] if q else [12, 49, 72, 128, 256])
    if "dropout" in only:
        print("11. attention dropout: queries in blocks vs the weights materialised", flush=True)
        res["dropout"] = dropout_blocks(
            [(64, 4, 64, 16), (2, 8, 2708, 8)] if q
            else [(64, 4, 64, 16), (16, 4, 256, 16), (4, 4, 1024, 16), (2, 4, 2048, 32),
                  (16, 8, 300, 64), (1, 8, 2708, 8)]
        )  # fmt: skip
    if "addblocks" in only:
        print("12. the additive score: queries in blocks vs one broadcast", flush=True)
        res["addblocks"] = additive_blocks(
            [(64, 4, 48, 16)] if q else [(64, 4, 48, 16), (32, 4, 128, 16), (8, 4, 512, 16),
                                         (16, 8, 128, 64)]
        )  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
