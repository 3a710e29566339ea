"""The efficient kernels against their peer packages: same function, checked equal, then timed.

Usage: python benchmarks/bench_peers.py [--quick] [--no-time] [--out results/bench_peers.json]

Needs the peer packages (benchmark-only, never runtime dependencies)::

    pip install performer-pytorch nystrom-attention linformer local-attention

For each kernel, the peer and attnlab get the SAME parameters (the random projection, the E/F
matrices) and the SAME already projected inputs, so both compute one function:

=========  ============================================  ======================================
kernel     peer                                          setting under which they agree
=========  ============================================  ======================================
performer  ``performer_pytorch.FastAttention``           same projection; the peer's ``eps``
                                                         set to 0 for the check
nystrom    ``nystrom_attention.NystromAttention``        ``residual=False``; the peer's pinv
                                                         scaled per matrix for the check
linformer  ``linformer.LinformerSelfAttention``          attnlab ``E = proj_k^T, F = proj_v^T``
local      ``local_attention.LocalAttention``            ``exact_windowsize=True``, one window
                                                         back and forward, no rotary
=========  ============================================  ======================================

Two peers differ in a detail no attnlab option reproduces; the check then runs the peer's own
code with that detail set to attnlab's (the closest setting) and also reports the difference
from the package as shipped, which is what is timed (the detail does not change the work done):

* performer-pytorch adds ``eps = 1e-4`` to every random feature, a bias on the softmax kernel
  estimate; the check calls its ``softmax_kernel`` with ``eps=0``.
* nystrom-attention scales the pseudo-inverse iteration's start by one norm over the whole
  batch (every head), attnlab by each matrix's own (Xiong et al. 2021, Eq. 15, per matrix); the
  check swaps in the per-matrix scale. With 6 iterations the two differ beyond rounding.

Only the attention maths is compared: the peers that own their projections (nystrom, linformer)
get the inputs through stand-in modules that return the given tensors, and their output
projection is the identity; attnlab's side does the same head split and merge around
``kernel(q, k, v, mask=None)``. Rows: b = 1, h = 8, d = 64, fp32, non-causal; ``ratio`` =
peer time / attnlab time (> 1: attnlab faster). Every row first checks, in float64, that the
outputs and the gradients with respect to q, k, v agree (the run stops if not), and reports the
float32 output difference too.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import torch
from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine  # noqa: E402

from attnlab.lab.bench import time_call  # noqa: E402
from attnlab.efficient import make_kernel  # noqa: E402

try:
    with warnings.catch_warnings():  # performer-pytorch imports distutils and torch.cuda.amp
        warnings.simplefilter("ignore")
        import linformer
        import local_attention
        import nystrom_attention.nystrom_attention as nystrom_mod
        import performer_pytorch.performer_pytorch as performer_mod
except ImportError as err:  # pragma: no cover - a setup error, said plainly
    sys.exit(
        f"bench_peers needs the peer packages ({err}); install them with\n"
        "  pip install performer-pytorch nystrom-attention linformer local-attention"
    )

BATCH, HEADS, HEAD_DIM = 1, 8, 64
DIM = HEADS * HEAD_DIM
#: options per kernel (the peers' defaults where attnlab has the option; local: bench_core's 256)
OPTIONS = {
    "performer": dict(features=256),
    "nystrom": dict(landmarks=256, pinv_iterations=6),
    "linformer": dict(k=256),
    "local": dict(window=256),
}
QUICK_OPTIONS = {
    "performer": dict(features=64),
    "nystrom": dict(landmarks=32, pinv_iterations=6),
    "linformer": dict(k=32),
    "local": dict(window=32),
}
F64_TOL = 1e-8  # float64 agreement required of outputs and gradients (inputs ~ N(0, 1))


@dataclass
class Case:
    """One kernel at one length and dtype: the peer as shipped (timed), the peer in the setting
    that matches attnlab (checked), attnlab's kernel, and the leaves gradients flow to."""

    peer: Callable[[], Tensor]
    peer_matched: Callable[[], Tensor]
    ours: Callable[[], Tensor]
    inputs: list[Tensor]  # q, k, v (or the fused qkv): compared gradients
    params: list[Tensor] = field(default_factory=list)  # trained parameters (grads cleared)


