"""Sweep of the decode-attention kernels' settings (``decode_attention`` in runtime/configs/sm90.json) on the GPU.

Decode attention reads the whole KV cache once per step, so its measure is bandwidth: GB/s of (K + V + q + out)
bytes and the percentage of the H200's 4800 GB/s (the issue's target: >= 80 % for contexts 4k-32k, GQA 8,
batch 1 included). Shapes: bf16, head dim 128, 32 query heads over 4 kv heads (GQA 8, benchmarks/shapes.json's
decode rows), batch 1 at 4k/16k/32k and batches 64/32/16/8 at 4k/8k/16k/32k (256 MiB of K), a batch-1 32k row
with 8 kv heads (GQA 4, Llama-3-8B), and the paged cache (block size 16, pages in a random order) at batch 16 x
16k and batch 1 x 32k. Every cache is full (no ``cache_seqlens``).

Variants are laid over the table's rule with :func:`nbxtensor.runtime.configs.override`, in three phases, each
ordered most promising first:

1. kernel settings (each a compile): ``BLOCK_N``, ``num_warps``, ``num_stages``, ``TMA`` (tensor-descriptor
   loads of the contiguous cache), ``min_block_h`` (query rows per program: 16, mma.sync, or 64, Hopper's
   wgmma with the GQA group padded), on the contiguous shapes; then the paged shapes for the table and the
   best three;
2. split-count settings on the best kernel of phase 1 (no compile): ``split_rule`` ``"target"`` /
   ``"waves"``, ``target_programs`` (for ``"waves"``: programs resident at once, SMs x CTAs per SM),
   ``min_chunk``, ``max_splits``;
3. combine-kernel settings on the best so far: ``BLOCK_S`` (splits per step), ``combine_dv`` (output columns
   per program), ``combine_warps``.

Phase 1 may use the budget up to 55 %, the paged rows up to 68 %, phase 2 up to 84 %, phase 3 the rest (a phase
that finishes early leaves its time to the next). Each (variant, shape) is timed through
``ops.decode_attention.launch_decode`` on a preallocated output (the kernels' own cost) with CUDA events and an L2
flush before every run (benchmarks/harness.py: ``run_benchmark``, ``percentiles``). Its first output is checked
with the attention tolerance against the float64 oracle on the rows of two (sequence, kv head) pairs and, as a
whole, against the table variant's output (run first); the paged table output against the contiguous one of the
same data; the output after the timed runs must have the first call's bits (a replayed decode step is
byte-identical; else ``NONDETERMINISTIC``). A mismatch is marked ``!``, never hidden; every exception is
recorded and the sweep goes on. For the table variant the host cost of one call is the wall time of 200 back-to-back calls without synchronisation / 200
through four entries (``launch_decode``, ``nn.functional.decode_attention``,
``nn.functional.scaled_dot_product_attention`` with a one-row query, the path benchmarks/bench_ops.py measures,
and ``ops.decode_attention.sdpa_decode``, the short path SDPA can take for a decode step), plus the latency of one
synchronised call; the SDPA path is also timed with events, so host overhead that leaks into the measured time
shows. The sweep stops starting work when ``--budget-s`` (default 100 s, compiles included) would be exceeded.

Run on the H200 from the source tree::

    PYTHONPATH=src python3 benchmarks/sweep_decode_attention.py --out $OUT/sweep --budget-s 100

``--new`` runs only the table and this round's ``NEW_VARIANTS`` (the kernel phase may then use 85 % of the
budget, the paged rows the rest; no split or combine phase)::

    PYTHONPATH=src python3 benchmarks/sweep_decode_attention.py --new --out $OUT/sweep --budget-s 85

Smoke test on a host without a GPU (the interpreter runs the same code paths on tiny shapes)::

    NBX_TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/sweep_decode_attention.py --device cpu --smoke \
        --out /tmp/sw

Writes ``DIR/sweep_decode_attention.csv`` (one row per variant and shape) and prints a table of GB/s and % of
4800 GB/s per shape, the host costs, the best variant per shape and overall (geometric mean over the shapes) and
the settings to write into sm90.json.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep_common as SC  # noqa: E402  (puts src on the path)

import numpy as np  # noqa: E402

import harness as H  # noqa: E402

OP = "decode_attention"
PEAK_GBPS = SC.PEAK_GBPS  # H200 datasheet HBM3e

# label, batch, query heads, kv heads, context, head dim, page size (0: contiguous)
SHAPES = [("b1-32k", 1, 32, 4, 32768, 128, 0), ("b1-16k", 1, 32, 4, 16384, 128, 0),
          ("b1-4k", 1, 32, 4, 4096, 128, 0), ("b64-4k", 64, 32, 4, 4096, 128, 0),
          ("b32-8k", 32, 32, 4, 8192, 128, 0), ("b16-16k", 16, 32, 4, 16384, 128, 0),
          ("b8-32k", 8, 32, 4, 32768, 128, 0), ("b1-32k-kv8", 1, 32, 8, 32768, 128, 0),
          ("p16-b16-16k", 16, 32, 4, 16384, 128, 16), ("p16-b1-32k", 1, 32, 4, 32768, 128, 16)]
SMOKE_SHAPES = [("s-b1", 1, 8, 1, 100, 64, 0), ("s-b2", 2, 8, 2, 48, 64, 0), ("s-p16", 2, 8, 2, 48, 64, 16)]


def _v(name, **s):
    return name, s


# Phase 1: kernel tiles (one compile each). From ahead-of-time sm90 compiles of the bf16 hd128 kernel (Triton 3.6):
# with 16 query rows (mma.sync, warps split the keys) BLOCK_N 64 takes ~38/72/104 KB of shared memory at 2/3/4
# stages, BLOCK_N 128 ~74 KB at 2, BLOCK_N 32 ~54 KB at 4, 64-120 registers; with 64 query rows ("wg64",
# min_block_h=64: wgmma, warps split the rows, no cross-warp softmax reduction, the rows past G are padding)
# ~82 KB at 2 stages, 134-175 registers. More resident programs per SM hide the per-tile softmax latency.
# New kernel structure (each a config key, default off; ahead-of-time sm90 compiles of the bf16 hd128 kernel):
# - lazy_rowsum: the row sums of p are kept as a [16, BLOCK_N] tile and reduced once per split, one of the two
#   cross-warp reductions (shared memory + barriers) per key tile goes (table kernel: 23 -> 20 BAR.SYNC, 96 regs);
# - fuse_combine=N: with 2..N splits the split kernel's last program per (sequence, kv head) combines the partials
#   in split order (an arrival counter, as ops/matmul.py's split-K) and the combine launch goes (the benchmark's
#   b64-4k/b32-8k/b8-32k have 5/9/32 splits; batch 1 has 128: left to the combine kernel). The combine runs at
#   the kernel's end, so it loads all splits at once (one block of up to fuse_block_s=32): maxnreg=96 keeps the
#   4-warp kernel at its 96 registers (5 programs per SM; without it the 32-split combine takes 126-240 and
#   costs a program per SM; with it no spills);
# - num_warps=1: one warp owns the 16 query rows and the keys of a tile, so the softmax needs no cross-warp
#   reduction at all (BLOCK_N 16, 4 stages: 138 regs, 28 KB of shared memory, 7 programs per SM).
# Session 4, second round (run first; ``--new`` runs only these and the table, < 90 s). The table (lazy_rowsum,
# waves at 528 programs, min_chunk 128) pays a second launch for the combine (~6 us of ~140 at b8-32k). New keys:
# - fuse_fold=U (with fuse_combine=N): the last program of each (sequence, kv head) folds the partials one after
#   another in split order with a running maximum, U splits' loads in flight per step, over the 8 rows of the
#   GQA group (not 16) and all 128 columns at once: 14 splits at U=8 are 2 L2 round trips at the kernel's end
#   (the old fused combine: [16, 32, 8] tiles in 16 steps). sm_90: 96 registers as the table (no spills), the
#   fold's 8 LDG.E.128 + 16 scalar loads (U=4) issued before its arithmetic;
# - fuse_group=G: more than G splits (batch 1: 114-228) fold in two levels (each group of G splits by its
#   last program, then the groups by the last group), so no program folds 100+ partials at the end;
# - combine_one: the separate combine loads m, l and acc once (one L2 round trip; same bits as the table);
# - maxnreg 80/72/64 (6/7/8 programs per SM by registers; 37 KB of shared memory at 3 stages caps at 6, 2 stages
#   ~20 KB) with the wave target raised to match; BLOCK_N 64 with 8 warps.
FOLD = dict(fuse_combine=256, fuse_fold=8, fuse_group=16)
NEW_VARIANTS = [
    _v("fold8 g16", **FOLD),
    _v("fold8 g16 maxnreg80 6/SM", **FOLD, maxnreg=80, target_programs=792),
    _v("fold8 g16 waves 5/SM", **FOLD, target_programs=660),
    _v("combine one", combine_one=True),
    _v("fold8 g16 b1 t1056 s256", **FOLD, target_programs=1056, max_splits=256),
    _v("fold8 g16 waves 2/SM", **FOLD, target_programs=264),
    _v("fold8 g16 waves 3/SM", **FOLD, target_programs=396),
    _v("fold4 g16", **{**FOLD, "fuse_fold": 4}),
    _v("fold8 g16 s2 maxnreg72 7/SM", **FOLD, num_stages=2, maxnreg=72, target_programs=924),
    _v("s2 maxnreg64 8/SM combine one", num_stages=2, maxnreg=64, target_programs=1056, combine_one=True),
    _v("fold8 g16 n64 w8", **FOLD, BLOCK_N=64, num_warps=8),
    _v("fold8 g8 b1 t1056 s256", **{**FOLD, "fuse_group": 8}, target_programs=1056, max_splits=256),
]

KERNEL_VARIANTS = [
    _v("table"),
    *NEW_VARIANTS,
    _v("fuse32 lazy", fuse_combine=32, lazy_rowsum=True, maxnreg=96),
    _v("lazy", lazy_rowsum=True),
    _v("w1 n16 s4 fuse32 lazy", num_warps=1, BLOCK_N=16, num_stages=4, lazy_rowsum=True, fuse_combine=32,
       split_rule="waves", target_programs=924, min_chunk=128, max_splits=256),
    _v("n64 s3 fuse32 lazy", BLOCK_N=64, num_stages=3, lazy_rowsum=True, fuse_combine=32),
    _v("tma n64 s3 fuse32 lazy", BLOCK_N=64, num_stages=3, TMA=True, lazy_rowsum=True, fuse_combine=32),
    # batch 1 (4 kv heads: 4 sequences x heads, 64 MiB) is one partial wave of short programs: deeper pipelines
    # and wider tiles put more bytes in flight per program (BLOCK_N 64 at 4 stages: ~104 KB of shared memory, 2
    # programs per SM, 96 KB in flight each); the table can give it a rule of its own ("max_batch_kv_heads": 8)
    _v("b1 n64 s4 lazy t264", BLOCK_N=64, num_stages=4, lazy_rowsum=True, target_programs=264, max_splits=256),
    _v("fuse32", fuse_combine=32, maxnreg=96),
    _v("waves5 fuse32 lazy", lazy_rowsum=True, fuse_combine=32, maxnreg=96, split_rule="waves",
       target_programs=660, min_chunk=128),
    _v("w2 n32 s3 fuse32 lazy", num_warps=2, BLOCK_N=32, num_stages=3, lazy_rowsum=True, fuse_combine=32,
       split_rule="waves", target_programs=660, min_chunk=128),
    _v("w1 n16 s3 fuse32 lazy", num_warps=1, BLOCK_N=16, num_stages=3, lazy_rowsum=True, fuse_combine=32,
       split_rule="waves", target_programs=1188, min_chunk=128, max_splits=256),
    _v("b1 n32 s4 lazy t528", BLOCK_N=32, num_stages=4, lazy_rowsum=True, target_programs=528, max_splits=256),
    _v("tma n64 w4 s3", TMA=True),
    _v("wg64 tma n64 s2", min_block_h=64, BLOCK_N=64, num_warps=4, num_stages=2, TMA=True),
    _v("n64 w4 s2", BLOCK_N=64, num_warps=4, num_stages=2),
    _v("tma n128 w4 s2", BLOCK_N=128, num_warps=4, num_stages=2, TMA=True),
    _v("wg64 n64 s2", min_block_h=64, BLOCK_N=64, num_warps=4, num_stages=2),
    _v("n128 w8 s2", BLOCK_N=128, num_warps=8, num_stages=2),
    _v("tma n64 w4 s2", BLOCK_N=64, num_warps=4, num_stages=2, TMA=True),
    _v("n64 w4 s4", BLOCK_N=64, num_warps=4, num_stages=4),
    _v("wg64 tma n128 s2", min_block_h=64, BLOCK_N=128, num_warps=4, num_stages=2, TMA=True),
    _v("n32 w4 s4", BLOCK_N=32, num_warps=4, num_stages=4),
    _v("tma n128 w8 s2", BLOCK_N=128, num_warps=8, num_stages=2, TMA=True),
    _v("wg64 tma n32 s4", min_block_h=64, BLOCK_N=32, num_warps=4, num_stages=4, TMA=True),
    _v("n64 w8 s3", BLOCK_N=64, num_warps=8, num_stages=3),
    _v("tma n64 w4 s4", BLOCK_N=64, num_warps=4, num_stages=4, TMA=True),
    _v("n128 w4 s2", BLOCK_N=128, num_warps=4, num_stages=2),
    _v("n32 w4 s3", BLOCK_N=32, num_warps=4, num_stages=3),
]

# Phase 2: split counts (132 SMs on the H200: 396 = 3 programs per SM at once, 660 = 5, 264 = 2). The table
# kernel (96 regs x 128 threads, 37 KB shared) fits 5 programs per SM; batch 1 (4 kv heads) gets 128 splits of 256
# keys (512 programs, one partial wave): the "b1" rows give it more, shorter splits.
SPLIT_VARIANTS = [
    # session 8: chunks below 128 keys (never swept: every earlier split variant had min_chunk >= 128, so batch 1
    # at 4k ran 32 splits x 4 kv heads = 128 programs, one per SM at 6 % achieved occupancy, ncu)
    _v("b1 waves 4/SM s256 c64", split_rule="waves", target_programs=528, min_chunk=64, max_splits=256),
    _v("b1 waves 8/SM s512 c32", split_rule="waves", target_programs=1056, min_chunk=32, max_splits=512),
    _v("b1 target 1056 s256 c64", split_rule="target", target_programs=1056, min_chunk=64, max_splits=256),
    _v("b1 target 2112 s512 c32", split_rule="target", target_programs=2112, min_chunk=32, max_splits=512),
    _v("b1 waves 5/SM s256 c128", split_rule="waves", target_programs=660, min_chunk=128, max_splits=256),
    _v("b1 target 2640 s256 c128", split_rule="target", target_programs=2640, min_chunk=128, max_splits=256),
    _v("waves 3/SM", split_rule="waves", target_programs=396, min_chunk=128),
    _v("waves 5/SM", split_rule="waves", target_programs=660, min_chunk=128),
    _v("waves 2/SM", split_rule="waves", target_programs=264, min_chunk=128),
    _v("waves 4/SM", split_rule="waves", target_programs=528, min_chunk=128),
    _v("target 2112", split_rule="target", target_programs=2112),
    _v("target 528", split_rule="target", target_programs=528),
    _v("target 1056 chunk 512", split_rule="target", target_programs=1056, min_chunk=512),
    _v("waves 3/SM chunk 256", split_rule="waves", target_programs=396, min_chunk=256),
    _v("target 1056 chunk 128 s256", split_rule="target", target_programs=1056, min_chunk=128, max_splits=256),
]

# Phase 3: the combine kernel.
COMBINE_VARIANTS = [
    _v("comb s64 dv32 w2", BLOCK_S=64, combine_dv=32, combine_warps=2),
    _v("comb s32 dv64 w4", BLOCK_S=32, combine_dv=64, combine_warps=4),
    _v("comb s128 dv32 w4", BLOCK_S=128, combine_dv=32, combine_warps=4),
    _v("comb s16 dv128 w4", BLOCK_S=16, combine_dv=128, combine_warps=4),
]

SMOKE_VARIANTS = {"table", "fold8 g16", "fold4 g16", "combine one", "fuse32 lazy", "w1 n16 s4 fuse32 lazy",
                  "tma n64 w4 s3", "wg64 tma n64 s2", "waves 3/SM",
                  "comb s64 dv32 w2"}

# Shares of the budget each phase may use up to (kernel, paged, split, combine): every phase gets some time.
SHARES = (0.55, 0.68, 0.84, 1.0)

CSV_COLUMNS = ["run_id", "phase", "variant", "settings", "shape", "splits", "fused", "status", "check", "replay",
               "max_excess",
               "p20_ms", "p50_ms", "p80_ms", "reps", "bytes", "gbps", "pct_4800", "sdpa_p50_ms", "sdpa_gbps",
               "host_us_launch", "host_us_decode", "host_us_sdpa", "host_us_sdpa_decode", "sync_us", "error", "gpu",
               "commit", "date"]


# ---------------------------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------------------------
class Case:
    """One shape's tensors: q ``[B, Hq, D]``, the cache (contiguous ``[B, Hkv, ctx, D]`` views of two shared
    buffers, or pages in a random order with their block table), a preallocated output."""

    def __init__(self, nbx, dev, spec, kbuf, vbuf):
        self.label, self.B, self.Hq, self.Hkv, self.ctx, self.D, self.page = spec
        B, Hq, Hkv, ctx, D, page = self.B, self.Hq, self.Hkv, self.ctx, self.D, self.page
        seed = 1000 * B + Hq  # one query per (batch, heads): a paged row and its contiguous twin share it
        g = nbx.Generator(device=dev).manual_seed(seed)
        self.q = nbx.randn(B, Hq, D, dtype=nbx.bfloat16, device=dev, generator=g)
        rows = B * Hkv * ctx
        self.k = kbuf[:rows * D].view(B, Hkv, ctx, D)  # contiguous views: no copy
        self.v = vbuf[:rows * D].view(B, Hkv, ctx, D)
        self.out = nbx.empty(B, Hq, D, dtype=nbx.bfloat16, device=dev)
        self.bt = None
        if page:
            import nbxtensor.nn.functional as F
            nblk = ctx // page
            perm = np.random.default_rng(seed).permutation(B * nblk)   # logical page i -> physical perm[i]
            inv = np.empty_like(perm)
            inv[perm] = np.arange(perm.size)
            idx = nbx.from_numpy(inv.astype(np.int64)).to(dev) if dev != "cpu" else nbx.from_numpy(inv.astype(np.int64))

            def pages(t):  # [B, Hkv, ctx, D] -> logical pages [B * nblk, page * Hkv * D] -> physical order
                lp = t.view(B, Hkv, nblk, page, D).permute(0, 2, 3, 1, 4).contiguous().view(B * nblk, -1)
                return F.embedding(idx, lp).view(B * nblk, page, Hkv, D)
            self.kp, self.vp = pages(self.k), pages(self.v)
            bt = perm.reshape(B, nblk).astype(np.int32)
            self.bt = nbx.from_numpy(bt).to(dev) if dev != "cpu" else nbx.from_numpy(bt)
            self.lens = nbx.from_numpy(np.full(B, ctx, np.int32))
            if dev != "cpu":
                self.lens = self.lens.to(dev)
        self.bytes = 2 * B * Hkv * ctx * D * 2 + 2 * B * Hq * D * 2  # K + V + q + out (bf16)

    def twin_key(self) -> tuple:
        """The data this case attends over: a paged case and its contiguous twin share it (and the query)."""
        return self.B, self.Hq, self.Hkv, self.ctx, self.D

    def plan(self, launch_plan) -> dict:
        if self.page:
            return launch_plan(self.q, self.kp, self.vp, self.lens, self.out, paged=True, block_table=self.bt)
        return launch_plan(self.q, self.k, self.v, None, self.out, paged=False)

    def run(self, launch_decode, scale: float):
        if self.page:
            return lambda: launch_decode(self.q, self.kp, self.vp, self.lens, self.out, scale=scale, paged=True,
                                         block_table=self.bt)
        return lambda: launch_decode(self.q, self.k, self.v, None, self.out, scale=scale, paged=False)


def host_of(t) -> np.ndarray:
    """A bf16 tensor as float64 host values."""
    from nbxtensor.dtypes import table as T
    from nbxtensor.dtypes.casting import cast_array
    return cast_array(np.asarray(t.cpu().numpy()), T.bfloat16, T.float64)


def excess(out: np.ndarray, ref: np.ndarray, mag: float, tol) -> float:
    """``max(|out - ref| - atol - rtol * (|ref| + mag))``: <= 0 passes; NaN anywhere gives NaN."""
    err = np.abs(out - ref) - (tol.atol + tol.rtol * (np.abs(ref) + mag))
    return math.nan if np.isnan(err).any() else float(err.max())


def group_oracle(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """float64 attention of one kv head's query rows ``q [G, E]`` over its keys and values ``[n, E]``: the output
    and the magnitude ``P|V|`` (``ops.decode_attention.decode_oracle``'s formula without its per-head copies,
    which would take gigabytes at 32k keys; the smoke run checks that the two agree)."""
    s = (q @ k.T) * scale
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p @ v, p @ np.abs(v)


def oracle_rows(c: Case, scale: float, smoke: bool = False) -> list:
    """``(b, heads, ref, mag)`` of two (sequence, kv head) pairs: the float64 output rows of that kv head's query
    heads and their magnitude ``P|V|`` (the tolerance rule's scale)."""
    G = c.Hq // c.Hkv
    res = []
    for b, kh in ((0, 0), (c.B - 1, c.Hkv - 1)):
        q, k, v = host_of(c.q[b, kh * G:(kh + 1) * G]), host_of(c.k[b, kh]), host_of(c.v[b, kh])
        ref, mag = group_oracle(q, k, v, scale)
        if smoke:
            from nbxtensor.ops.decode_attention import decode_oracle
            np.testing.assert_allclose(ref, decode_oracle(q[None], k[None, None], v[None, None], None, scale)[0],
                                       rtol=1e-12, atol=1e-12)
        res.append((b, slice(kh * G, (kh + 1) * G), ref, mag))
    return res


def oracle_excess(out: np.ndarray, rows: list, tol) -> float:
    """The worst excess of ``out``'s sampled rows over the declared tolerance against the oracle; <= 0 passes."""
    worst = -math.inf
    for b, hs, ref, mag in rows:
        e = excess(out[b, hs], ref, mag, tol)
        if math.isnan(e):
            return e
        worst = max(worst, e)
    return worst


# ---------------------------------------------------------------------------------------------------------------
# Host cost
# ---------------------------------------------------------------------------------------------------------------
def sync_latency_us(nbx, fn, dev: str, n: int) -> float:
    """Median wall time of one call followed by a device synchronisation (the latency a decode step sees)."""
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        if dev != "cpu":
            nbx.cuda.synchronize()
        ts.append((time.perf_counter() - t0) * 1e6)
    return float(np.median(ts))


# ---------------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------------
def parse_args(argv):
    p = SC.sweep_parser(__doc__, "output folder (sweep_decode_attention.csv is appended to)", budget_s=100.0)
    p.add_argument("--shapes", default="", help="comma-separated shape labels (default: all)")
    p.add_argument("--variants", default="", help="comma-separated variant names to run (the table always runs)")
    p.add_argument("--list", action="store_true", help="print the shapes and variants and exit")
    p.add_argument("--new", action="store_true", help="only the table and NEW_VARIANTS (this round's keys)")
    return p.parse_args(argv)


def _all_variants():
    return ([("kernel",) + v for v in KERNEL_VARIANTS] + [("split",) + v for v in SPLIT_VARIANTS]
            + [("combine",) + v for v in COMBINE_VARIANTS])


def main(argv=None) -> int:
    a = parse_args(argv)
    budget = SC.Budget(a.budget_s)
    shapes = SMOKE_SHAPES if a.smoke else SHAPES
    if a.shapes:
        want = set(SC.names(a.shapes))
        shapes = [s for s in shapes if s[0] in want]
        if not shapes:
            print(f"sweep_decode_attention: no shape among {sorted(want)}; known: {[s[0] for s in SHAPES]}",
                  file=sys.stderr)
            return 2
    variants = _all_variants()
    if a.smoke:  # the interpreter runs a call in about a second: a few variants of each phase
        variants = [v for v in variants if v[1] in SMOKE_VARIANTS]
    if a.new:
        fresh = {n for n, _ in NEW_VARIANTS} | {"table"}
        variants = [v for v in variants if v[1] in fresh and v[0] == "kernel"]
    if a.variants:
        want = set(SC.names(a.variants))
        unknown = want - {v[1] for v in variants}
        if unknown:
            print(f"sweep_decode_attention: unknown variants {sorted(unknown)}; known: {[v[1] for v in variants]}",
                  file=sys.stderr)
            return 2
        variants = [v for v in variants if v[1] in want or v[1] == "table"]
    if a.list:
        for s in shapes:
            print("shape", s)
        for phase, name, s in variants:
            print(f"{phase:8s} {name:28s} {json.dumps(s, sort_keys=True)}")
        return 0

    import nbxtensor as nbx
    import nbxtensor.nn.functional as F
    from nbxtensor.ops import decode_attention as DA
    from nbxtensor.ops.attention import attention_tolerance
    from nbxtensor.runtime.configs import launch_config
    dev = a.device
    st = SC.start("sweep_decode_attention", nbx, dev, a.out, a.smoke, warmup_ms=3.0, rep_ms=15.0, min_reps=5,
                  max_reps=40, smoke_rep_ms=0.0, smoke_max_reps=1, utc=True, hint="use --device cpu --smoke")
    if st is None:
        return 2
    facts, run_id, commit, date = st.facts, st.run_id, st.commit, st.date
    # one timed run per measurement for --smoke: the interpreter takes about a second per call
    bench = SC.make_bench(st.clock, st.timing, one_shot=a.smoke)
    log_path = os.path.join(a.out, "sweep_decode_attention.log")
    tol = attention_tolerance(nbx.bfloat16, 128)
    host_n = 1 if a.smoke else 200

    # one pair of K/V buffers holds every contiguous cache (the large shapes all have 2**20 rows per head dim)
    numel = max(s[1] * s[3] * s[4] * s[5] for s in shapes)
    g = nbx.Generator(device=dev).manual_seed(7)
    kbuf = nbx.randn(numel, dtype=nbx.bfloat16, device=dev, generator=g)
    vbuf = nbx.randn(numel, dtype=nbx.bfloat16, device=dev, generator=g)
    cases = []
    for spec in shapes:  # a shape whose inputs cannot be built is reported and left out, never stops the sweep
        try:
            cases.append(Case(nbx, dev, spec, kbuf, vbuf))
        except Exception as e:  # noqa: BLE001
            print(f"sweep_decode_attention: shape {spec[0]} left out: {type(e).__name__}: {e}", flush=True)
            SC.log_traceback(log_path, f"inputs of {spec[0]}")
    if not cases:
        print("sweep_decode_attention: no shape could be built", file=sys.stderr)
        return 1
    if dev != "cpu":
        nbx.cuda.synchronize()
    rule = launch_config(OP, nbx.device(dev), dtypes=(nbx.bfloat16,), head_dim=shapes[0][5], ctx=shapes[0][4],
                         batch_kv_heads=shapes[0][1] * shapes[0][3])
    print(f"sweep_decode_attention: {facts['gpu']} ({facts.get('arch')}), commit {commit}; budget {a.budget_s:.0f} "
          f"s; inputs ready ({budget.elapsed():.0f} s)\ntable rule (bf16, hd {shapes[0][5]}): "
          f"{json.dumps(rule, sort_keys=True)}", flush=True)

    refs: dict = {}      # data key -> the table variant's output (host)
    oracles: dict = {}   # data key -> oracle rows
    results: dict = {}   # variant -> label -> row
    settings_of: dict = {}
    skipped: list = []   # where a phase ran out of its share
    stopped = None

    def run_variant(phase, name, settings, subset, share=1.0):
        """Time ``settings`` on ``subset``; False once the phase's share of the budget is spent."""
        nonlocal stopped
        settings_of[name] = settings
        until = budget.until(share)
        for c in subset:
            if not budget.allows(c.label, until):  # the last (variant, shape) pair's cost as the estimate
                skipped.append(f"{phase}: stopped before {name} / {c.label} ({budget.elapsed():.0f} s)")
                if until >= budget.deadline:
                    stopped = skipped[-1]
                return False
            row = {"run_id": run_id, "phase": phase, "variant": name, "settings": json.dumps(settings, sort_keys=True),
                   "shape": f"{c.B}x{c.Hq}x{c.Hkv}x{c.ctx}x{c.D}" + (f"/p{c.page}" if c.page else ""),
                   "bytes": c.bytes, "gpu": facts["gpu"], "commit": commit, "date": date}
            s = dict(settings)
            if a.smoke and s.get("BLOCK_N", 0) > 32:  # the interpreter: the same code paths with smaller tiles
                s["BLOCK_N"] = 32
            if a.smoke and s.get("min_chunk", 0) > 16:  # several splits of the tiny caches (the fused combine runs)
                s["min_chunk"] = 16
            if a.smoke and s.get("fuse_group", 0) > 2:  # the two-level fold on the tiny caches' few splits
                s["fuse_group"] = 2
            scale = 1.0 / math.sqrt(c.D)
            fn = c.run(DA.launch_decode, scale)
            ts = time.monotonic()
            try:
                with SC.laid_over(OP, s):
                    fn()  # compiles
                    if dev != "cpu":
                        nbx.cuda.synchronize()
                    plan = c.plan(DA.launch_plan)
                    row["splits"] = plan["splits"]
                    row["fused"] = int(bool(plan.get("fused")))
                    first = c.out.cpu().numpy().tobytes()  # the replay check below compares the bits
                    out = host_of(c.out)
                    key = c.twin_key()
                    if key not in oracles:  # the table variant runs first: the oracle rows of this data
                        oracles[key] = oracle_rows(c, scale, a.smoke)
                    rows_ = oracles[key]
                    mag = max(float(np.max(m)) for _, _, _, m in rows_)  # ~P|V| of every row (random data)
                    worst = oracle_excess(out, rows_, tol)
                    if name == "table":
                        twin = refs.get(key)
                        if c.page and twin is not None:  # the paged table output against the contiguous one
                            worst = max(worst, excess(out, twin, mag, tol))
                        row["check"] = ("oracle ok" if worst <= 0 else "ORACLE MISMATCH") + (
                            " = contiguous" if c.page and twin is not None else "")
                        refs.setdefault(key, out)
                    else:
                        ref = refs.get(key)
                        if ref is not None:
                            worst = max(worst, excess(out, ref, mag, tol))
                        row["check"] = "ok" if worst <= 0 else "MISMATCH"
                    row["max_excess"] = worst
                    times = bench(fn)
                    # a replayed step (the last timed run) gives the first call's bits: the fixed-order combine
                    same = c.out.cpu().numpy().tobytes() == first
                    row["replay"] = "same bits" if same else "DIFFERENT BITS"
                    if not same:
                        row["check"] += " NONDETERMINISTIC"
                    if name == "table":
                        row["host_us_launch"] = SC.host_cost_us(nbx, fn, dev, host_n)
                        row["sync_us"] = sync_latency_us(nbx, fn, dev, 1 if a.smoke else 20)
                        if not c.page:
                            q4 = c.q.unsqueeze(2)
                            dec = (lambda c=c: F.decode_attention(c.q, c.k, c.v))
                            sdpa = (lambda c=c, q4=q4: F.scaled_dot_product_attention(q4, c.k, c.v, enable_gqa=True))
                            row["host_us_decode"] = SC.host_cost_us(nbx, dec, dev, host_n)
                            row["host_us_sdpa"] = SC.host_cost_us(nbx, sdpa, dev, host_n)
                            fast = (lambda c=c, q4=q4: DA.sdpa_decode(q4, c.k, c.v, enable_gqa=True))
                            row["host_us_sdpa_decode"] = SC.host_cost_us(nbx, fast, dev, host_n)
                            st = bench(sdpa)
                            row["sdpa_p50_ms"] = H.percentiles(st)[1]
                            row["sdpa_gbps"] = c.bytes / (row["sdpa_p50_ms"] * 1e-3) / 1e9
                p20, p50, p80, gbps, pct = SC.bandwidth(times, c.bytes)
                row.update(status="ok", p20_ms=p20, p50_ms=p50, p80_ms=p80, reps=len(times), gbps=gbps,
                           pct_4800=pct)
            except Exception as e:  # noqa: BLE001 - one failing variant never stops the sweep
                row.update(status="error", error=SC.error_text(e))
                SC.log_traceback(log_path, f"{name} / {c.label}")
            budget.record(c.label, ts)
            results.setdefault(name, {})[c.label] = row
            H.append_csv(os.path.join(a.out, "sweep_decode_attention.csv"), [row], CSV_COLUMNS)
        return True

    contiguous = [c for c in cases if not c.page]
    paged = [c for c in cases if c.page]
    # Phase 1 on the contiguous caches (each variant compiles its kernels once per cache kind). Each phase may use
    # the budget up to its share, so that every phase gets some time.
    shares = (0.85, 1.0, 1.0, 1.0) if a.new else SHARES  # --new: no split or combine phase after the kernels
    for ph, name, settings in variants:
        if ph == "kernel" and not run_variant(ph, name, settings, contiguous or cases, shares[0]):
            break
    # Phase 1b: the paged caches for the table and the best three kernel variants (TMA does not apply to pages).
    if paged and not stopped:
        ranked = ranking(results, [c.label for c in contiguous]) if contiguous else list(results)
        seen = set()
        for name in ["table"] + [n for n in ranked if n != "table"]:
            key = json.dumps({k: v for k, v in settings_of[name].items() if k != "TMA"}, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > 4 or not run_variant("kernel", name, settings_of[name], paged, shares[1]):
                break
    # Phases 2 and 3 on every shape, on top of the best settings so far.
    for phase, share in (("split", shares[2]), ("combine", shares[3])):
        if stopped:
            break
        ranked = ranking(results, [c.label for c in cases]) or ranking(results, [c.label for c in contiguous])
        best = ranked[0] if ranked else "table"
        base = settings_of.get(best, {})
        for ph, name, settings in variants:
            if ph != phase or stopped:
                continue
            if not run_variant(phase, f"{name} + {best}", {**base, **settings}, cases, share):
                break
    print_table(results, cases, skipped, budget.elapsed())
    return 0


def _ok(r) -> bool:
    return bool(r) and r.get("status") == "ok" and r.get("check") in ("ok", "oracle ok", "oracle ok = contiguous")


def ranking(results: dict, labs: list) -> list:
    """Variants that ran every shape of ``labs`` with checked output, best geometric mean GB/s first."""
    full = {n: per for n, per in results.items() if all(_ok(per.get(lab)) for lab in labs)}
    return sorted(full, key=lambda n: -H.geomean([full[n][lab]["gbps"] for lab in labs]))


def _num(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def print_table(results: dict, cases, skipped: list, elapsed: float) -> None:
    labs = [c.label for c in cases]
    w = 11
    print(f"\nGB/s of K+V+q+out (% of {PEAK_GBPS:.0f}); ! = output check failed, E = error")
    print(f"{'variant':34s}" + "".join(f"{lab[:w - 1]:>{w}s}" for lab in labs) + f"{'geomean':>9s}")
    for name, per in results.items():
        cells, vals = [], []
        for lab in labs:
            r = per.get(lab)
            if r is None:
                cells.append("")
            elif r.get("status") != "ok":
                cells.append("E")
            else:
                mark = "" if _ok(r) else "!"
                cells.append(f"{mark}{_num(r['gbps'])}/{r['pct_4800']:.0f}%")
                vals.append(r["gbps"])
        gm = f"{_num(H.geomean(vals)):>9s}" if vals and len(vals) == len(labs) else ""
        print(f"{name[:34]:34s}" + "".join(f"{c:>{w}s}" for c in cells) + gm)
    table = results.get("table", {})
    if table:
        print("\ntable variant: splits; host us per call (200 calls, no sync): launch_decode / "
              "F.decode_attention / F.scaled_dot_product_attention / ops.decode_attention.sdpa_decode (the short "
              "path SDPA could take); one call + sync (us); the SDPA path's GB/s with events")
        for lab in labs:
            r = table.get(lab) or {}

            def f(k, fmt="{:.1f}"):
                return fmt.format(r[k]) if isinstance(r.get(k), (int, float)) else "-"
            print(f"  {lab:14s} splits {r.get('splits', '-')!s:>4s}  host {f('host_us_launch')} / "
                  f"{f('host_us_decode')} / {f('host_us_sdpa')} / {f('host_us_sdpa_decode')} us  sync "
                  f"{f('sync_us')} us  sdpa {f('sdpa_gbps', '{:.0f}')} GB/s  check {r.get('check', '-')}")
    print("\nbest per shape (checked variants only):")
    for lab in labs:
        ok = [(r["p50_ms"], n) for n, per in results.items() for r in [per.get(lab)] if _ok(r)]
        if ok:
            ms, n = min(ok)
            r = results[n][lab]
            print(f"  {lab:14s} {_num(r['gbps']):>6s} GB/s {r['pct_4800']:4.0f}%  splits {r.get('splits', '')!s:>4s}  "
                  f"{n[:60]}")
    for what, ls in (("all shapes", labs), ("contiguous shapes", [c.label for c in cases if not c.page])):
        ranked = ranking(results, ls)
        if ranked:
            best = ranked[0]
            s = json.loads(next(iter(results[best].values()))["settings"])
            print(f"best over {what} (geomean {_num(H.geomean([results[best][lb]['gbps'] for lb in ls]))} GB/s): "
                  f"{best}\n  settings to lay over the sm90.json decode_attention rule (bf16/fp16, max_head_dim "
                  f"128): {json.dumps(s, sort_keys=True) if s else '(the table as it is)'}")
            break
    for line in skipped:
        print(f"budget: {line}")
    print(f"done in {elapsed:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
