"""Probe: an int4 GEMV on the tensor cores written in Gluon (Triton's explicit-layout dialect), for issue 6.

Why: the Triton GEMVs spend 7-12 SASS instructions per packed byte (ncu on the H200: the table kernel issues on
62 % of cycles at 22 % occupancy), and the tensor-core kernel written with ``tl.dot`` (quant/int4_tc.py) routes
the decoded operand through shared memory (ncu: L1/TEX 80 % busy, DRAM 19 %). Gluon places tensors in layouts
of one's choosing, so here the packed bytes are loaded straight into the registers of ``mma.sync``'s A operand:

- each lane loads 32 contiguous bytes of two weight rows (two 16-byte loads per row), decodes them in inline PTX
  (2 ``prmt`` + 2 ``shr`` + 4 ``lop3`` per 4 bytes, codes as the bfloat16 values 128 + q) and the dot's K order
  is chosen so that every mma register is one decode output register: K index of (byte 4u + v of the lane's 32,
  nibble h) = 16 (2u + h) + 8 (v // 2) + 2 t + v % 2. ``gl.join`` / ``gl.reshape`` / ``gl.permute`` then give
  the A operand's layout with a trivial conversion (``convert_layout(..., assert_trivial=True)``);
- the B operand is x arranged block-diagonally (one column per group of a chunk of 8 groups: the same K order),
  so each chunk's product is every row's per-group dot product and the group scales and minima apply to it
  elementwise, as in int4_tc.py;
- split-K by programs, partial rows added with float32 atomics (the probe's output; a library kernel would use
  the deterministic ``_split_k_finish``).

Measured (H200, 2026-11-30, this script; L2 flushed clean; GB/s of packed weight, float16 scales and minima, x
and out; the table kernel in the same run): correct to the table within bfloat16 rounding, but slower. Best
variant ``NW=4 MT=2`` (128 rows per program, 8 splits): 14336x4096 26.9 us (28.4 % of 4.8 TB/s; table 21.2 us,
36.1 %), 4096x14336 26.8 us (28.5 %; table 23.6 us, 32.4 %), 4096x4096 11.8 us (18.5 %; table 10.6 us), 6144x4096
18.4 us (17.8 %; table 12.2 us). Prefetching the next chunk in registers was slower (``PF``: spills), and so was a
ring of ``ST`` shared-memory stages filled by cp.async (``ST`` 3: 14336x4096 28.9-32.4 us; more stages slower
still: with 2-4 chunks per program the ring's prologue re-reads clamped chunks). sm_90 compiles: 3.7-4.8 loop
instructions per packed byte, 96-128 registers, no operand traffic through shared memory; each chunk's
dependent loads (bytes, x, scales) are serialised, so the kernel waits on memory latency rather than issue.
What it would take: programs with long K ranges and a deep masked (not clamped) cp.async ring for the bytes,
x and the scales alike, and a deterministic split-K finish.

    PYTHONPATH=src python3 benchmarks/probe_int4_gluon.py          # on a CUDA machine

Gluon kernels do not run under Triton's interpreter; ``tests/benchmarks/test_probe_int4_gluon.py`` compiles this
one for sm_90 on a CPU machine and checks the trivial conversion and the absence of shared memory in its loop.
"""
from __future__ import annotations

import os
import sys

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp
from triton.experimental.gluon.language.nvidia.ampere import mma_v2

@gluon.jit
def _decode(b, MAGIC):
    lo, hi = gl.inline_asm_elementwise(
        "{ .reg .b32 t0, t1, u0, u1, z; mov.b32 z, 0; "
        "prmt.b32 t0, $4, z, 0x4140; prmt.b32 t1, $4, z, 0x4342; "
        "lop3.b32 $0, t0, 0x000F000F, $5, 0xEA; lop3.b32 $1, t1, 0x000F000F, $5, 0xEA; "
        "shr.u32 u0, t0, 4; shr.u32 u1, t1, 4; "
        "lop3.b32 $2, u0, 0x000F000F, $5, 0xEA; lop3.b32 $3, u1, 0x000F000F, $5, 0xEA; }",
        "=r,=r,=r,=r,r,r,r,r,r", [b, gl.full(b.shape, MAGIC, gl.int32, b.type.layout)],
        dtype=(gl.bfloat16, gl.bfloat16), is_pure=True, pack=4)
    return lo, hi


