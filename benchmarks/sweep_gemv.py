"""Sweep of the decode-shaped product kernels' settings on the GPU: the bf16 GEMV (``gemv`` in
runtime/configs/sm90.json, ``nn.functional.linear`` with one row) and the int4 dequantizing GEMV (``int4_gemv``,
``quant.int4_linear`` with one row).

Both read each weight byte once, so the measure is bandwidth: GB/s of the bytes a call must move (weight, plus
scales and minima for int4, plus the activation row and the output) and the percentage of the H200's 4800 GB/s
(targets: >= 85 % for the bf16 linears of Llama-3-8B's layer shapes, issue 5; >= 75 % of packed bytes for int4,
issue 6). Shapes: bf16 ``1xK->N`` for (K, N) = (4096, 1024) k/v, (4096, 4096) q/o, (4096, 14336) gate/up,
(14336, 4096) down, (4096, 128256) lm head; int4 (N, K) = (4096, 4096), (14336, 4096), (4096, 14336),
(6144, 4096) (fused qkv), group 32 with float16 scales and minima (Q4_1).

Variants are laid over the table's rule with :func:`nbxtensor.runtime.configs.override`, in phases, each ordered
most promising first (from ahead-of-time sm_90 compiles of the kernels, Triton 3.6: registers, loads in flight,
no shared-memory round trips in the loops):

1. ``gemv`` kernel settings (a compile each): ``BLOCK_N`` rows per program, ``BLOCK_K`` x ``UNROLL`` the K chunk
   one load brings in per step (the fp32 accumulator is ``BLOCK_N x BLOCK_K``), ``PREFETCH`` (load the next
   chunk before computing this one), ``num_warps`` (<= ``BLOCK_N`` * max(1, ``BLOCK_K`` / 256), so warps split
   rows), ``EVICT_W``;
2. ``gemv`` split-K settings on the best kernel of phase 1: ``programs_per_sm`` (split-K when the row tiles are
   fewer than that many programs per SM), ``MIN_K_SPLIT``;
3. ``int4_gemv`` kernel settings: ``BLOCK_N``, ``BLOCK_K`` (codes per row per step; 1024 at group 32 gives one
   16-byte group per lane), ``num_warps``, ``DECODE_ASM`` (the nibble decode in inline PTX), ``FAST_Q``; the
   word-decode kernel (``WORD_DECODE``) with ``LOOP_STAGES`` (its loads software-pipelined as cp.async),
   ``PREFETCH``, ``PERSIST`` and a register cap ``maxnreg`` (first in the phase: the session-4b variants for
   occupancy and loads in flight; run only the int4 phases with ``--phases int4,int4-split``);
4. ``int4_gemv`` split-K settings on the best of phase 3;
5. if time is left: ``gemv`` with 4 and 8 rows (``DOT_T``: the weight tile as the dot's A operand).

Phase 1 may use the budget up to 38 %, phase 2 up to 48 %, phase 3 up to 82 %, phase 4 up to 92 %, phase 5 the
rest (a phase that ends early leaves its time to the next). Each (variant, shape) is timed through the public call
(``F.linear(x, w)``, ``int4_linear(x, q, s, m, group_size=32)``) once (compiling, checking), then its one kernel
launch is replayed and timed with CUDA events and an L2 flush (4 x L2) before every run (benchmarks/harness.py
``run_benchmark``, ``percentiles``): kernel time, no host path in it (under an override the public call takes the
general host path, whose host time could outlast the flush and be counted). For the table variant the public
call is also timed the same way (``call_p50_us``: a host path slower than the flush would show there). The first
output of each variant is checked against the table variant's output (run first), and the table's against the
float64 oracle on 64 rows, with the tolerance table's rule for products (``dtypes.tolerance``, widened by sqrt(K)
and by ``|x| |w|``); a mismatch is marked ``!``, never hidden; every exception is recorded and the sweep goes on.
For the table variant the host cost of one public call is measured (wall time of 200 back-to-back calls without
synchronisation / 200). The sweep stops
starting work when ``--budget-s`` (default 120 s, compiles included) would be exceeded.

Run on the H200 from the source tree::

    PYTHONPATH=src python3 benchmarks/sweep_gemv.py --out $OUT/sweep --budget-s 120

Smoke test on a host without a GPU (the interpreter runs the same code paths on tiny shapes)::

    NBX_TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/sweep_gemv.py --device cpu --smoke --out /tmp/sw

Writes ``DIR/sweep_gemv.csv`` (one row per variant and shape) and prints a table of microseconds, GB/s and % of
4800 GB/s per shape, the host costs, the best variant per shape and overall (geometric mean of GB/s) and the
settings to write into sm90.json.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep_common as SC  # noqa: E402  (puts src on the path)

import numpy as np  # noqa: E402

import harness as H  # noqa: E402

PEAK_GBPS = SC.PEAK_GBPS  # H200 datasheet HBM3e
G = 32              # int4 group size of the swept shapes (Q4_1)

# label, rows M, K, N (bf16 linear: x [M, K] @ w [N, K]^T)
BF16_SHAPES = [("1x4096->1024", 1, 4096, 1024), ("1x4096->4096", 1, 4096, 4096), ("1x4096->14336", 1, 4096, 14336),
               ("1x14336->4096", 1, 14336, 4096), ("1x4096->128256", 1, 4096, 128256)]
# label, rows M, K, N (int4: x [M, K], packed weight [N, K/2])
INT4_SHAPES = [("q4 4096x4096", 1, 4096, 4096), ("q4 14336x4096", 1, 4096, 14336), ("q4 4096x14336", 1, 14336, 4096),
               ("q4 6144x4096", 1, 4096, 6144)]
MROW_SHAPES = [("4x4096->4096", 4, 4096, 4096), ("8x4096->14336", 8, 4096, 14336)]
SMOKE = {"gemv": [("s 1x200->40", 1, 200, 40), ("s 1x64->200", 1, 64, 200)],
         "int4": [("s q4 1x256->24", 1, 256, 24), ("s q4 1x1024->16", 1, 1024, 16)],
         "mrow": [("s 3x64->40", 3, 64, 40)]}


def _v(name, **s):
    return name, s


# Phase 1 (gemv kernel). sm_90 compiles of the M = 1 kernel: the table's BLOCK_N 16 x BLOCK_K 512 tile takes 127
# registers (4 programs of 4 warps per SM); BLOCK_N 4 x (4 x 256) 56 (9 per SM, 8 16-byte loads in flight per
# thread, all issued before the first FMA), with PREFETCH 91 (16 in flight); BLOCK_N 8 x (4 x 256) with 8 warps 48.
# PERSIST (session 4): at most P programs per SM, each looping over row tiles with the next chunk loaded across
# tile ends (sm_90: 63 registers at BLOCK_N 4 x (4 x 256), so 8 CTAs of 4 warps or 4 of 8 warps fit an SM and
# every P below is resident at once; 8 LDG.E.128 in flight per thread before the first FFMA and the next ones
# issued before this chunk's FFMAs): no per-tile CTA start, no partial last wave (3584 tiles of 4096->14336 over
# 132 * 4 programs: 7 tiles at most against 6.8 on average). Fewer warps for the same tile (w1, w2): a thread
# holds 4 (2) rows, so x is loaded and converted once for them (the table's 4 warps load x once per row):
# 16 LDG.E.EF.128 of weight + 4 of x in flight per thread, 128 registers, 1.75 SASS instructions per weight byte
# (w2: 8 + 4, 79 registers, 2.0), against 4 + 4, 56 registers, 2.6 for the table.
GEMV_KERNEL = [
    _v("table"),
    _v("persist4", PERSIST=4),
    _v("persist3", PERSIST=3),
    _v("n4 k256 u4 w1", BLOCK_N=4, BLOCK_K=256, UNROLL=4, PREFETCH=False, num_warps=1),
    _v("n4 k256 u4 w2", BLOCK_N=4, BLOCK_K=256, UNROLL=4, PREFETCH=False, num_warps=2),
    _v("persist4 n8 w8", PERSIST=4, BLOCK_N=8, BLOCK_K=256, UNROLL=4, num_warps=8),
    _v("persist2 n8 w8", PERSIST=2, BLOCK_N=8, BLOCK_K=256, UNROLL=4, num_warps=8),
    _v("persist6", PERSIST=6),
    _v("persist2 n8 u2 w8", PERSIST=2, BLOCK_N=8, BLOCK_K=256, UNROLL=2, num_warps=8),
    _v("n4 k256 u4", BLOCK_N=4, BLOCK_K=256, UNROLL=4, PREFETCH=False, num_warps=4),
    _v("n4 k256 u4 pf", BLOCK_N=4, BLOCK_K=256, UNROLL=4, PREFETCH=True, num_warps=4),
    _v("n8 k256 u4 w8", BLOCK_N=8, BLOCK_K=256, UNROLL=4, PREFETCH=False, num_warps=8),
    _v("n4 k256 u8", BLOCK_N=4, BLOCK_K=256, UNROLL=8, PREFETCH=False, num_warps=4),
    _v("n8 k256 u2 pf", BLOCK_N=8, BLOCK_K=256, UNROLL=2, PREFETCH=True, num_warps=4),
    _v("n8 k256 u4 pf w8", BLOCK_N=8, BLOCK_K=256, UNROLL=4, PREFETCH=True, num_warps=8),
    _v("n4 k512 u2 pf", BLOCK_N=4, BLOCK_K=512, UNROLL=2, PREFETCH=True, num_warps=4),
    _v("n16 k256 u2", BLOCK_N=16, BLOCK_K=256, UNROLL=2, PREFETCH=False, num_warps=4),
    _v("n4 k256 u4 ef", BLOCK_N=4, BLOCK_K=256, UNROLL=4, PREFETCH=False, num_warps=4, EVICT_W="evict_first"),
    _v("n8 k512 u2", BLOCK_N=8, BLOCK_K=512, UNROLL=2, PREFETCH=False, num_warps=4),
    _v("n2 k256 u8 w2", BLOCK_N=2, BLOCK_K=256, UNROLL=8, PREFETCH=False, num_warps=2),
    _v("n16 k512 u1 (old)", BLOCK_N=16, BLOCK_K=512, UNROLL=1, PREFETCH=False, num_warps=4),
]
# Phase 2 (gemv split-K; 132 SMs): programs_per_sm P means split-K while the row tiles are fewer than 132 * P.
GEMV_SPLIT = [
    _v("split P2", programs_per_sm=2, MIN_K_SPLIT=512),
    _v("split P8", programs_per_sm=8, MIN_K_SPLIT=512),
    _v("split P4 k256", programs_per_sm=4, MIN_K_SPLIT=256),
    _v("split P16 k256", programs_per_sm=16, MIN_K_SPLIT=256),
    _v("split P1", programs_per_sm=1, MIN_K_SPLIT=1024),
]
# Phase 3 (int4 kernel). sm_90 compiles at group 32, BLOCK_K 1024 (one 16-byte group per lane and row): 40 registers
# at BLOCK_N 4 / 4 warps, 64-72 at BLOCK_N 8-16; no shared-memory traffic in the loop; about 12-14 instructions
# per packed byte, so the decode (DECODE_ASM: 2 instead of ~3.5 per code) and rows per thread (x converted and
# summed once for all of a thread's rows) matter.
# WORD_DECODE (session 4): _int4_gemv_w_kernel, codes decoded from int32 words (4 shifts + 8 lop3 per 8 codes in
# inline PTX), one FFMA chain per word, x converted and summed once for all of a thread's rows; sm_90 loop: 7.8
# SASS instructions per packed byte at BLOCK_N 16 / 4 warps (96 registers), 7.0 at BLOCK_N 32 / 4 warps (158)
# or BLOCK_N 64 / 8 warps (128), against 12.1 for the table kernel (64 registers); no shared memory in the loop.
# PERSIST P (no split-K): P programs per SM looping over row tiles (registers with it: 128 at BLOCK_N 16, 4 CTAs
# of 4 warps per SM; 161 at BLOCK_N 32, 3 per SM), so 896 / 448 tiles of 14336x4096 run without a partial wave.
# Session 4b (occupancy and loads in flight; ncu on the H200: the word kernel at BLOCK_N 16 ran 0.78 waves at 22 %
# achieved occupancy with 45 % of its stalls waiting on loads). sm_90 compiles (4096x14336 unless said; registers,
# shared memory per CTA, SASS instructions per packed byte in the loop; no spills in any, maxnreg included):
# - LOOP_STAGES S: Triton's pipeliner issues the packed-weight and x loads as cp.async (LDGSTS) S - 1 steps ahead
#   of the decode (x staged once per step as a (1, BC) tile), the only form in which ptxas keeps the loads ahead.
#   K split over the warps of one program (a small BLOCK_N, a large BLOCK_K: Triton puts warps along K first; the
#   per-group sums reduced inside the program at the end, no workspace; a last partial step is masked, so BLOCK_K
#   4096 takes K = 14336 as 3.5 steps): BLOCK_N 4 / BLOCK_K 2048 / 4 warps (2 x 2 warps, 2 rows per thread): 64
#   registers, 17 KB, 8 CTAs per SM (50 % occupancy), 1024 programs for 4096 rows (one wave), 9.9-10.0 instr/byte;
#   BLOCK_N 8 / 2048 / 4 warps (4 rows per thread) 128 registers, 8.2 (maxnreg 64: 9.0, 27 KB, 8 CTAs per SM;
#   PERSIST 8 9.1; maxnreg 80 8.6); BLOCK_N 4 / 4096 / 4 warps (all 4 warps along K, 4 rows per thread) 127
#   registers, 32 KB, 8.7 (maxnreg 80: 9.6, 6 CTAs per SM); BLOCK_N 8 / 4096 / 8 warps 128, 8.7 (maxnreg 64:
#   9.8); BLOCK_N 8 / 2048 / 8 warps 80, 10.3; BLOCK_N 16 / 1024 96, 22 KB, 9.1; S = 2 72, 9.2; S = 4 64, 10.0;
#   PERSIST 8 + maxnreg 64 (1056 programs that stay resident, 14336x4096) 64, 10.0;
# - the same tiles without the pipeliner: BLOCK_N 4 / 2048 / 4 warps 72 registers, 9.25 (maxnreg 64: 9.6); BLOCK_N
#   4 / 4096 128, 8.3; BLOCK_N 8 / 2048 / 8 warps 73, 9.2;
# - PREFETCH (next step's loads first in the Triton source): ptxas sinks them to the loop's end again (no LDG
#   before the first FFMA of the loop), 71 registers at BLOCK_N 4 (maxnreg 64: 10.2); kept for the record.
INT4_KERNEL = [
    _v("table"),
    # session 8: around the sm90 rule (w n4 k4096 w4, 127 registers, 4 CTAs per SM): fewer rows per thread, more
    # warps along K, register caps for more resident CTAs, the weight's L2 policy
    _v("w n2 k4096 w4", WORD_DECODE=True, BLOCK_N=2, BLOCK_K=4096, num_warps=4),
    _v("w n4 k4096 w8", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=4096, num_warps=8),
    _v("w n2 k4096 w8", WORD_DECODE=True, BLOCK_N=2, BLOCK_K=4096, num_warps=8),
    _v("w n4 k4096 w4 r96", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=4096, num_warps=4, maxnreg=96),
    _v("w n4 k4096 w4 ef", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=4096, num_warps=4, EVICT_W="evict_first"),
    _v("w n4 k8192 w8", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=8192, num_warps=8),
    _v("w n8 k4096 w8", WORD_DECODE=True, BLOCK_N=8, BLOCK_K=4096, num_warps=8),
    _v("w n2 k8192 w8", WORD_DECODE=True, BLOCK_N=2, BLOCK_K=8192, num_warps=8),
    _v("w n4 k4096 w4 P6", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=4096, num_warps=4, programs_per_sm=6),
    _v("w n4 k2048 w4 st3", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=2048, num_warps=4, LOOP_STAGES=3),
    _v("w n8 k2048 w4 st3 r64", WORD_DECODE=True, BLOCK_N=8, BLOCK_K=2048, num_warps=4, LOOP_STAGES=3, maxnreg=64),
    _v("w n4 k4096 w4 st3 r80", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=4096, num_warps=4, LOOP_STAGES=3, maxnreg=80),
    _v("w n4 k4096 w4 st3", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=4096, num_warps=4, LOOP_STAGES=3),
    _v("w n4 k2048 st3 p8 r64", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=2048, num_warps=4, LOOP_STAGES=3, PERSIST=8,
       maxnreg=64),
    _v("w n8 k2048 st3 p8 r64", WORD_DECODE=True, BLOCK_N=8, BLOCK_K=2048, num_warps=4, LOOP_STAGES=3, PERSIST=8,
       maxnreg=64),
    _v("w n8 k2048 w4 st3 r80", WORD_DECODE=True, BLOCK_N=8, BLOCK_K=2048, num_warps=4, LOOP_STAGES=3, maxnreg=80),
    _v("w n8 k4096 w8 st3 r64", WORD_DECODE=True, BLOCK_N=8, BLOCK_K=4096, num_warps=8, LOOP_STAGES=3, maxnreg=64),
    _v("w n4 k4096 w4", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=4096, num_warps=4),
    _v("w n8 k2048 w8 st3", WORD_DECODE=True, BLOCK_N=8, BLOCK_K=2048, num_warps=8, LOOP_STAGES=3),
    _v("w n16 k1024 w4 st3", WORD_DECODE=True, BLOCK_N=16, BLOCK_K=1024, num_warps=4, LOOP_STAGES=3),
    _v("w n4 k2048 w4 st2", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=2048, num_warps=4, LOOP_STAGES=2),
    _v("w n4 k2048 w4 st4 r64", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=2048, num_warps=4, LOOP_STAGES=4, maxnreg=64),
    _v("w n4 k2048 w4 r64", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=2048, num_warps=4, maxnreg=64),
    _v("w n8 k2048 w8", WORD_DECODE=True, BLOCK_N=8, BLOCK_K=2048, num_warps=8),
    _v("w n4 k2048 w4 pf r64", WORD_DECODE=True, BLOCK_N=4, BLOCK_K=2048, num_warps=4, PREFETCH=True, maxnreg=64),
    _v("w n16 k1024 w4", WORD_DECODE=True, BLOCK_N=16, BLOCK_K=1024, num_warps=4),
    _v("w n16 k1024 w4 p4", WORD_DECODE=True, BLOCK_N=16, BLOCK_K=1024, num_warps=4, PERSIST=4),
    _v("w n32 k1024 w4", WORD_DECODE=True, BLOCK_N=32, BLOCK_K=1024, num_warps=4),
    _v("w n32 k1024 w4 p3", WORD_DECODE=True, BLOCK_N=32, BLOCK_K=1024, num_warps=4, PERSIST=3),
    _v("w n32 k1024 w8", WORD_DECODE=True, BLOCK_N=32, BLOCK_K=1024, num_warps=8),
    _v("w n64 k1024 w8", WORD_DECODE=True, BLOCK_N=64, BLOCK_K=1024, num_warps=8),
    _v("w n16 k1024 w4 ef", WORD_DECODE=True, BLOCK_N=16, BLOCK_K=1024, num_warps=4, EVICT_W="evict_first"),
    _v("w n8 k1024 w4", WORD_DECODE=True, BLOCK_N=8, BLOCK_K=1024, num_warps=4),
    _v("w n16 k2048 w4", WORD_DECODE=True, BLOCK_N=16, BLOCK_K=2048, num_warps=4),
    _v("w n16 k1024 w4 P6", WORD_DECODE=True, BLOCK_N=16, BLOCK_K=1024, num_warps=4, programs_per_sm=6),
    _v("n8 k1024 w4 asm", BLOCK_N=8, BLOCK_K=1024, num_warps=4, DECODE_ASM=True),
    _v("n16 k1024 w4 asm", BLOCK_N=16, BLOCK_K=1024, num_warps=4, DECODE_ASM=True),
    _v("n4 k1024 w4 asm", BLOCK_N=4, BLOCK_K=1024, num_warps=4, DECODE_ASM=True),
    _v("n16 k1024 w8 asm", BLOCK_N=16, BLOCK_K=1024, num_warps=8, DECODE_ASM=True),
    _v("n4 k1024 w4", BLOCK_N=4, BLOCK_K=1024, num_warps=4, DECODE_ASM=False),
    _v("n16 k1024 w4", BLOCK_N=16, BLOCK_K=1024, num_warps=4, DECODE_ASM=False),
    _v("n8 k1024 w8 asm", BLOCK_N=8, BLOCK_K=1024, num_warps=8, DECODE_ASM=True),
    _v("n32 k1024 w8 asm", BLOCK_N=32, BLOCK_K=1024, num_warps=8, DECODE_ASM=True),
    _v("n8 k256 (generic)", BLOCK_N=8, BLOCK_K=256, num_warps=4, DECODE_ASM=False),
    _v("n8 k1024 exact-q", BLOCK_N=8, BLOCK_K=1024, num_warps=4, FAST_Q=False),
]
INT4_SPLIT = [
    _v("split P2", programs_per_sm=2, MIN_K_SPLIT=1024),
    _v("split P6", programs_per_sm=6, MIN_K_SPLIT=1024),
    _v("split P4 k512", programs_per_sm=4, MIN_K_SPLIT=512),
    _v("split P12 k512", programs_per_sm=12, MIN_K_SPLIT=512),
]
# Phase int4-tc (session 5): the tensor-core kernel (quant/int4_tc.py, config key TC): codes decoded in inline PTX
# (2 instructions per packed byte) into wgmma/mma operands against a block-diagonal x (one column per group of a
# chunk), group scales applied to the product. sm_90 compiles (group 32, M 1, loop instructions per packed byte):
# BLOCK_N 64 / 16 columns / 4 warps 6.3 (99 KB shared), 1 stage 6.0 (82 KB); BLOCK_N 128 / 8 warps 5.5 (180 KB);
# 8 columns 7.3-7.6 (mma.sync, 45-86 KB).
INT4_TC = [
    _v("table"),
    _v("tc n64 c16 w4 s2", TC=True, BLOCK_N=64, TC_COLS=16, num_warps=4, num_stages=2, programs_per_sm=2),
    _v("tc n64 c16 w4 s1", TC=True, BLOCK_N=64, TC_COLS=16, num_warps=4, num_stages=1, programs_per_sm=2),
    _v("tc n128 c16 w8 s2", TC=True, BLOCK_N=128, TC_COLS=16, num_warps=8, num_stages=2, programs_per_sm=1),
    _v("tc n64 c8 w4 s2", TC=True, BLOCK_N=64, TC_COLS=8, num_warps=4, num_stages=2, programs_per_sm=4),
    _v("tc n128 c8 w8 s2", TC=True, BLOCK_N=128, TC_COLS=8, num_warps=8, num_stages=2, programs_per_sm=2),
    _v("tc n64 c16 w4 s2 P4", TC=True, BLOCK_N=64, TC_COLS=16, num_warps=4, num_stages=2, programs_per_sm=4),
    _v("tc n64 c8 w4 s3 P2", TC=True, BLOCK_N=64, TC_COLS=8, num_warps=4, num_stages=3, programs_per_sm=2),
    _v("tc n128 c16 w8 s1", TC=True, BLOCK_N=128, TC_COLS=16, num_warps=8, num_stages=1, programs_per_sm=1),
    _v("tc n64 c16 w4 noasm", TC=True, BLOCK_N=64, TC_COLS=16, num_warps=4, num_stages=2, programs_per_sm=2,
       TC_ASM=False),
]
# Phase 5 (gemv, 2 <= M <= 8: tl.dot with M padded to 16; the table multiplies x @ w^T, DOT_T w @ x^T).
MROW = [
    _v("table"),
    _v("dot_t n64 k128", DOT_T=True, BLOCK_N=64, BLOCK_K=128, num_warps=4, num_stages=4),
    _v("dot_t n128 k64", DOT_T=True, BLOCK_N=128, BLOCK_K=64, num_warps=4, num_stages=4),
    _v("n32 k256 s4", BLOCK_N=32, BLOCK_K=256, num_warps=4, num_stages=4),
    _v("dot_t n64 k256 s3", DOT_T=True, BLOCK_N=64, BLOCK_K=256, num_warps=4, num_stages=3),
]
PHASES = [("gemv", "gemv", GEMV_KERNEL, 0.38), ("gemv-split", "gemv", GEMV_SPLIT, 0.48),
          ("int4", "int4_gemv", INT4_KERNEL, 0.82), ("int4-split", "int4_gemv", INT4_SPLIT, 0.92),
          ("int4-tc", "int4_gemv", INT4_TC, 0.97),
          ("mrow", "gemv", MROW, 1.0)]
SMOKE_VARIANTS = {"table", "n4 k256 u4 pf", "n8 k256 u4 w8", "n4 k256 u4 ef", "split P8", "n8 k1024 w4 asm",
                  "n16 k1024 w4", "n8 k1024 exact-q", "split P6", "dot_t n64 k128", "persist4", "persist4 n8 w8",
                  "w n16 k1024 w4", "w n32 k1024 w8", "w n16 k1024 w4 st3", "tc n64 c16 w4 s2",
                  "tc n64 c8 w4 s2"}

CSV_COLUMNS = ["run_id", "phase", "variant", "settings", "shape", "M", "K", "N", "grid", "status", "check",
               "max_excess", "p20_us", "p50_us", "p80_us", "reps", "bytes", "gbps", "pct_4800", "call_p50_us",
               "host_us_call", "host_us_handle", "error", "gpu", "commit", "date"]


# ---------------------------------------------------------------------------------------------------------------
# Inputs and checks
# ---------------------------------------------------------------------------------------------------------------
class Case:
    """One shape's tensors and its public call. ``kind`` is ``gemv`` (bf16 linear) or ``int4``."""

    def __init__(self, nbx, dev: str, kind: str, spec, rng):
        self.label, self.M, self.K, self.N = spec
        self.kind = kind
        M, K, N = self.M, self.K, self.N
        g = nbx.Generator(device=dev).manual_seed(1000 + N + K + M)
        self.x = (nbx.randn(M, K, dtype=nbx.bfloat16, device=dev, generator=g) * 0.5).to(nbx.bfloat16)
        if kind == "int4":
            from nbxtensor.quant import QuantLinear, int4_linear
            q = rng.integers(0, 256, (N, K // 2), dtype=np.uint8)
            s = (rng.random((N, K // G)) * 0.02 + 0.001).astype(np.float16)
            m = (-rng.random((N, K // G)) * 0.1).astype(np.float16)
            self.lin = QuantLinear.from_packed(q, s, m, group_size=G, device=dev, cache=False)
            self.q, self.s, self.m = self.lin.qweight, self.lin.scales, self.lin.mins
            self.call = lambda: int4_linear(self.x, self.q, self.s, self.m, group_size=G)
            self.handle = lambda: self.lin(self.x)
            self.bytes = N * K // 2 + 2 * N * (K // G) * 2 + M * K * 2 + M * N * 2
        else:
            import nbxtensor.nn.functional as F
            self.w = (nbx.randn(N, K, dtype=nbx.bfloat16, device=dev, generator=g) * 0.05).to(nbx.bfloat16)
            self.call = lambda: F.linear(self.x, self.w)
            self.handle = None
            self.bytes = N * K * 2 + M * K * 2 + M * N * 2
        self.rows = np.unique(np.r_[np.arange(min(32, N)), np.arange(max(0, N - 32), N)])
        self._oracle = None

    def oracle(self):
        """float64 results of ``self.rows`` (the first and last 32 outputs) and their magnitude ``|x| |w|``."""
        if self._oracle is None:
            from nbxtensor.dtypes import table as T
            from nbxtensor.dtypes.casting import cast_array
            x = cast_array(np.asarray(self.x.cpu().numpy()), T.bfloat16, T.float64)
            lo, hi = self.rows[self.rows < 32], self.rows[self.rows >= 32]
            parts = []
            for sl in ([slice(0, len(lo))] if len(lo) else []) + ([slice(int(hi[0]), self.N)] if len(hi) else []):
                if self.kind == "int4":
                    from nbxtensor.quant import dequantize_oracle
                    parts.append(dequantize_oracle(self.q[sl].cpu().numpy(), self.s[sl].cpu().numpy(),
                                                   self.m[sl].cpu().numpy(), G))
                else:
                    parts.append(cast_array(np.asarray(self.w[sl].cpu().numpy()), T.bfloat16, T.float64))
            w = np.concatenate(parts, axis=0)
            self._oracle = (x @ w.T, np.abs(x) @ np.abs(w).T)
        return self._oracle


def host_f64(t) -> np.ndarray:
    from nbxtensor.dtypes import table as T
    from nbxtensor.dtypes.casting import cast_array
    return cast_array(np.asarray(t.cpu().numpy()), T.bfloat16, T.float64)


def excess(out: np.ndarray, ref: np.ndarray, mag: np.ndarray, K: int) -> float:
    """Worst ``|out - ref| - (atol + rtol * (|ref| + mag / sqrt(K)))`` (bf16 tolerance for a K-long product);
    <= 0 passes, NaN anywhere gives NaN."""
    from nbxtensor.dtypes import table as T
    from nbxtensor.dtypes.tolerance import tolerance
    tol = tolerance(T.bfloat16, reduced=K)
    err = np.abs(out - ref) - (tol.atol + tol.rtol * (np.abs(ref) + mag / math.sqrt(K)))
    return math.nan if np.isnan(err).any() else float(err.max())


@contextlib.contextmanager
def launch_spy(MM, got: list):
    """Record every launch of the product modules (``(kernel, grid, args, meta)``) while the block runs."""
    real = MM.launch

    def spy(kernel, grid, *args, **meta):
        got.append((kernel, tuple(grid), args, meta))
        return real(kernel, grid, *args, **meta)
    MM.launch = spy
    try:
        yield
    finally:
        MM.launch = real


# ---------------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------------
def parse_args(argv):
    p = SC.sweep_parser(__doc__, "output folder (sweep_gemv.csv is appended to)", budget_s=120.0,
                        smoke_help="tiny shapes, a few variants, one timed run (host smoke test)")
    p.add_argument("--phases", default="", help="comma-separated phases to run (gemv, gemv-split, int4, int4-split, "
                   "mrow; default all)")
    p.add_argument("--variants", default="", help="comma-separated variant names to run (the table always runs)")
    p.add_argument("--list", action="store_true", help="print the phases, shapes and variants and exit")
    return p.parse_args(argv)


def _shapes(kind: str, smoke: bool):
    if smoke:
        return SMOKE[kind]
    return {"gemv": BF16_SHAPES, "int4": INT4_SHAPES, "mrow": MROW_SHAPES}[kind]


def _kind(phase: str) -> str:
    return "int4" if phase.startswith("int4") else ("mrow" if phase == "mrow" else "gemv")


def ranking(results: dict, labels: list) -> list:
    """Variant names by the geometric mean of GB/s over ``labels`` (variants with an error or a mismatch on any
    of them last)."""
    scores = []
    for name, rows in results.items():
        g = [rows.get(lb, {}).get("gbps") for lb in labels]
        ok = all(v for v in g) and all(rows[lb].get("check", "").startswith(("ok", "oracle ok")) for lb in labels)
        scores.append((0 if ok else 1, -(H.geomean(g) or 0.0) if ok else 0.0, name))
    return [n for _, _, n in sorted(scores)]


def main(argv=None) -> int:
    a = parse_args(argv)
    budget = SC.Budget(a.budget_s)
    phases = PHASES
    if a.phases:
        want = set(SC.names(a.phases))
        phases = [p for p in PHASES if p[0] in want]
        if not phases:
            print(f"sweep_gemv: no phase among {sorted(want)}; known: {[p[0] for p in PHASES]}", file=sys.stderr)
            return 2
    pick = set()
    if a.variants:
        pick = set(SC.names(a.variants))
        known = {n for _, _, vs, _ in PHASES for n, _ in vs}
        if pick - known:
            print(f"sweep_gemv: unknown variants {sorted(pick - known)}; known: {sorted(known)}", file=sys.stderr)
            return 2
    if a.list:
        for ph, op, vs, share in phases:
            print(f"phase {ph} (op {op}, budget up to {share:.0%}); shapes: "
                  f"{[s[0] for s in _shapes(_kind(ph), a.smoke)]}")
            for n, s in vs:
                print(f"  {n:22s} {json.dumps(s, sort_keys=True)}")
        return 0

    import nbxtensor as nbx
    from nbxtensor.ops import matmul as MM
    from nbxtensor.runtime.configs import launch_config
    dev = a.device
    st = SC.start("sweep_gemv", nbx, dev, a.out, a.smoke, warmup_ms=3.0, rep_ms=20.0, min_reps=10, max_reps=60,
                  smoke_rep_ms=0.0, smoke_max_reps=1, utc=True, hint="use --device cpu --smoke")
    if st is None:
        return 2
    csv_path = os.path.join(a.out, "sweep_gemv.csv")
    log_path = os.path.join(a.out, "sweep_gemv.log")
    facts, run_id, commit, date = st.facts, st.run_id, st.commit, st.date
    bench = SC.make_bench(st.clock, st.timing, one_shot=a.smoke)  # --smoke: one timed run (the interpreter is slow)
    host_n = 2 if a.smoke else 200
    rng = np.random.default_rng(0)
    cases: dict = {}
    for kind in sorted({_kind(p[0]) for p in phases}):
        cases[kind] = []
        for spec in _shapes(kind, a.smoke):  # a shape that cannot be built is reported, never stops the sweep
            try:
                cases[kind].append(Case(nbx, dev, "int4" if kind == "int4" else "gemv", spec, rng))
            except Exception as e:  # noqa: BLE001
                print(f"sweep_gemv: shape {spec[0]} left out: {type(e).__name__}: {e}", flush=True)
                SC.log_traceback(log_path, f"inputs of {spec[0]}")
    if dev != "cpu":
        nbx.cuda.synchronize()
    rules = {}
    for op, dt, kw in (("gemv", nbx.bfloat16, dict(m=1, n=4096, k=4096)), ("int4_gemv", nbx.bfloat16,
                                                                           dict(rows=4096, group=G, cols=4096))):
        try:
            rules[op] = launch_config(op, nbx.device(dev), dtypes=(dt,), **kw)
        except Exception as e:  # noqa: BLE001
            rules[op] = f"{type(e).__name__}: {e}"
    print(f"sweep_gemv: {facts['gpu']} ({facts.get('arch')}), commit {commit}; budget {a.budget_s:.0f} s; inputs "
          f"ready ({budget.elapsed():.0f} s)", flush=True)
    for op, r in rules.items():
        print(f"table rule {op}: {json.dumps(r, sort_keys=True)}")

    results: dict = {}   # phase -> variant -> label -> row
    settings_of: dict = {}
    refs: dict = {}      # (kind, label) -> the table's output (host float64)
    notes: list = []
    stopped = None

    def run_variant(phase, op, name, settings, subset, share):
        nonlocal stopped
        until = budget.until(share)
        settings_of[(phase, name)] = settings
        for c in subset:
            if not budget.allows((op, c.label), until):  # the last (variant, shape) pair's cost as the estimate
                notes.append(f"{phase}: stopped before {name} / {c.label} ({budget.elapsed():.0f} s)")
                if until >= budget.deadline:
                    stopped = notes[-1]
                return False
            row = {"run_id": run_id, "phase": phase, "variant": name, "settings": json.dumps(settings, sort_keys=True),
                   "shape": c.label, "M": c.M, "K": c.K, "N": c.N, "bytes": c.bytes, "gpu": facts["gpu"],
                   "commit": commit, "date": date}
            ts = time.monotonic()
            try:
                with SC.laid_over(op, settings):
                    launches: list = []
                    with launch_spy(MM, launches):
                        out = c.call()  # compiles
                    if dev != "cpu":
                        nbx.cuda.synchronize()
                    row["grid"] = "x".join(str(v) for v in launches[-1][1]) if launches else ""
                    got = host_f64(out)
                    key = (c.kind, c.label)
                    if name == "table" and key not in refs:
                        ref, mag = c.oracle()
                        worst = excess(got[:, c.rows], ref, mag, c.K)
                        row["check"] = "oracle ok" if worst <= 0 else "ORACLE MISMATCH"
                        refs[key] = got
                    else:
                        ref = refs.get(key)
                        _, mag = c.oracle()
                        scale = np.full(got.shape, float(np.max(mag)))
                        worst = excess(got, ref, scale, c.K) if ref is not None else math.nan
                        row["check"] = "ok" if worst <= 0 else ("MISMATCH" if ref is not None else "no reference")
                    row["max_excess"] = worst
                    if len(launches) == 1:
                        # the kernel alone: the recorded launch replayed (its compiled kernel cached, the same
                        # buffers); under an override the public call takes the general host path, whose host time
                        # could outlast the flush and be counted
                        k_, g_, a_, m_ = launches[0]
                        times = bench(lambda: MM.launch(k_, g_, *a_, **m_))
                    else:
                        times = bench(c.call)
                    if name == "table" and phase in ("gemv", "int4", "int4-tc", "mrow"):
                        row["host_us_call"] = SC.host_cost_us(nbx, c.call, dev, host_n)
                        if c.handle is not None:
                            row["host_us_handle"] = SC.host_cost_us(nbx, c.handle, dev, host_n)
                        row["call_p50_us"] = H.percentiles(bench(c.call))[1] * 1e3
                p20, p50, p80, gbps, pct = SC.bandwidth(times, c.bytes)
                row.update(status="ok", p20_us=p20 * 1e3, p50_us=p50 * 1e3, p80_us=p80 * 1e3, reps=len(times),
                           gbps=gbps, pct_4800=pct)
            except Exception as e:  # noqa: BLE001 - one failing variant never stops the sweep
                row.update(status="error", error=SC.error_text(e))
                SC.log_traceback(log_path, f"{phase} {name} / {c.label}")
            budget.record((op, c.label), ts)
            results.setdefault(phase, {}).setdefault(name, {})[c.label] = row
            H.append_csv(csv_path, [row], CSV_COLUMNS)
        return True

    best_kernel: dict = {}  # kind -> settings of the best kernel variant (the base of its split phase)
    for phase, op, variants, share in phases:
        if stopped:
            break
        kind = _kind(phase)
        subset = cases.get(kind, [])
        if not subset:
            continue
        vs = [v for v in variants if not a.smoke or v[0] in SMOKE_VARIANTS]
        if pick:
            vs = [v for v in vs if v[0] in pick or v[0] == "table"]
        base = {}
        if phase.endswith("-split"):
            base = best_kernel.get(kind, {})
            vs = [(n, {**base, **s}) for n, s in vs]
        for name, settings in vs:
            if not run_variant(phase, op, name, settings, subset, share):
                break
        if not phase.endswith("-split") and phase in results:
            ranked = ranking(results[phase], [c.label for c in subset])
            if ranked:
                best_kernel[kind] = settings_of[(phase, ranked[0])]

    # -- report ------------------------------------------------------------------------------------------------
    def cell(r):
        if not r:
            return "-"
        if r.get("status") != "ok":
            return "ERR"
        flag = "" if str(r.get("check", "")).startswith(("ok", "oracle ok")) else "!"
        return f"{r['p50_us']:.1f}us {r['gbps']:.0f} {r['pct_4800']:.0f}%{flag}"

    lines = []
    for phase, op, _, _ in phases:
        if phase not in results:
            continue
        labels = [c.label for c in cases.get(_kind(phase), [])]
        lines.append(f"\n== {phase} ({op}): p50 us, GB/s, % of 4800 (! = mismatch)")
        lines.append(f"{'variant':22s} " + " ".join(f"{lb[:20]:>20s}" for lb in labels) + "   geomean")
        for name in ranking(results[phase], labels):
            rows = results[phase][name]
            g = H.geomean([rows.get(lb, {}).get("gbps") for lb in labels])
            lines.append(f"{name[:22]:22s} " + " ".join(f"{cell(rows.get(lb)):>20s}" for lb in labels)
                         + (f"   {g:.0f}" if g else ""))
        t = results[phase].get("table", {})
        hosts = [(lb, t[lb].get("host_us_call"), t[lb].get("host_us_handle"), t[lb].get("call_p50_us"))
                 for lb in labels if lb in t]
        if any(h for _, h, _, _ in hosts):
            lines.append("table, public call: host us/call (no sync) | p50 us with events: " + ", ".join(
                f"{lb} {h:.1f}" + (f" (QuantLinear {hh:.1f})" if hh else "") + (f" | {cp:.1f}" if cp else "")
                for lb, h, hh, cp in hosts if h))
        best = ranking(results[phase], labels)
        if best:
            lines.append(f"best overall: {best[0]}  settings {settings_of[(phase, best[0])]}")
            for lb in labels:
                ok = [(rows[lb]["gbps"], n) for n, rows in results[phase].items() if lb in rows
                      and rows[lb].get("status") == "ok"
                      and str(rows[lb].get("check", "")).startswith(("ok", "oracle"))]
                if ok:
                    gb, n = max(ok)
                    lines.append(f"  best for {lb}: {n} ({gb:.0f} GB/s, {100 * gb / PEAK_GBPS:.0f}%)")
    if notes:
        lines.append("\n" + "\n".join(notes[-6:]))
    lines.append(f"\nsweep_gemv: {budget.elapsed():.0f} s; rows in {csv_path}" +
                 (f"; stopped: {stopped}" if stopped else ""))
    print("\n".join(lines[:118]), flush=True)
    errors = sum(1 for ph in results.values() for rows in ph.values() for r in rows.values()
                 if r.get("status") != "ok")
    mism = sum(1 for ph in results.values() for rows in ph.values() for r in rows.values()
               if r.get("status") == "ok" and not str(r.get("check", "")).startswith(("ok", "oracle ok")))
    if errors or mism:
        print(f"sweep_gemv: {errors} errors, {mism} mismatches (details in {log_path} and the CSV)")
    table_bad = any(r.get("status") != "ok" or not str(r.get("check", "")).startswith("oracle ok")
                    for ph in results.values() for n, rows in ph.items() if n == "table" for r in rows.values())
    return 1 if table_bad else 0


if __name__ == "__main__":
    sys.exit(main())
