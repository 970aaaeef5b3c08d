"""Sweep of the launch settings of reductions, softmax/log_softmax and norms on the GPU (issue 4's bandwidth rows).

Cases (bfloat16, the issue's >= 256 MiB tensors): ``sum``, ``amax``, ``max(dim)`` (values and indices) and
``min(dim)`` of 32768x8192 along dim -1 (the ``reduce_rows`` kernel) and dim 0 (``reduce_cols``), ``var`` and
``logsumexp`` along dim -1 (``reduce_rows``: the lane states of 3 and 2 values); ``sum`` and
``max`` of all elements (``reduce_rows`` with one row: its ``max_rows: 1`` entry, split into chunks);
``softmax``/``log_softmax`` of 2048x151936 along dim -1 (``softmax_rows``, the looped path) and ``softmax`` of
32768x8192 (its one-tile entry); ``layer_norm`` (with weight and bias) and ``rms_norm`` (with weight) of
32768x8192 (``norm_rows``, one tile per row). Each candidate
setting is laid over the table's matching rule with :func:`nbxtensor.runtime.configs.override` and timed through
the public op with CUDA events and an L2 flush before every run (benchmarks/harness.py: ``run_benchmark``,
``percentiles``; bench_ops.py's clock). Variant ``table`` (the table's own setting) runs first for every case;
the first call of every other variant is compared with the table's output on the device (values by the dtype's
tolerance, indices exactly) and a mismatch is marked, never hidden. Every exception is recorded per variant and
the sweep goes on. GB/s come from the op's cost declaration (the bytes bench_ops.py counts, computed once per
case with the table's setting: the looped softmax counts two reads and a write), % of 4800 GB/s (H200 HBM3e).

Variants run rank by rank across cases (every case's table setting, then every case's first candidate, ...),
each case's candidates ordered most promising first, so a budget cut drops the least promising ones. The sweep
stops starting work when ``--budget-s`` (default 120 s, compiles included) would be exceeded.

Run on the H200 from the source tree::

    PYTHONPATH=src python3 benchmarks/sweep_reduce.py --out $OUT/sweep --budget-s 120

Smoke test on a host without a GPU (the interpreter runs the same variants on tiny shapes)::

    NBX_TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/sweep_reduce.py --device cpu --smoke --out /tmp/sw

Writes ``DIR/sweep_reduce.csv`` (one row per case and variant) and prints, per case, the table's setting and the
best variants (GB/s, % of 4800, ms, check), then the best variant per case and, per config rule, the variant
with the best geometric mean over the rule's cases (the entry to write into runtime/configs/sm90.json).

What the settings mean (all optional keys of the rules; absent = the kernels' plain behaviour):
``BLOCK_M``/``BLOCK_R``/``BLOCK_I``/``BLOCK_N``/``num_warps`` the tile; ``LOOP_STAGES`` software pipelining of
the streaming loop (``tl.range(num_stages=...)``: cp.async prefetch into shared memory); ``EVICT``/``EVICT2`` L2
eviction policies (first pass / second pass and stores); ``programs_per_sm`` a persistent grid (softmax: fewer
rows in flight, so a row's second read can hit L2; norms: weight and bias loaded once per program and the next
row prefetched when ``LOOP_STAGES`` is set); ``HOIST_PARAMS`` norms load weight and bias before the statistics;
``RCP`` softmax multiplies by an IEEE reciprocal instead of
dividing; ``FAST_EXP`` (default on) one ``ex2.approx.ftz`` per element in softmax's first pass;
``target_programs``/``min_chunk`` when a reduction splits its reduced axis (``target_per_sm``: programs per
SM instead); reductions' ``UNROLL`` (1, 2, 4: tiles loaded per loop iteration before folding), ``EVEN`` (unmasked
loads where the shape allows) and ``INTERLEAVE`` (a split's super-tiles dealt round-robin, a grid-stride loop);
``maxnreg`` a register cap; ``WORDS`` all/any of 1-byte elements read as int32 words of 4 (contiguous
reduced axis); ``VAR_SHIFT`` variances keep shifted sums per lane instead of Welford's step (ops/reduction.py,
``_fold``); ``ARG_FAST`` arg-extrema's cheaper fold predicate and two one-value lane trees (same bits);
``LSE_TILE`` logsumexp rescales once per lane and step (``lse_tile_scale``; 8: lanes of 8 neighbours);
``ARG_ROW`` arg-extrema of rows up to that width held in registers, two passes (``_arg_row_kernel``; its
warps and rows per program ``ARG_ROW_WARPS``/``ARG_ROW_M``);
``COUNT32`` count_nonzero counts in int32 (and ``WORDS`` counts float16/bfloat16 two per int32 word); ``LSE_EX2`` logsumexp folds each element through one ``ex2.approx.ftz`` (``lse_step_ex2``, its error
bound in the docstring; the check against the table's output is by the dtype's tolerance). The reduce rules'
launch key also has the fact ``state`` (values per lane: 1 sum and
extrema, 2 arg-extrema/logsumexp/aminmax/nanmean, 3 var), so a rule with ``"max_state": 1`` can give the light
kinds their own setting.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep_common as SC  # noqa: E402  (puts src on the path)

import harness as H  # noqa: E402

PEAK_GBPS = SC.PEAK_GBPS  # H200 HBM3e datasheet
TARGET_PCT = H.TARGET_PCT_BW

# Candidate settings per config rule, most promising first (the table's own rule always runs first as "table").
# Why each is here: see the module docstring; the interpreter tier runs the same settings in
# tests/ops/test_{reduction,softmax,norm}.py (test_sweep_settings_keep_results).
VARIANTS = {
    # UNROLL issues the loads of that many tiles before folding them (bytes in flight per thread without more lane
    # state registers: with the tables' tiles a thread holds only 2-4 16-byte loads and ptxas interleaves them with
    # the adds; it still moves some of the unrolled loads after folds, so LOOP_STAGES + UNROLL, whose cp.async
    # prefetches stay in flight whatever the schedule, is among the candidates); EVEN drops the masks where the
    # shape allows (32768x8192 always does); INTERLEAVE deals a split
    # reduction's super-tiles round-robin (the programs in flight read neighbouring memory); target_per_sm sets a
    # split's programs per SM (a whole number of waves) instead of target_programs.
    "reduce_rows": [  # table: BLOCK_M 4, BLOCK_R 1024, 4 warps (52 regs sum, 116 max(dim), 210 var: 2 blocks/SM)
        # session 7: the count_nonzero winner's keys on the rule sum/amax share (COUNT32 is count_nonzero's alone;
        # EVEN drops masks)
        {"COUNT32": True, "EVEN": True},
        {"BLOCK_M": 1, "BLOCK_R": 1024, "num_warps": 4, "UNROLL": 4, "EVEN": True},   # 4 x 16 B in flight, 32 regs
        {"BLOCK_M": 2, "BLOCK_R": 1024, "num_warps": 4, "UNROLL": 2, "EVEN": True},
        {"UNROLL": 2, "EVEN": True},
        {"BLOCK_M": 1, "BLOCK_R": 2048, "num_warps": 8, "UNROLL": 4, "EVEN": True},
        {"BLOCK_M": 1, "BLOCK_R": 1024, "num_warps": 4, "UNROLL": 2, "LOOP_STAGES": 3},
        {"BLOCK_M": 1, "BLOCK_R": 512, "num_warps": 2, "UNROLL": 4, "EVEN": True},
        {"EVEN": True},
        {"BLOCK_M": 1, "BLOCK_R": 8192, "num_warps": 8},
        {"LOOP_STAGES": 3},
    ],
    "reduce_cols": [  # table: BLOCK_R 16, BLOCK_I 256, 8 warps, LOOP_STAGES 3, split to 1024 programs (>= 1024 rows)
        # session 7, over the new table rule (BLOCK_I 512, BLOCK_R 4, 4 warps, UNROLL 4, EVEN, FINISH_LAST, min_chunk
        # 1024: 32 chunks of 1024 rows, 512 programs for 32768x8192; 2048 programs ran 66 %): fewer / more chunks,
        # the tile's neighbours, and the two-launch split as a control
        # H200 (c20b1b7): table 84.1 / 84.2 %, the two-launch split (FINISH_LAST false) 76.8 / 76.5 %; fewer chunks
        # (min_chunk 2048 / 4096) 65.7 / 39.9 %; BLOCK_R 16 with UNROLL 2 (16 x 16 B loads in flight per thread)
        # 87.7 / 87.0 %. Around that:
        {"BLOCK_R": 16, "UNROLL": 2}, {"BLOCK_R": 16, "UNROLL": 2, "num_warps": 8}, {"BLOCK_R": 32, "num_warps": 8},
        {"BLOCK_R": 16, "UNROLL": 4}, {"BLOCK_R": 32, "UNROLL": 2, "num_warps": 8},
        {"BLOCK_R": 16, "UNROLL": 2, "min_chunk": 512}, {"BLOCK_R": 8, "UNROLL": 2, "num_warps": 2},
        {"BLOCK_R": 32, "UNROLL": 1},
        {"FINISH_LAST": False},
        # session 7, with launch plans under overrides (earlier sweeps of split variants timed the host path): best
        # BLOCK_I 512 / BLOCK_R 8 / UNROLL 4 / EVEN / 2048 programs, sum 82.9 %, amax 82.4 %; now with FINISH_LAST
        # (the split's combine by each column block's last program: no second launch)
        {"BLOCK_I": 512, "BLOCK_R": 8, "EVEN": True, "LOOP_STAGES": 0, "UNROLL": 4, "target_programs": 2048,
         "FINISH_LAST": True},
        {"BLOCK_I": 512, "BLOCK_R": 8, "EVEN": True, "LOOP_STAGES": 0, "UNROLL": 4, "target_programs": 1024,
         "FINISH_LAST": True},
        {"BLOCK_I": 512, "BLOCK_R": 8, "EVEN": True, "LOOP_STAGES": 0, "UNROLL": 4, "target_programs": 4096,
         "min_chunk": 256, "FINISH_LAST": True},
        {"BLOCK_I": 256, "BLOCK_R": 32, "num_warps": 8, "FINISH_LAST": True},
        {"BLOCK_I": 256, "BLOCK_R": 16, "EVEN": True, "LOOP_STAGES": 0, "UNROLL": 4, "target_programs": 2048,
         "FINISH_LAST": True},
        {"BLOCK_I": 512, "BLOCK_R": 4, "EVEN": True, "LOOP_STAGES": 0, "UNROLL": 4, "num_warps": 4,
         "target_programs": 2048, "FINISH_LAST": True},
        {"BLOCK_I": 512, "BLOCK_R": 8, "EVEN": True, "LOOP_STAGES": 3, "UNROLL": 2, "target_programs": 2048,
         "FINISH_LAST": True},
        {"BLOCK_I": 512, "BLOCK_R": 16, "EVEN": True, "LOOP_STAGES": 0, "UNROLL": 2, "target_programs": 2048,
         "FINISH_LAST": True},
        # session 6 H200: best sum dim0 81.8 % ({BLOCK_I 256, BLOCK_R 32, 8 warps}), amax dim0 80.4 % (4 warps,
        # BLOCK_R 8, target_per_sm 8). New, first: 2 KiB of each row per program (BLOCK_I 1024, 4 x 16 B per thread and
        # row group) in whole waves; no split at all (BLOCK_I 32 / 64: 256 / 128 programs, no second launch, which
        # costs a few us of the ~110 us); the session's best tile in whole waves.
        {"LOOP_STAGES": 0, "BLOCK_R": 8, "BLOCK_I": 1024, "num_warps": 8, "UNROLL": 2, "EVEN": True,
         "target_per_sm": 8, "min_chunk": 256},
        {"LOOP_STAGES": 0, "BLOCK_R": 4, "BLOCK_I": 1024, "num_warps": 4, "UNROLL": 4, "EVEN": True,
         "target_per_sm": 16, "min_chunk": 256},
        {"LOOP_STAGES": 0, "BLOCK_R": 64, "BLOCK_I": 32, "num_warps": 8, "UNROLL": 4, "EVEN": True,
         "target_programs": 0},
        {"BLOCK_R": 32, "BLOCK_I": 256, "num_warps": 8, "target_per_sm": 8, "min_chunk": 256},
        {"BLOCK_R": 8, "BLOCK_I": 512, "num_warps": 4, "LOOP_STAGES": 3, "target_per_sm": 8, "min_chunk": 256},
        {"LOOP_STAGES": 0, "BLOCK_R": 64, "BLOCK_I": 64, "num_warps": 16, "UNROLL": 4, "EVEN": True,
         "target_programs": 0},
        # sm_90 (sum / amax dim 0, bf16 32768x8192): stage 1 52 / 58 registers at 8 warps -> 4 blocks (32 warps) per
        # SM, 1024 programs = 1.9 waves of 528; 4.7 / 4.6 loop instructions per element (not issue-bound). Fuller SMs:
        {"num_warps": 4, "BLOCK_R": 8, "target_per_sm": 8, "min_chunk": 256},   # 4-warp blocks, 1056 programs
        {"maxnreg": 40},                                                       # 6 blocks of 8 warps per SM
        {"LOOP_STAGES": 0, "BLOCK_R": 8, "UNROLL": 4, "EVEN": True},
        # 2 KiB of each row per program (the table reads 512 B segments), 8 rows x 16 B in flight per thread
        {"LOOP_STAGES": 0, "BLOCK_R": 2, "BLOCK_I": 2048, "UNROLL": 4, "EVEN": True},
        {"LOOP_STAGES": 0, "BLOCK_R": 16, "UNROLL": 2, "EVEN": True},
        {"UNROLL": 2, "EVEN": True},
        {"LOOP_STAGES": 0, "BLOCK_R": 8, "UNROLL": 4, "EVEN": True, "INTERLEAVE": True},
        {"LOOP_STAGES": 0, "BLOCK_R": 8, "BLOCK_I": 512, "UNROLL": 4, "EVEN": True, "target_programs": 2048},
        {"LOOP_STAGES": 0, "BLOCK_R": 4, "BLOCK_I": 256, "num_warps": 4, "UNROLL": 4, "EVEN": True,
         "target_per_sm": 16, "min_chunk": 256},
        {"BLOCK_R": 32, "BLOCK_I": 256, "num_warps": 8},
        {"target_programs": 4096, "min_chunk": 256},
    ],
    # max/min(dim=-1), argmax along dim -1 (table: the max_state 2 entry, BLOCK_M 1, BLOCK_R 512, 2 warps, EVEN,
    # UNROLL 4; sm_90: 6.34 loop instructions per element, 491 in the kernel, 40 registers). ARG_FAST: one unordered
    # compare and a NaN test per element and two one-value lane trees instead of the (value, index) tree: 5.38 per
    # element, 418 in the kernel, the same bits (ops/reduction.py _fold, _arg_lanes_fast).
    "reduce_rows (arg)": [
        # session 7 (sweeps with launch plans under overrides, so the kernel is timed, not the host): one warp per
        # row program, BLOCK_R 256: argmax 82.5 -> 89.6 %, max(dim) 80.1 -> 88.1 %. Neighbours, and whether the
        # rule's other kinds (aminmax, nanmean; logsumexp has its own group) keep their rate on it
        {"ARG_FAST": True, "BLOCK_R": 256, "num_warps": 1},
        {"ARG_FAST": True, "BLOCK_R": 512, "num_warps": 1},
        {"ARG_FAST": True, "BLOCK_R": 256, "num_warps": 1, "UNROLL": 2},
        {"ARG_FAST": True, "BLOCK_R": 128, "num_warps": 1},
        {"ARG_FAST": True, "BLOCK_R": 256, "num_warps": 1, "BLOCK_M": 2},
        # session 6 H200: table (ARG_FAST on) 81.9 %. ARG_ROW (ops/reduction.py _arg_row_kernel): the whole 8192-wide
        # row in registers, plain 16-byte loads, a one-value max tree then the first position equal to it (no
        # (value, step) lane state, no loop, no split); sm_90 bf16: 7.5 / 7.1 / 6.3 SASS per element in all (kernel
        # included) at 4 warps / 8 warps x 2 rows / 4 warps x 2 rows
        # (ARG_ROW_WARPS / ARG_ROW_M: the kernel's own warps and rows per program; the rule's other keys stay
        # logsumexp's)
        {"ARG_ROW": 8192, "ARG_ROW_WARPS": 8},
        {"ARG_ROW": 8192, "ARG_ROW_WARPS": 4},
        {"ARG_ROW": 8192, "ARG_ROW_M": 2, "ARG_ROW_WARPS": 8},
        {"ARG_ROW": 8192, "ARG_ROW_WARPS": 16},
        {"ARG_FAST": True},
        {"ARG_FAST": True, "BLOCK_R": 1024, "num_warps": 4, "UNROLL": 2, "LOOP_STAGES": 3, "EVEN": False},
        {"ARG_FAST": True, "BLOCK_R": 1024, "num_warps": 4, "UNROLL": 4},
    ],
    # count_nonzero of bf16 along dim -1 (table: the max_state 1 entry, BLOCK_R 1024, 4 warps, LOOP_STAGES 3, UNROLL 2,
    # masked; int64 lane counts: 8.06 loop instructions per element, 39 registers). WORDS counts two elements per int32
    # word (P_NZ_PAIRS): 2.5 per element with plain loads, EVEN, UNROLL 4; COUNT32 int32 lanes: 3.3 with EVEN, UNROLL 4.
    "reduce_rows (count_nonzero)": [
        {"WORDS": True, "LOOP_STAGES": 0, "BLOCK_R": 512, "UNROLL": 4, "EVEN": True},
        {"COUNT32": True, "LOOP_STAGES": 0, "UNROLL": 4, "EVEN": True},
        {"WORDS": True, "LOOP_STAGES": 0, "BLOCK_R": 256, "num_warps": 2, "UNROLL": 4, "EVEN": True},
        {"COUNT32": True, "EVEN": True},
        {"WORDS": True},
    ],
    # all/any of bool along dim -1 (table: the max_state 1 entry, BLOCK_R 1024, 4 warps, LOOP_STAGES 3, UNROLL 2; sm_90
    # SASS: 8-byte cp.async per tile, one byte widened to int64 each: 119 loop instructions per 16 bytes, 7.4 per byte,
    # ALU-bound at 47 %). WORDS reads int32 words of 4 elements (any: word != 0; all: no zero byte): with the table's
    # tiles 128-bit cp.async, 2.2 (any) / 2.6 (all) instructions per byte; plain loads, EVEN, UNROLL 4: 0.8 / 1.4.
    "reduce_rows (bool)": [
        {"WORDS": True, "LOOP_STAGES": 0, "BLOCK_R": 512, "UNROLL": 4, "EVEN": True},
        {"WORDS": True},
        {"WORDS": True, "LOOP_STAGES": 0, "BLOCK_R": 1024, "UNROLL": 4, "EVEN": True},
        {"WORDS": True, "LOOP_STAGES": 0, "BLOCK_R": 256, "num_warps": 2, "UNROLL": 4, "EVEN": True},
        {"LOOP_STAGES": 0, "BLOCK_R": 2048, "UNROLL": 4, "EVEN": True},   # bytes, 16 per thread and tile
    ],
    # var along dim -1 (table: BLOCK_M 1, BLOCK_R 512, 2 warps, EVEN, UNROLL 4; Welford's step: 267 loop instructions
    # per 32 elements, 76 registers, 74 %). VAR_SHIFT keeps shifted sums per lane: 137 instructions, 56 registers.
    "reduce_rows (var)": [
        {"VAR_SHIFT": True},
        {"VAR_SHIFT": True, "BLOCK_R": 1024, "num_warps": 4, "UNROLL": 2},
        {"VAR_SHIFT": True, "BLOCK_R": 1024, "num_warps": 4, "UNROLL": 4},
        {"VAR_SHIFT": True, "BLOCK_R": 256, "num_warps": 1, "UNROLL": 4},
    ],
    # logsumexp along dim -1 (table: the max_state 2 entry, BLOCK_M 1, BLOCK_R 512, 2 warps, EVEN, UNROLL 4; 25.6 loop
    # instructions per element: libdevice's expf and NaN-testing max/min selects; 37 % in session 4's run). LSE_EX2
    # folds each element with one ex2.approx.ftz and a max.NaN (ops/reduction.py lse_step_ex2): 10.3 per element.
    "reduce_rows (logsumexp)": [
        {"BLOCK_R": 256, "num_warps": 1},   # session 7: the arg-extrema's one-warp tile on the rule they share
        {"BLOCK_R": 512, "num_warps": 1},
        # session 6 H200: table (LSE_EX2) 72.7 %. LSE_TILE: one rescale per lane and step (lse_tile_scale): 8 = lanes of
        # 8 neighbours (a thread's 16-byte vector, max in registers), 6.6 loop SASS per element on the table's tile
        # (BLOCK_R 512, 2 warps, UNROLL 4, EVEN); True = a state per tile element, 7.8. The check against the table's
        # output is by the tolerance table (sums)
        {"LSE_TILE": 8},
        {"LSE_TILE": 8, "BLOCK_R": 1024, "num_warps": 4},
        {"LSE_TILE": 8, "BLOCK_R": 1024, "num_warps": 4, "UNROLL": 2, "LOOP_STAGES": 3, "EVEN": False},
        {"LSE_TILE": True},
        {"LSE_EX2": True},
        {"LSE_EX2": True, "BLOCK_R": 1024, "num_warps": 4, "UNROLL": 2},
        {"LSE_EX2": True, "BLOCK_R": 1024, "num_warps": 4, "UNROLL": 4},
        {"LSE_EX2": True, "BLOCK_R": 256, "num_warps": 1, "UNROLL": 4},
        {"BLOCK_R": 1024, "num_warps": 4, "UNROLL": 4},
    ],
    "reduce_rows (rows=1)": [  # table: BLOCK_R 4096, 8 warps, 1024 chunks of >= 8192 (31 regs: 8 blocks/SM, 1 wave)
        # session 7: FINISH_LAST (the split's combine in the first launch, by each tile's last program)
        {"FINISH_LAST": True},
        {"FINISH_LAST": True, "target_programs": 2048, "min_chunk": 16384},
        {"FINISH_LAST": True, "target_programs": 1024, "min_chunk": 16384},
        {"FINISH_LAST": True, "COUNT32": True},
        # count_nonzero of every element
        {"WORDS": True, "BLOCK_R": 1024, "UNROLL": 4, "EVEN": True, "target_programs": 8192, "min_chunk": 16384},
        {"COUNT32": True},
        {"BLOCK_R": 1024, "num_warps": 4, "UNROLL": 2, "LOOP_STAGES": 3, "target_programs": 2048},
        {"BLOCK_R": 2048, "UNROLL": 4, "EVEN": True, "target_programs": 8192, "min_chunk": 16384},  # elementwise-like
        {"BLOCK_R": 2048, "UNROLL": 4, "EVEN": True, "INTERLEAVE": True, "target_per_sm": 8},      # grid-stride
        {"BLOCK_R": 2048, "UNROLL": 2, "LOOP_STAGES": 3, "target_per_sm": 4},  # cp.async: in flight whatever ptxas
        {"BLOCK_R": 2048, "UNROLL": 4, "EVEN": True, "INTERLEAVE": True, "target_per_sm": 4},
        {"UNROLL": 2, "EVEN": True, "target_programs": 16384, "min_chunk": 8192},
        {"BLOCK_R": 1024, "num_warps": 4, "UNROLL": 4, "EVEN": True, "INTERLEAVE": True, "target_per_sm": 16},
        {"BLOCK_R": 2048, "UNROLL": 4, "EVEN": True, "INTERLEAVE": True, "target_per_sm": 8, "EVICT": "evict_first"},
        {"BLOCK_R": 8192, "num_warps": 8},
    ],
    "softmax_rows": [  # table (wide rows): BLOCK_M 1, BLOCK_N 4096, 8 warps, one program per row
        {"programs_per_sm": 1, "BLOCK_N": 8192, "num_warps": 16, "LOOP_STAGES": 3},
        {"programs_per_sm": 1, "BLOCK_N": 8192, "num_warps": 16, "EVICT": "evict_last", "EVICT2": "evict_first"},
        {"BLOCK_N": 8192, "num_warps": 16},
        {"LOOP_STAGES": 3},
        {"programs_per_sm": 2, "BLOCK_N": 4096, "num_warps": 8, "LOOP_STAGES": 3},
        {"EVICT": "evict_last", "EVICT2": "evict_first"},
        {"programs_per_sm": 1, "BLOCK_N": 4096, "num_warps": 16, "LOOP_STAGES": 4},
        {"BLOCK_N": 2048, "num_warps": 4},
        {"FAST_EXP": False},
    ],
    "softmax_rows (8192)": [  # table (8192 columns): BLOCK_M 1, BLOCK_N 8192, 16 warps, one tile, IEEE division
        {"RCP": True},                                               # a reciprocal per row instead of a division
        {"RCP": True, "num_warps": 8},
        {"RCP": True, "programs_per_sm": 2, "LOOP_STAGES": 3},       # persistent, next row prefetched
        {"RCP": True, "BLOCK_M": 2},
    ],
    "norm_rows": [  # table (8192 columns): BLOCK_M 1, BLOCK_N 8192, 16 warps, one program per row
        {"programs_per_sm": 2, "LOOP_STAGES": 3},                    # persistent, params once, next row prefetched
        {"programs_per_sm": 1, "LOOP_STAGES": 3},
        {"num_warps": 8},
        {"programs_per_sm": 2, "LOOP_STAGES": 2, "maxnreg": 64},
        {"BLOCK_M": 2, "num_warps": 16, "maxnreg": 128},              # ptxas alone caps at 64 and spills
        {"programs_per_sm": 4, "num_warps": 8, "LOOP_STAGES": 2},
        {"HOIST_PARAMS": True, "num_warps": 8},                       # weight/bias loads overlap the row's
        {"EVICT": "evict_first", "EVICT2": "evict_first"},            # x streams past L1, weight/bias stay
        {"num_warps": 32},
    ],
}


class Case:
    """One benchmarked call: ``name``, the config op ``rule`` its kernel reads (overrides go there), the op's table
    name ``op``, the inputs (``InputSpec``s), ``call(tensors) -> result``, the cost arguments ``cost_args(tensors)
    -> (args, kwargs)``, the shape facts of the rule's key (for printing the table's setting) and ``group``: the
    key of :data:`VARIANTS` and of the per-rule summary (the rule, or the rule and the facts that select another
    of its entries)."""

    def __init__(self, name, rule, op, specs, call, cost_args, facts, sum_like=False, group=None):
        self.name, self.rule, self.op, self.specs, self.call = name, rule, op, specs, call
        self.cost_args, self.facts, self.sum_like, self.group = cost_args, facts, sum_like, group or rule


def build_cases(nbx, smoke: bool) -> list[Case]:
    F = nbx.nn.functional
    # smoke: the interpreter's tables (tiles of 16) see the GPU's paths: several tiles per reduced row, a looped
    # softmax row, norm rows of one tile
    rows, cols = (16, 24) if smoke else (32768, 8192)
    vrows, vcols = (2, 70) if smoke else (2048, 151936)
    nrows, ncols = (6, 16) if smoke else (32768, 8192)
    x = H.InputSpec((rows, cols), "bfloat16", "normal", seed=0)
    v = H.InputSpec((vrows, vcols), "bfloat16", "normal", seed=3)
    xn = H.InputSpec((nrows, ncols), "bfloat16", "normal", seed=0)
    w = H.InputSpec((ncols,), "bfloat16", "normal", seed=1)
    b = H.InputSpec((ncols,), "bfloat16", "normal", seed=2)
    out = []
    # ``state``: the values a lane keeps (the kernels' launch-key fact: 1 sum/extrema, 2 arg-extrema and
    # logsumexp, 3 var)
    for fname, fn, sum_like, nstate in (("sum", nbx.sum, True, 1), ("amax", nbx.amax, False, 1),
                                        ("max", nbx.max, False, 2), ("min", nbx.min, False, 2)):
        for dim, rule in ((-1, "reduce_rows"), (0, "reduce_cols")):
            facts = dict(rows=rows, cols=cols, state=nstate)
            label = f"{fname}(dim={dim})" if fname in ("max", "min") else f"{fname} dim{dim}"
            group = "reduce_rows (arg)" if nstate == 2 and rule == "reduce_rows" else None
            out.append(Case(label, rule, fname, [x], lambda t, fn=fn, dim=dim: fn(t[0], dim),
                            lambda t, dim=dim: ((t[0], dim), {}), facts, sum_like, group))
    out.append(Case("argmax dim-1", "reduce_rows", "argmax", [x], lambda t: nbx.argmax(t[0], -1),
                    lambda t: ((t[0], -1), {}), dict(rows=rows, cols=cols, state=2), False, "reduce_rows (arg)"))
    for fname, fn in (("aminmax", lambda t: nbx.aminmax(t, dim=-1)), ("nanmean", lambda t: nbx.nanmean(t, -1))):
        out.append(Case(f"{fname} dim-1", "reduce_rows", fname, [x], lambda t, fn=fn: fn(t[0]),
                        lambda t: ((t[0],), {"dim": -1}), dict(rows=rows, cols=cols, state=2), fname == "nanmean",
                        "reduce_rows (arg)"))
    out.append(Case("count_nonzero dim-1", "reduce_rows", "count_nonzero", [x], lambda t: nbx.count_nonzero(t[0], -1),
                    lambda t: ((t[0], -1), {}), dict(rows=rows, cols=cols, state=1), False,
                    "reduce_rows (count_nonzero)"))
    for fname, fn, nstate in (("var", nbx.var, 3), ("logsumexp", nbx.logsumexp, 2)):  # the heavier lane states
        out.append(Case(f"{fname} dim-1", "reduce_rows", fname, [x], lambda t, fn=fn: fn(t[0], -1),
                        lambda t: ((t[0], -1), {}), dict(rows=rows, cols=cols, state=nstate), True,
                        f"reduce_rows ({fname})"))
    xb = H.InputSpec((rows, cols), "bool", "normal", seed=4)
    for fname, fn in (("any", nbx.any), ("all", nbx.all)):  # 1-byte elements
        out.append(Case(f"{fname} dim-1 bool", "reduce_rows", fname, [xb], lambda t, fn=fn: fn(t[0], -1),
                        lambda t: ((t[0], -1), {}), dict(rows=rows, cols=cols, state=1), False,
                        "reduce_rows (bool)"))
    for fname, fn, sum_like, nstate in (("sum", nbx.sum, True, 1), ("max", nbx.max, False, 1),  # every element
                                        ("count_nonzero", nbx.count_nonzero, False, 1)):
        out.append(Case(f"{fname} all", "reduce_rows", fname, [x], lambda t, fn=fn: fn(t[0]),
                        lambda t: ((t[0],), {}), dict(rows=1, cols=rows * cols, state=nstate), sum_like,
                        "reduce_rows (rows=1)"))
    for name in ("softmax", "log_softmax"):
        out.append(Case(f"{name} {vrows}x{vcols}", "softmax_rows", name, [v],
                        lambda t, name=name: getattr(nbx, name)(t[0], -1), lambda t: ((t[0], -1), {}),
                        dict(rows=vrows, cols=vcols)))
    out.append(Case(f"softmax {nrows}x{ncols}", "softmax_rows", "softmax", [xn], lambda t: nbx.softmax(t[0], -1),
                    lambda t: ((t[0], -1), {}), dict(rows=nrows, cols=ncols), group="softmax_rows (8192)"))
    out.append(Case("layer_norm", "norm_rows", "layer_norm", [xn, w, b],
                    lambda t: F.layer_norm(t[0], [ncols], t[1], t[2], 1e-5),
                    lambda t: ((t[0], [ncols], t[1], t[2]), {"eps": 1e-5}), dict(rows=nrows, cols=ncols)))
    out.append(Case("rms_norm", "norm_rows", "rms_norm", [xn, w], lambda t: F.rms_norm(t[0], [ncols], t[1], 1e-6),
                    lambda t: ((t[0], [ncols], t[1]), {"eps": 1e-6}), dict(rows=nrows, cols=ncols)))
    return out


def smoke_settings(settings: dict) -> dict:
    """A variant's settings for the interpreter (--smoke): tiles capped at 32 and split targets at 16 (4 per SM),
    so the same code paths run on tiny shapes in seconds (the interpreter's cost grows with the tile)."""
    out = {}
    for k, v in settings.items():
        if k.startswith("BLOCK_") or k == "min_chunk":
            v = min(v, 32)
        elif k == "target_programs":
            v = min(v, 16)
        elif k == "target_per_sm":  # the interpreter counts 4 SMs
            v = min(v, 4)
        out[k] = v
    return out


def _outputs(res) -> list:
    return list(res) if isinstance(res, (tuple, list)) else [res]


def check_same(nbx, got, ref, sum_like: bool) -> str:
    """'ok' when every output of ``got`` matches ``ref`` (floats by the dtype's tolerance, NaN equal to NaN, a
    sum's absolute slack for reordered float32 accumulation; integers exactly), else a short reason. Runs on the
    device with the library's own ops (no host copy of 600 MB outputs)."""
    from nbxtensor.dtypes import table as T, tolerance
    g, r = _outputs(got), _outputs(ref)
    if len(g) != len(r):
        return f"mismatch: {len(g)} outputs, table {len(r)}"
    for k, (a, e) in enumerate(zip(g, r)):
        if tuple(a.shape) != tuple(e.shape) or a.dtype is not e.dtype:
            return f"mismatch: output {k} {a.dtype.name}{list(a.shape)} vs {e.dtype.name}{list(e.shape)}"
        if a.dtype.kind == T.KIND_FLOAT:
            tol = tolerance(a.dtype)
            ok = nbx.isclose(a.float(), e.float(), rtol=tol.rtol, atol=tol.atol + (1e-2 if sum_like else 0.0),
                             equal_nan=True).all().item()
        else:
            ok = (a == e).all().item()
        if not ok:
            return f"mismatch: output {k}"
    return "ok"


CSV_FIELDS = ["case", "op", "rule", "variant", "settings", "table_config", "status", "p20_ms", "p50_ms", "p80_ms",
              "gbps", "pct_of_4800", "bytes", "first_call_s", "gpu", "commit", "date"]


def main(argv=None) -> int:
    p = SC.sweep_parser(__doc__, "output folder (sweep_reduce.csv is written there)", budget_s=120.0,
                        wording="variants")
    p.add_argument("--cases", default="", help="comma-separated substrings of case names (default: all)")
    p.add_argument("--rules", default="", help="comma-separated config rules to sweep (default: all)")
    a = p.parse_args(argv)
    t0 = time.monotonic()
    import nbxtensor as nbx
    import nbxtensor.nn.functional  # noqa: F401  (functional ops register on import)
    from nbxtensor.ops import registry
    from nbxtensor.runtime.configs import launch_config
    dev = a.device
    st = SC.start("sweep_reduce", nbx, dev, a.out, a.smoke)
    if st is None:
        return 2
    facts, timing, notes, clock, commit, date = st.facts, st.timing, st.notes, st.clock, st.commit, st.date
    cases = build_cases(nbx, a.smoke)
    if a.cases:
        want = SC.names(a.cases)
        cases = [c for c in cases if any(w in c.name for w in want)]
    if a.rules:
        rules = {s.strip() for s in a.rules.split(",")}
        cases = [c for c in cases if c.rule in rules or c.group in rules]
    inputs = SC.Inputs(nbx, dev)

    state = {c.name: {"ref": None, "bytes": None, "table": None} for c in cases}
    csv_path = os.path.join(a.out, "sweep_reduce.csv")
    writer = SC.CsvRows(csv_path, CSV_FIELDS)
    plan = SC.rank_plan(cases, lambda c: VARIANTS[c.group])
    print(f"sweep_reduce: {len(plan)} variants over {len(cases)} cases on {facts['gpu']} (commit {commit}); "
          f"budget {a.budget_s:.0f} s", flush=True)

    def make_row(rank, case, settings):
        return {"case": case.name, "op": case.op, "rule": case.group, "variant": "table" if not settings else
                f"v{rank}", "settings": SC.fmt_settings(settings), "gpu": facts["gpu"], "commit": commit,
                "date": date}

    def run_variant(row, case, settings, t_var):
        cs = state[case.name]
        run_settings = smoke_settings(settings) if a.smoke else settings
        ts = inputs.tensors(case.specs)
        if cs["bytes"] is None:
            args, kwargs = case.cost_args(ts)
            c = registry.get(case.op).cost(*args, **kwargs)
            cs["bytes"] = int(c.bytes_read + c.bytes_written)
            cs["table"] = launch_config(case.rule, ts[0].device, dtypes=(ts[0].dtype,), **case.facts)
        row["table_config"] = SC.fmt_settings(cs["table"])
        row["bytes"] = cs["bytes"]
        if not settings and cs["ref"] is not None:
            raise RuntimeError("table variant ran twice")

        def check(res):
            if not settings:
                cs["ref"] = res
                return "ok (reference)"
            if cs["ref"] is None:
                return "unchecked (the table variant failed)"
            return check_same(nbx, res, cs["ref"], case.sum_like)
        times = SC.check_then_time(row, case.rule, run_settings, lambda: case.call(ts), check, clock, timing, t_var)
        row.update(SC.bandwidth_fields(times, cs["bytes"]))
    rows, skipped = SC.run_plan(plan, budget_s=a.budget_s, t0=t0, est=0.5 if a.smoke else 3.0, make_row=make_row,
                                run_variant=run_variant, writer=writer,
                                log_path=os.path.join(a.out, "sweep_reduce.log"))
    for c in cases:  # free the references before printing
        state[c.name]["ref"] = None
    report(rows, cases, state, skipped, time.monotonic() - t0, a.budget_s, csv_path, notes)
    return 0


def report(rows, cases, state, skipped, wall, budget, csv_path, notes) -> None:
    """The compact table: per case the table setting and the best (up to 3) variants, then the best per case and
    per rule (geometric mean of GB/s over the rule's cases, variants that ran and matched on all of them)."""
    SC.report_rank_sweep("sweep_reduce", rows, cases, state, skipped, wall, budget, csv_path, notes,
                         target_pct=TARGET_PCT, group_field="rule", case_width=28, group_width=20,
                         heading="per rule, best geometric mean over its cases (write into runtime/configs/sm90.json):",
                         missing="{group}: no setting ran on all of {names}",
                         rule_config=True, is_mismatch=lambda status: status.startswith("mismatch"))


if __name__ == "__main__":
    sys.exit(main())