@gluon.jit
def _fold_chunk(acc, b, xb, xs, s, mn, zero, MAGIC, MT: gl.constexpr, NW: gl.constexpr, dot_a: gl.constexpr,
                mma: gl.constexpr):
    # one chunk of 8 groups: the packed bytes b decoded into mma.sync's A operand (a trivial layout conversion:
    # the K order of the module docstring), times the block-diagonal x operand xb, group scales s and minima mn
    # applied to the per-group products, xs the chunk's x as [8 groups, 32]; codes decode as 128 + q (bfloat16)
    lo, hi = _decode(b, MAGIC)
    a = gl.join(lo, hi)                                        # [MT, NW, 2, 8, 4 t, 32 j, 2 h]
    a = gl.reshape(a, [MT, NW, 2, 8, 4, 8, 2, 2, 2])           # j = 4 u + 2 v1 + v0: [.., t, u, v1, v0, h]
    a = gl.permute(a, [0, 1, 2, 3, 5, 8, 6, 4, 7])             # [i, w, hf, g, u, h, v1, t, v0]
    a = gl.reshape(a, [MT * NW * 16, 256])
    a = gl.convert_layout(a, dot_a, assert_trivial=True)
    d = mma_v2(a, xb, zero)
    xg = gl.convert_layout(gl.sum(xs.to(gl.float32), axis=1), gl.SliceLayout(0, mma))
    s32 = s.to(gl.float32)
    return acc + s32 * d + (mn.to(gl.float32) - 128.0 * s32) * xg[None, :]


