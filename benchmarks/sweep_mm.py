"""Sweep of the GEMM kernel's settings (``mm`` in runtime/configs/sm90.json) on the prefill shapes of Llama-3-8B.

For bf16 ``linear(x [2048, K], w [N, K])`` (the weight read transposed in place, as a model runner calls it) at
the runner's four prefill projections, and ``mm`` at 4096^3 and 8192^3 (both operands row-major), each variant's
settings are laid over the table's rule (:func:`nbxtensor.runtime.configs.override`) and timed with CUDA events
(harness.run_benchmark: the median of ``--reps`` runs after warm-up; compute-bound shapes, no L2 flush). Every variant's output is compared
with the table's (the same products: the same bits are expected; the largest difference is printed). Prints
TFLOP/s (``2 M N K`` over the median) per variant and shape; ``--variants`` picks among them by name.

    PYTHONPATH=src python3 benchmarks/sweep_mm.py [--variants "table,tma"] [--reps 20]

Measured (H200, session 11; no flush, so above bench_ops' numbers; runs differ by up to 6 %): with a K-major B
the table's old tiles (128x256x64 w8 s3, pointer loads) ran 464-566 TFLOP/s on the four 2048-row prefill linears
and 270 at 512 rows; the rules now in sm90.json: 128x128x64 w8 s4 up to 1024 rows (539 at 512), 256x128x64 w8 s3
with pointer loads up to 4096 rows, N <= 8192 and K <= 8192 (qkv 568, o 525-544), else the descriptor variant
256x128x64 w8 s4 (gate_up 649-692, down 601-695, o at 8192 rows 627-650). The descriptor variant is slower where
B is N-major (4096^3: 488-597 against 642-707), so those rules stay. Tried and removed: Triton's warp
specialization of the K loop (``tl.range(..., warp_specialize=True)``) with the descriptor loads: with 4 warps
(the only count Triton 3.6 specializes) the products were wrong (max differences 9-700), with 8 it is the
plain loop.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402

SHAPES = [("linear qkv 2048x6144x4096", 2048, 6144, 4096, True), ("linear o 2048x4096x4096", 2048, 4096, 4096, True),
          ("linear gate_up 2048x28672x4096", 2048, 28672, 4096, True),
          ("linear down 2048x4096x14336", 2048, 4096, 14336, True), ("linear o 8192x4096x4096", 8192, 4096, 4096, True),
          ("linear down 512x4096x14336", 512, 4096, 14336, True), ("mm 4096^3", 4096, 4096, 4096, False),
          ("mm 8192^3", 8192, 8192, 8192, False)]


def _t(bm, bn, bk, w, s, **kw):
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=w, num_stages=s, **kw)


VARIANTS = {
    "table": {},
    "tma": {"TMA": True},
    "tma 128x256x64 w8 s4": _t(128, 256, 64, 8, 4, TMA=True),
    "tma 128x128x64 w8 s4": _t(128, 128, 64, 8, 4, TMA=True),
    "tma 128x128x64 w4 s4": _t(128, 128, 64, 4, 4, TMA=True),
    "tma 128x256x64 w8 s3 g16": _t(128, 256, 64, 8, 3, TMA=True, GROUP_M=16),
    "tma 256x128x64 w8 s3": _t(256, 128, 64, 8, 3, TMA=True),
    "128x256x64 w8 s4": _t(128, 256, 64, 8, 4),
    "128x128x64 w8 s4": _t(128, 128, 64, 8, 4),
    "128x128x64 w8 s3": _t(128, 128, 64, 8, 3),
    "128x128x64 w8 s5": _t(128, 128, 64, 8, 5),
    "256x128x64 w8 s3": _t(256, 128, 64, 8, 3),
    "128x128x128 w8 s3": _t(128, 128, 128, 8, 3),
    "tma 256x128x64 w8 s4": _t(256, 128, 64, 8, 4, TMA=True),
    "tma 128x128x64 w8 s5": _t(128, 128, 64, 8, 5, TMA=True),
    "tma 256x128x64 w8 s3 g4": _t(256, 128, 64, 8, 3, TMA=True, GROUP_M=4),
    "tma 128x256x64 w8 s3": _t(128, 256, 64, 8, 3, TMA=True),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    import numpy as np

    import nbxtensor as nbx
    import nbxtensor.nn.functional as F
    from nbxtensor.runtime import configs
    names = [v for v in a.variants.split(",") if v]
    clock = H.EventClock(lambda: nbx.cuda.Event(enable_timing=True), nbx.cuda.synchronize, lambda: None)
    print(f"{'variant':28s} " + " ".join(f"{s[0]:>31s}" for s in SHAPES))
    res = {n: [] for n in names}
    for label, M, N, K, lin in SHAPES:
        g = nbx.Generator("cuda").manual_seed(M + N + K)
        x = nbx.randn(M, K, generator=g, device="cuda").to(nbx.bfloat16)
        w = (nbx.randn(N, K, generator=g, device="cuda") * 0.02).to(nbx.bfloat16) if lin else \
            nbx.randn(K, N, generator=g, device="cuda").to(nbx.bfloat16)
        fn = (lambda: F.linear(x, w)) if lin else (lambda: nbx.mm(x, w))
        ref = None
        for name in names:
            try:
                with configs.override("mm", **VARIANTS[name]) if VARIANTS[name] else contextlib.nullcontext():
                    out = fn()
                    nbx.cuda.synchronize()
                    o = out.float().cpu().numpy()
                    ref = o if ref is None else ref
                    diff = float(np.max(np.abs(o - ref)))
                    ts = H.run_benchmark(fn, clock, H.TimingConfig(min_reps=a.reps, max_reps=a.reps))
                ms = statistics.median(ts)
                res[name].append(f"{2 * M * N * K / ms / 1e9:7.1f} TFLOP/s d={diff:.0e}")
            except Exception as err:  # noqa: BLE001 - a variant that fails is reported and the sweep goes on
                res[name].append(f"{type(err).__name__}: {str(err)[:20]}")
        del x, w
    for name in names:
        print(f"{name:28s} " + " ".join(f"{c:>31s}" for c in res[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
