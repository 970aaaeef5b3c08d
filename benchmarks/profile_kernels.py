"""Run a few bandwidth-bound kernels a handful of times each, for a profiler (Nsight Compute) to inspect.

Each case is built once, run once to compile, then run ``--reps`` times. Under ``ncu`` the kernels of interest
can be picked with ``-k regex:...``. Cases: ``gemv`` (bf16 1x4096->14336 and 1x14336->4096), ``int4`` (Q4_1-style
4096x14336, the table kernel, the WORD_DECODE kernel and the tensor-core kernel TC), ``decode`` (decode attention, bf16, head dim 128, 32
query heads over 4 kv heads, batch 8, 32k context), ``decode1`` (the same at batch 1 over 4 kv heads, 4k and 32k), ``argmax`` (max with indices over rows of 8192 bf16),
``cols`` (sum over dim 0 of 32768x8192 bf16), ``layer_norm`` (bf16 32768x8192).

    ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \\
        python3 benchmarks/profile_kernels.py int4
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

import numpy as np  # noqa: E402

import nbxtensor as nbx  # noqa: E402
from nbxtensor.runtime.configs import override  # noqa: E402


def cases(dev: str) -> dict:
    F = nbx.nn.functional
    rng = np.random.default_rng(0)
    bf = nbx.bfloat16
    out = {}

    def gemv():
        x1, x2 = nbx.randn(1, 4096, dtype=bf, device=dev), nbx.randn(1, 14336, dtype=bf, device=dev)
        w1 = (nbx.randn(14336, 4096, device=dev) * 0.02).to(bf)
        w2 = (nbx.randn(4096, 14336, device=dev) * 0.02).to(bf)
        return [lambda: F.linear(x1, w1), lambda: F.linear(x2, w2)]

    def int4():
        from nbxtensor.quant import int4_linear
        N, K = 4096, 14336
        q = nbx.tensor(rng.integers(0, 256, (N, K // 2), dtype=np.uint8), device=dev)
        s = nbx.tensor((rng.random((N, K // 32)) * 0.01).astype(np.float16), device=dev)
        mn = nbx.tensor((-rng.random((N, K // 32)) * 0.08).astype(np.float16), device=dev)
        x = nbx.randn(1, K, dtype=bf, device=dev)

        def word():
            with override("int4_gemv", WORD_DECODE=True, BLOCK_N=16, BLOCK_K=1024, num_warps=4,
                          EVICT_W="evict_first"):
                return int4_linear(x, q, s, mn, group_size=32)
        def tc():
            with override("int4_gemv", TC=True, BLOCK_N=64, TC_COLS=8, num_warps=4, num_stages=2, programs_per_sm=4):
                return int4_linear(x, q, s, mn, group_size=32)
        return [lambda: int4_linear(x, q, s, mn, group_size=32), word, tc]

    def decode():
        B, Hq, Hk, L, D = 8, 32, 4, 32768, 128
        q = nbx.randn(B, Hq, 1, D, dtype=bf, device=dev)
        k = nbx.randn(B, Hk, L, D, dtype=bf, device=dev)
        v = nbx.randn(B, Hk, L, D, dtype=bf, device=dev)
        return [lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)]

    def decode1():  # batch 1 (GQA 8) at 4k and 32k: the split and combine kernels of one decode step each
        calls = []
        for L in (4096, 32768):
            q = nbx.randn(1, 32, 1, 128, dtype=bf, device=dev)
            k = nbx.randn(1, 4, L, 128, dtype=bf, device=dev)
            v = nbx.randn(1, 4, L, 128, dtype=bf, device=dev)
            calls.append(lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        return calls

    def rows():
        return nbx.randn(32768, 8192, dtype=bf, device=dev)

    out["gemv"] = gemv
    out["int4"] = int4
    out["decode1"] = decode1
    out["decode"] = decode
    out["argmax"] = lambda: (lambda x: [lambda: nbx.max(x, -1)])(rows())
    out["cols"] = lambda: (lambda x: [lambda: nbx.sum(x, 0)])(rows())
    out["layer_norm"] = lambda: (lambda x, w, b: [lambda: F.layer_norm(x, [8192], w, b)])(
        rows(), nbx.randn(8192, dtype=bf, device=dev), nbx.randn(8192, dtype=bf, device=dev))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="cases to run (default: all)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    table = cases(a.device)
    for name in a.names or list(table):
        for fn in table[name]():
            fn()
            nbx.cuda.synchronize()
            for _ in range(a.reps):
                fn()
            nbx.cuda.synchronize()
        print(f"{name}: ran", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