@gluon.jit
def g4_kernel(X, W, S, MN, OUT, N, NG, swn, ssn, MAGIC, G_SPLIT,
              NW: gl.constexpr, MT: gl.constexpr, PF: gl.constexpr, SPLIT: gl.constexpr, ST: gl.constexpr = 0):
    # rows of this program: R = MT * NW * 16; chunk = 8 groups = 256 codes = 128 bytes per row
    R: gl.constexpr = MT * NW * 16
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[NW, 1], instr_shape=[16, 8])
    dot_a: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    dot_b: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2)
    # byte tile [MT, NW, 2 (hf), 8 (g), 4 (t), 32 (j)]: row = i*16*NW + 16*w + 8*hf + g, byte = 32*t + j, j = 4u + v
    lb: gl.constexpr = gl.BlockedLayout(size_per_thread=[MT, 1, 2, 1, 1, 32], threads_per_warp=[1, 1, 1, 8, 4, 1],
                                        warps_per_cta=[1, NW, 1, 1, 1, 1], order=[5, 4, 3, 2, 1, 0])
    pid = gl.program_id(0)
    l5: gl.constexpr = gl.SliceLayout(5, lb)
    i_ = gl.arange(0, MT, layout=gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, l5)))))
    w_ = gl.arange(0, NW, layout=gl.SliceLayout(0, gl.SliceLayout(2, gl.SliceLayout(3, gl.SliceLayout(4, l5)))))
    h_ = gl.arange(0, 2, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(3, gl.SliceLayout(4, l5)))))
    g_ = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(4, l5)))))
    t_ = gl.arange(0, 4, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3, l5)))))
    j_ = gl.arange(0, 32, layout=gl.SliceLayout(0, gl.SliceLayout(1, gl.SliceLayout(2, gl.SliceLayout(3,
                                                                                  gl.SliceLayout(4, lb))))))
    row5 = (i_[:, None, None, None, None] * (16 * NW) + w_[None, :, None, None, None] * 16
            + h_[None, None, :, None, None] * 8 + g_[None, None, None, :, None]
            + t_[None, None, None, None, :] * 0)
    rows = pid * R + row5
    rows = gl.minimum(rows, N - 1).to(gl.int64)
    boff = (t_ * 32)[None, None, None, None, :]
    base5 = rows * swn + boff
    ptr6 = W + base5[:, :, :, :, :, None] + j_[None, None, None, None, None, :]
    # A's k for (byte j = 4u + v of lane t's 32, nibble h): k = 16 (2u + h) + 8 (v // 2) + 2 t + v % 2, so each
    # mma register (k 2t, 2t+1) is one decode output register (the low or high nibbles of bytes 4u+2p, 4u+2p+1)
    # B operand: x index of k: byte = 32 t + 4 u + v, group = byte // 16, code = byte % 16 + 16 h
    kk = gl.arange(0, 256, layout=gl.SliceLayout(1, dot_b))
    cc = gl.arange(0, 8, layout=gl.SliceLayout(0, dot_b))
    s_k = kk // 16
    u_k = s_k // 2
    h_k = s_k % 2
    v_k = ((kk // 8) % 2) * 2 + kk % 2
    t_k = (kk // 2) % 4
    byte = 32 * t_k + 4 * u_k + v_k
    grp = byte // 16
    xi = grp * 32 + byte % 16 + 16 * h_k
    bmask = grp[:, None] == cc[None, :]
    xptr = X + xi[:, None] + cc[None, :] * 0
    # group sums of x: [8, 32] blocked
    lx: gl.constexpr = gl.BlockedLayout(size_per_thread=[1, 8 // NW], threads_per_warp=[8, 4],
                                        warps_per_cta=[1, NW], order=[1, 0])
    xr = gl.arange(0, 8, layout=gl.SliceLayout(1, lx))
    xc = gl.arange(0, 32, layout=gl.SliceLayout(0, lx))
    xgp = X + xr[:, None] * 32 + xc[None, :]
    # scales in the mma layout [R, 8]
    rr = gl.arange(0, R, layout=gl.SliceLayout(1, mma))
    sc = gl.arange(0, 8, layout=gl.SliceLayout(0, mma))
    srow = gl.minimum(pid * R + rr, N - 1).to(gl.int64)
    sptr = S + srow[:, None] * ssn + sc[None, :]
    mptr = MN + srow[:, None] * ssn + sc[None, :]
    acc = gl.zeros([R, 8], gl.float32, mma)
    zero = gl.zeros([R, 8], gl.float32, mma)
    g_lo = gl.program_id(1) * G_SPLIT
    g_hi = gl.minimum(g_lo + G_SPLIT, NG)
    if ST > 0:
        # the packed bytes through a ring of ST shared-memory stages filled by cp.async, ST - 1 chunks ahead; each
        # lane copies and later reads back its own bytes (no barrier needed)
        sl: gl.constexpr = gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[5, 4, 3, 2, 1, 0])
        ring = gl.allocate_shared_memory(gl.uint8, [ST, MT, NW, 2, 8, 4, 32], sl)
        for st in gl.static_range(ST - 1):
            gc = gl.minimum(g_lo + st * 8, g_hi - 8)
            cp.async_copy_global_to_shared(ring.index(st), ptr6 + gc * 16)
            cp.commit_group()
        i = 0
        for g0 in range(g_lo, g_hi, 8):
            gc = gl.minimum(g0 + (ST - 1) * 8, g_hi - 8)
            cp.async_copy_global_to_shared(ring.index((i + ST - 1) % ST), ptr6 + gc * 16)
            cp.commit_group()
            xb = gl.load(xptr + g0 * 32, mask=bmask, other=0.0)
            xs = gl.load(xgp + g0 * 32).to(gl.float32)
            s32 = gl.load(sptr + g0).to(gl.float32)
            mn = gl.load(mptr + g0).to(gl.float32)
            cp.wait_group(ST - 1)
            b = ring.index(i % ST).load(lb)
            acc = _fold_chunk(acc, b, xb, xs, s32, mn, zero, MAGIC, MT, NW, dot_a, mma)
            i += 1
        cp.wait_group(0)
    elif PF:
        b = gl.load(ptr6 + g_lo * 16)
        xb = gl.load(xptr + g_lo * 32, mask=bmask, other=0.0)
        xs = gl.load(xgp + g_lo * 32)
        s = gl.load(sptr + g_lo)
        mn = gl.load(mptr + g_lo)
        for g0 in range(g_lo, g_hi, 8):
            gn = gl.minimum(g0 + 8, g_hi - 8)
            b_n = gl.load(ptr6 + gn * 16)
            xb_n = gl.load(xptr + gn * 32, mask=bmask, other=0.0)
            xs_n = gl.load(xgp + gn * 32)
            s_n = gl.load(sptr + gn)
            mn_n = gl.load(mptr + gn)
            acc = _fold_chunk(acc, b, xb, xs, s, mn, zero, MAGIC, MT, NW, dot_a, mma)
            b = b_n
            xb = xb_n
            xs = xs_n
            s = s_n
            mn = mn_n
    else:
        for g0 in range(g_lo, g_hi, 8):
            b = gl.load(ptr6 + g0 * 16)
            xb = gl.load(xptr + g0 * 32, mask=bmask, other=0.0)
            acc = _fold_chunk(acc, b, xb, gl.load(xgp + g0 * 32), gl.load(sptr + g0), gl.load(mptr + g0), zero,
                              MAGIC, MT, NW, dot_a, mma)
    tot = gl.sum(acc, axis=1)
    orow = pid * R + rr
    if SPLIT:
        gl.atomic_add(OUT + orow, tot, mask=orow < N)
    else:
        gl.store(OUT + orow, tot.to(gl.bfloat16), mask=orow < N)



def compile_sm90(NW: int = 4, MT: int = 2, PF: bool = False, ST: int = 0):
    """``g4_kernel`` compiled for sm_90 with no GPU (Triton's LLVM and bundled ptxas)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    sig = {"X": "*bf16", "W": "*u8", "S": "*fp16", "MN": "*fp16", "OUT": "*fp32", "N": "i32", "NG": "i32",
           "swn": "i32", "ssn": "i32", "MAGIC": "i32", "G_SPLIT": "i32", "NW": "constexpr", "MT": "constexpr",
           "PF": "constexpr", "SPLIT": "constexpr", "ST": "constexpr"}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(11)}
    src = GluonASTSource(fn=g4_kernel, signature=sig, constexprs={"NW": NW, "MT": MT, "PF": PF, "SPLIT": True, "ST": ST},
                         attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": NW, "num_stages": 1})


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "src"))
    sys.path.insert(0, here)
    import numpy as np

    import harness as H
    import nbxtensor as nbx
    from bench_ops import make_clock
    from nbxtensor.quant import int4_linear
    from nbxtensor.runtime.launcher import launch
    rng = np.random.default_rng(0)
    clock = make_clock(nbx, "cuda", 256 << 20, [], "clean")
    timing = H.TimingConfig()
    for N, K in ((14336, 4096), (4096, 14336), (4096, 4096), (6144, 4096)):
        q = nbx.tensor(rng.integers(0, 256, (N, K // 2), dtype=np.uint8), device="cuda")
        s = nbx.tensor((rng.random((N, K // 32)) * 0.01).astype(np.float16), device="cuda")
        mn = nbx.tensor((-rng.random((N, K // 32)) * 0.08).astype(np.float16), device="cuda")
        x = nbx.randn(1, K, dtype=nbx.bfloat16, device="cuda")
        out = nbx.empty(1, N, dtype=nbx.bfloat16, device="cuda")
        ref = int4_linear(x, q, s, mn, group_size=32).to(nbx.float32).cpu().numpy()[0]
        nbytes = q.nbytes + s.nbytes + mn.nbytes + x.nbytes + out.nbytes
        t_ref = H.percentiles(H.run_benchmark(lambda: int4_linear(x, q, s, mn, group_size=32, out=out), clock, timing))[1]
        ws = nbx.zeros(N, dtype=nbx.float32, device="cuda")
        NG = K // 32
        print(f"{N}x{K}: table {t_ref*1e3:6.2f} us {nbytes / (t_ref * 1e-3) / 4.8e12 * 100:5.1f}%", flush=True)
        for NW, MT, PF, ST, T in ((4, 2, 0, 0, 1056), (4, 2, 0, 3, 1056), (4, 2, 0, 4, 1056), (4, 1, 0, 3, 1056),
                                  (4, 1, 0, 4, 2112), (4, 2, 0, 3, 528), (4, 2, 0, 6, 528), (2, 2, 0, 4, 1056),
                                  (4, 1, 0, 6, 1056), (8, 1, 0, 4, 528)):
            R = 16 * NW * MT
            tiles = (N + R - 1) // R
            split = max(1, -(-T // tiles))
            gs = max(8, -(-(-(-NG // split)) // 8) * 8)
            split = -(-NG // gs)
            f = lambda: launch(g4_kernel, (tiles, split), x, q, s, mn, ws, N, NG, q.stride(0), s.stride(0),
                               0x43004300, gs, NW=NW, MT=MT, PF=bool(PF), SPLIT=True, ST=ST, num_warps=NW, num_stages=1)
            try:
                ws.zero_()
                f()
                got = ws.cpu().numpy()
                err = float(np.max(np.abs(got - ref)) / (np.max(np.abs(ref)) + 1e-30))
                t = H.percentiles(H.run_benchmark(f, clock, timing))[1]
                print(f"  NW={NW} MT={MT} PF={PF} ST={ST} grid={tiles}x{split} (g/cta {gs}): {t*1e3:7.2f} us "
                      f"{nbytes / (t * 1e-3) / 1e9:7.1f} GB/s {nbytes / (t * 1e-3) / 4.8e12 * 100:5.1f}%  rel err {err:.1e}",
                      flush=True)
            except Exception as e:
                print(f"  NW={NW} MT={MT} PF={PF} ST={ST}: {type(e).__name__}: {str(e)[:300]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