class Given(nn.Module):
    """Stand-in for a peer's projection: returns the given tensor whatever the input, so the
    peer's attention maths runs on exactly the inputs attnlab's kernel gets."""

    def __init__(self, t: Tensor) -> None:
        super().__init__()
        self.t = t

    def forward(self, x: Tensor) -> Tensor:
        return self.t


def _leaves(*shapes: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> list[Tensor]:
    return [torch.randn(s, generator=gen, dtype=dtype).requires_grad_() for s in shapes]


def _split(t: Tensor) -> Tensor:
    """``(b, n, h d) -> (b, h, n, d)``, as both peers with projections do."""
    b, n, _ = t.shape
    return t.view(b, n, HEADS, HEAD_DIM).transpose(1, 2)  # (b, h, n, d)


def _merge(t: Tensor) -> Tensor:
    """``(b, h, n, d) -> (b, n, h d)``."""
    b, _, n, _ = t.shape
    return t.transpose(1, 2).reshape(b, n, HEADS * HEAD_DIM)  # (b, n, h d)


# ---- the four pairs ----------------------------------------------------------------------------
def performer_case(n: int, dtype: torch.dtype, gen: torch.Generator, opts: dict) -> Case:
    peer = performer_mod.FastAttention(dim_heads=HEAD_DIM, nb_features=opts["features"])
    ours = make_kernel("performer", dim=DIM, heads=HEADS, redraw=False, **opts)
    with torch.no_grad():
        ours.projection.copy_(peer.projection_matrix)
    peer, ours = peer.to(dtype), ours.to(dtype)
    q, k, v = _leaves(*[(BATCH, HEADS, n, HEAD_DIM)] * 3, dtype=dtype, gen=gen)

    def matched() -> Tensor:  # FastAttention.forward with the feature eps set to 0
        kernel = performer_mod.softmax_kernel
        phi_q = kernel(q, projection_matrix=peer.projection_matrix, is_query=True, eps=0.0)
        phi_k = kernel(k, projection_matrix=peer.projection_matrix, is_query=False, eps=0.0)
        return performer_mod.linear_attention(phi_q, phi_k, v)

    return Case(lambda: peer(q, k, v), matched, lambda: ours(q, k, v, mask=None), [q, k, v])


def _pinv_per_matrix(x: Tensor, iters: int = 6) -> Tensor:
    """nystrom-attention's ``moore_penrose_iter_pinv`` with each matrix's own start scale."""
    abs_x = x.abs()
    col = abs_x.sum(-1).amax(-1, keepdim=True).unsqueeze(-1)  # (..., 1, 1)
    row = abs_x.sum(-2).amax(-1, keepdim=True).unsqueeze(-1)
    z = x.transpose(-2, -1) / (col * row)
    eye = torch.eye(x.shape[-1], device=x.device, dtype=x.dtype)
    for _ in range(iters):
        xz = x @ z
        z = 0.25 * z @ (13 * eye - (xz @ (15 * eye - (xz @ (7 * eye - xz)))))
    return z


def nystrom_case(n: int, dtype: torch.dtype, gen: torch.Generator, opts: dict) -> Case:
    m = opts["landmarks"]
    if n % m:
        raise ValueError(f"nystrom: n={n} must be a multiple of landmarks={m} (equal segments)")
    peer = nystrom_mod.NystromAttention(
        dim=DIM, dim_head=HEAD_DIM, heads=HEADS, num_landmarks=m,
        pinv_iterations=opts["pinv_iterations"], residual=False,
    )  # fmt: skip
    ours = make_kernel("nystrom", dim=DIM, heads=HEADS, **opts)
    (qkv,) = _leaves((BATCH, n, 3 * DIM), dtype=dtype, gen=gen)
    peer.to_qkv, peer.to_out = Given(qkv), nn.Identity()
    x = torch.empty(BATCH, n, DIM, dtype=dtype)  # only its shape is read

    def matched() -> Tensor:
        with mock.patch.object(nystrom_mod, "moore_penrose_iter_pinv", _pinv_per_matrix):
            return peer(x)

    def attnlab() -> Tensor:
        q, k, v = (_split(t) for t in qkv.chunk(3, dim=-1))  # (b, h, n, d) each
        return _merge(ours(q, k, v, mask=None))

    return Case(lambda: peer(x), matched, attnlab, [qkv])


def linformer_case(n: int, dtype: torch.dtype, gen: torch.Generator, opts: dict) -> Case:
    peer = linformer.LinformerSelfAttention(dim=DIM, seq_len=n, k=opts["k"], heads=HEADS)
    ours = make_kernel("linformer", dim=DIM, heads=HEADS, k=opts["k"], max_len=n)
    with torch.no_grad():  # the peer keeps (L, k), attnlab (k, L)
        ours.e_proj.copy_(peer.proj_k.T)
        ours.f_proj.copy_(peer.proj_v.T)
    peer, ours = peer.to(dtype), ours.to(dtype)
    q, k, v = _leaves(*[(BATCH, n, DIM)] * 3, dtype=dtype, gen=gen)
    peer.to_q, peer.to_k, peer.to_v, peer.to_out = Given(q), Given(k), Given(v), nn.Identity()
    x = torch.empty(BATCH, n, DIM, dtype=dtype)  # only its shape is read

    def attnlab() -> Tensor:
        return _merge(ours(_split(q), _split(k), _split(v), mask=None))

    params = [peer.proj_k, peer.proj_v, ours.e_proj, ours.f_proj]
    return Case(lambda: peer(x), lambda: peer(x), attnlab, [q, k, v], params)


def local_case(n: int, dtype: torch.dtype, gen: torch.Generator, opts: dict) -> Case:
    w = opts["window"]
    if n % w:
        raise ValueError(f"local: n={n} must be a multiple of window={w} (local-attention's rule)")
    # keys at |i - j| <= w: one window back and one forward, cut to the exact radius
    peer = local_attention.LocalAttention(
        window_size=w, causal=False, look_backward=1, look_forward=1, exact_windowsize=True,
    )  # fmt: skip
    ours = make_kernel("local", dim=DIM, heads=HEADS, window=w)
    q, k, v = _leaves(*[(BATCH, HEADS, n, HEAD_DIM)] * 3, dtype=dtype, gen=gen)
    return Case(
        lambda: peer(q, k, v), lambda: peer(q, k, v), lambda: ours(q, k, v, mask=None), [q, k, v]
    )


CASES = {
    "performer": (performer_case, "eps=0 checked; shipped eps=1e-4 timed"),
    "nystrom": (nystrom_case, "pinv scale per matrix checked; shipped batch-wide scale timed"),
    "linformer": (linformer_case, "E, F copied"),
    "local": (local_case, "exact_windowsize=True, look 1 back/1 forward"),
}


# ---- check and time ----------------------------------------------------------------------------
def _out_and_grads(fn: Callable[[], Tensor], inputs: list[Tensor]) -> tuple[Tensor, list[Tensor]]:
    out = fn()
    g = torch.ones_like(out) / math.sqrt(out.numel())  # any fixed cotangent
    return out.detach(), list(torch.autograd.grad(out, inputs, g))


def _maxdiff(a: Tensor, b: Tensor) -> float:
    return (a.double() - b.double()).abs().max().item()


def check(name: str, n: int, opts: dict) -> dict:
    """float64: outputs and input gradients of attnlab vs the matched peer (must agree), and the
    output difference from the peer as shipped; float32: the output difference."""
    build = CASES[name][0]
    c = build(n, torch.float64, torch.Generator().manual_seed(n), opts)
    out, grads = _out_and_grads(c.ours, c.inputs)
    out_p, grads_p = _out_and_grads(c.peer_matched, c.inputs)
    d_out = _maxdiff(out, out_p)
    d_grad = max(_maxdiff(a, b) for a, b in zip(grads, grads_p))
    with torch.no_grad():
        d_shipped = _maxdiff(out, c.peer())
    c32 = build(n, torch.float32, torch.Generator().manual_seed(n), opts)
    with torch.no_grad():
        d_f32 = _maxdiff(c32.ours(), c32.peer_matched())
    ok = d_out <= F64_TOL and d_grad <= F64_TOL
    return dict(f64_out=d_out, f64_grad=d_grad, f64_vs_shipped=d_shipped, f32_out=d_f32, ok=ok)


def timings(name: str, n: int, opts: dict, *, min_time: float, repeats: int) -> dict:
    """fp32 seconds per call, forward (no grad) and forward + backward, peer and attnlab."""
    c = CASES[name][0](n, torch.float32, torch.Generator().manual_seed(n), opts)

    def fwd(fn: Callable[[], Tensor]) -> Callable[[], None]:
        def run() -> None:
            with torch.no_grad():
                fn()

        return run

    def step(fn: Callable[[], Tensor]) -> Callable[[], None]:
        def run() -> None:
            for t in c.inputs + c.params:
                t.grad = None
            fn().sum().backward()

        return run

    res = {}
    for mode, wrap in (("fwd", fwd), ("fwd_bwd", step)):
        t_peer = time_call(wrap(c.peer), repeats=repeats, min_time=min_time)
        t_ours = time_call(wrap(c.ours), repeats=repeats, min_time=min_time)
        res[mode] = dict(peer_ms=t_peer * 1e3, attnlab_ms=t_ours * 1e3, ratio=t_peer / t_ours)
    return res


def table(rows: list[dict], timed: bool) -> str:
    head = "| kernel | options | n | f64 max abs diff out / grad | vs shipped peer | f32 out |"
    sep = "|---|---|---:|---|---:|---:|"
    if timed:
        head += " fwd peer / attnlab ms | fwd ratio | fwd+bwd peer / attnlab ms | fwd+bwd ratio |"
        sep += "---|---:|---|---:|"
    lines = [head + " setting |", sep + "---|"]
    for r in rows:
        opts = ", ".join(f"{k}={v}" for k, v in r["options"].items())
        c = r["check"]
        line = (
            f"| {r['kernel']} | {opts} | {r['n']} | {c['f64_out']:.1e} / {c['f64_grad']:.1e} | "
            f"{c['f64_vs_shipped']:.1e} | {c['f32_out']:.1e} |"
        )
        if timed and "time" in r:
            f, s = r["time"]["fwd"], r["time"]["fwd_bwd"]
            line += (
                f" {f['peer_ms']:.1f} / {f['attnlab_ms']:.1f} | {f['ratio']:.2f} |"
                f" {s['peer_ms']:.1f} / {s['attnlab_ms']:.1f} | {s['ratio']:.2f} |"
            )
        elif timed:
            line += " - | - | - | - |"  # not equal: not timed
        lines.append(line + f" {r['setting']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes and options (a smoke run)")
    ap.add_argument("--no-time", action="store_true", help="equality checks only, no timing")
    ap.add_argument("--only", nargs="*", default=None, choices=list(CASES), help="kernels to run")
    ap.add_argument("--lengths", nargs="*", type=int, default=None, help="default 1024 4096")
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds measured per timing")
    ap.add_argument("--out", default="results/bench_peers.json")
    args = ap.parse_args()
    lengths = args.lengths or ([128, 256] if args.quick else [1024, 4096])
    options = QUICK_OPTIONS if args.quick else OPTIONS
    timed = not args.no_time
    print(f"machine: {machine()}", flush=True)
    res: dict = dict(machine=machine(), batch=BATCH, heads=HEADS, head_dim=HEAD_DIM,
                     dtype="float32", f64_tolerance=F64_TOL, rows=[])  # fmt: skip
    failed = []
    for name in args.only or list(CASES):
        for n in lengths:
            opts = options[name]
            row = dict(kernel=name, n=n, options=opts, setting=CASES[name][1])
            row["check"] = c = check(name, n, opts)
            print(f"  {name:9s} n={n:5d}: f64 out {c['f64_out']:.1e}, grad {c['f64_grad']:.1e}, "
                  f"vs shipped {c['f64_vs_shipped']:.1e}; f32 out {c['f32_out']:.1e}"
                  + ("" if c["ok"] else "  <-- NOT EQUAL"), flush=True)  # fmt: skip
            if not c["ok"]:
                failed.append(f"{name} n={n}")
            elif timed:
                row["time"] = t = timings(
                    name, n, opts, min_time=0 if args.quick else args.min_time, repeats=2
                )
                print(f"    fwd x{t['fwd']['ratio']:.2f} ({t['fwd']['peer_ms']:.1f} vs "
                      f"{t['fwd']['attnlab_ms']:.1f} ms), fwd+bwd x{t['fwd_bwd']['ratio']:.2f} "
                      f"({t['fwd_bwd']['peer_ms']:.1f} vs {t['fwd_bwd']['attnlab_ms']:.1f} ms)",
                      flush=True)  # fmt: skip
            res["rows"].append(row)
    print()
    print(table(res["rows"], timed))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    print(f"wrote {out}")
    if failed:
        sys.exit(f"not equal to the peer (float64, tol {F64_TOL:g}): {', '.join(failed)}")


if __name__ == "__main__":
    main()
