"""Normalisation layers of ``nbx.nn.functional``: layer_norm, rms_norm, group_norm and batch_norm (inference).

Formulas (PyTorch's documentation of ``torch.nn.functional``):

- ``layer_norm``: over the trailing ``normalized_shape`` dims, ``(x - mean) / sqrt(var + eps) * weight + bias``
  with the biased variance (Ba, Kiros & Hinton, "Layer Normalization", 2016).
- ``rms_norm``: ``x / sqrt(mean(x^2) + eps) * weight`` (Zhang & Sennrich, "Root Mean Square Layer
  Normalization", 2019); ``eps=None`` means ``finfo(input.dtype).eps``, as PyTorch.
- ``group_norm``: input ``(N, C, *)``, statistics per sample over each group of ``C / num_groups`` channels and
  all spatial positions, affine per channel (Wu & He, "Group Normalization", 2018).
- ``batch_norm`` with ``training=False``: ``(x - running_mean[c]) / sqrt(running_var[c] + eps) * weight[c] +
  bias[c]`` over channel dim 1. ``training=True`` (batch statistics and running-stat updates) is not
  implemented: nbxtensor is an inference library (``NotImplementedError``).

**Numerics**: statistics are computed in float32 (float64 for float64 inputs) by a numerically stable method:
a row that fits one tile takes two passes over registers (the mean, then the mean of squared deviations), so
``[40000, 40001, 40002, 40003]`` normalises to ``[-1.342, -0.447, 0.447, 1.342]`` where E[x^2] - E[x]^2
cancels to garbage; longer rows combine per-tile (mean, M2) pairs by Chan et al.'s formula. Means, variances
and ``1 / sqrt(var + eps)`` use IEEE division and square root (:func:`~.triton_helpers.div_rn`,
:func:`~.triton_helpers.sqrt_rn`; Triton's float32 ``/`` is the 2-ulp ``div.full.f32``), so a constant row
normalises to exactly 0, as PyTorch's (checked on the sm_90 code by tests/ops/test_ptx_audit.py). rms_norm squares
in float32, so float16 ``[300, -300, 100, 0]`` (squares beyond float16's 65504) comes out right. The result
has the input's dtype; weight and bias may have any floating dtype and are read in the accumulation dtype.

**Kernels**: ``_norm_rows_kernel`` serves layer_norm, rms_norm and group_norm: each row of the contiguous
``(rows, N)`` view is normalised (group_norm's rows are (sample, group) pairs, and element ``n`` of a row takes
channel ``group * C/G + n // HW`` for its affine parameters); rows that fit ``BLOCK_N`` are read once, longer
rows twice (statistics, then output). With a persistent grid (config ``programs_per_sm``) each program loops over
row blocks, loads layer_norm's/rms_norm's weight and bias once, and (``LOOP_STAGES``) prefetches the next row
with ``cp.async`` while it normalises this one; ``EVICT``/``EVICT2`` set L2 policies (benchmarks/sweep_reduce.py
times these settings on the H200; benchmarks/sweep_rows.py the later ones: ``CHUNK``, per-chunk statistics on the
looped path, :func:`_chunk_stats`; ``maxnreg``, a register cap). bfloat16 results are rounded by the hardware's
``cvt.rn.bf16.f32`` (:func:`~.reduction.out_convert`). ``WARP_STATS`` (one-tile EVEN rows, default off,
:func:`_one_tile_warp_stats`): per-warp two-pass statistics and one cross-warp combination by Chan's formula
instead of two block reductions (layer_norm bf16 8192 on sm_90: 6 -> 3 barriers, no spills), ``PARAMS_ACC``
(persistent grid: weight and bias converted to float32 once per program), ``EVICT_W`` (the parameter loads'
cache policy). ``_batch_norm_kernel`` is elementwise over ``(N*C, spatial)`` rows with
per-channel scale and shift (config ``SPLIT``: one program per tile instead of a loop over the spatial
positions). Non-contiguous inputs are copied to contiguous first.

The ``cpu`` implementations use NumPy in the same dtypes (two-pass statistics); the oracles are float64.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..dtypes.table import DType
from ..runtime.configs import launch_config
from ..runtime.configs import state as config_state
from ..runtime.launcher import Tail, interpreting, launch_tail, scratch
from ..runtime.triton_compat import jit, tl
from ..shapes import numel
from ..tensor.core import Tensor, host_view, new_empty
from . import dispatch, registry
from .fast_math16 import _rcpz
from ..runtime.pdl import enter as pdl_enter
from ..runtime.pdl import settings as pdl_settings
from .reduction import FLOATS, cdiv, launch_quiet, loop_meta, out_convert, persistent_grid, welford_combine
from .registry import Cost, OpRecord, register
from .triton_helpers import TL_DTYPES, convert, div_rn, rcp_rn, sqrt_rn

__all__ = ["launch_norm_rows", "launch_batch_norm"]


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@jit
def _affine(y, ch, msk, w_ptr, b_ptr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr,
            EVICT_W: tl.constexpr):
    if HAS_W:
        y = y * convert(tl.load(w_ptr + ch, mask=msk, eviction_policy=EVICT_W), ACC)
    if HAS_B:
        y = y + convert(tl.load(b_ptr + ch, mask=msk, eviction_policy=EVICT_W), ACC)
    return y


@jit
def _chunk_stats(x_ptr, rows, row_ok, N, RMS: tl.constexpr, ACC: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, CHUNK: tl.constexpr, LOOP_STAGES: tl.constexpr, EVICT: tl.constexpr,
                 FULL: tl.constexpr):
    """(mean, M2) of each of the ``BLOCK_M`` rows (rms_norm: (0, sum of squares)) of the contiguous ``(M, N)``
    input, ``N > BLOCK_N``, read as ``[BLOCK_M, BLOCK_N // CHUNK, CHUNK]`` tiles: per chunk (one thread's vector
    when CHUNK * itemsize is 16 bytes, so no shuffles and no barriers in the loop) the tile's CHUNK elements
    give a mean and M2 by two passes over registers, merged into the chunk's running state by Chan's formula
    with equal counts: after t whole tiles the state holds ``CHUNK * t`` elements, so the weights ``1 / (t + 1)``
    and ``CHUNK * t / (t + 1)`` are one IEEE reciprocal per tile, not per element. Values are shifted by the
    row's first element as LANE_STATS does (offsets such as 40000 + [0, 1, 2, 3] leave small exact deviations).
    The row's tail (``N % BLOCK_N`` elements) is folded with counts (:func:`~.reduction.welford_combine`), and
    the chunks' states combine across the row once (Chan's formula in ``tl.reduce``)."""
    NCH: tl.constexpr = BLOCK_N // CHUNK
    off3 = (tl.arange(0, NCH).to(tl.int64) * CHUNK)[None, :, None] + tl.arange(0, CHUNK)[None, None, :]
    xb = x_ptr + (rows * N)[:, None, None]
    rmask = row_ok[:, None, None]
    cm_run = tl.zeros([BLOCK_M, NCH], ACC)
    q_run = tl.zeros([BLOCK_M, NCH], ACC)
    k0 = tl.zeros([BLOCK_M, 1, 1], ACC)
    if not RMS:
        k0 = convert(tl.load(x_ptr + rows * N, mask=row_ok, other=0.0), ACC)[:, None, None]
    ntile = N // BLOCK_N
    nfull = ntile * BLOCK_N
    for n0 in tl.range(0, nfull, BLOCK_N, num_stages=LOOP_STAGES):
        if FULL:
            x = convert(tl.load(xb + (n0 + off3), eviction_policy=EVICT), ACC)
        else:
            x = convert(tl.load(xb + (n0 + off3), mask=rmask, other=0.0, eviction_policy=EVICT), ACC)
        if RMS:
            q_run += tl.sum(x * x, 2)
        else:
            xs = x - k0
            cm = tl.sum(xs, 2) * (1.0 / CHUNK)  # CHUNK is a power of two: an exact scale
            d = xs - cm[:, :, None]
            t = (n0 // BLOCK_N) * tl.full([], 1, ACC)
            w = rcp_rn(t + 1.0)
            delta = cm - cm_run
            cm_run = cm_run + delta * w
            q_run = q_run + tl.sum(d * d, 2) + delta * delta * (t * CHUNK * w)
    cnt = tl.zeros([BLOCK_M, NCH], ACC) + ntile * CHUNK * tl.full([], 1, ACC)
    if nfull < N:
        n = nfull + off3
        msk = rmask & (n < N)
        x = convert(tl.load(xb + n, mask=msk, other=0.0, eviction_policy=EVICT), ACC)
        if RMS:
            q_run += tl.sum(x * x, 2)
        else:
            xs = tl.where(msk, x - k0, 0.0)
            cb = tl.sum(msk.to(ACC), 2)
            cm = div_rn(tl.sum(xs, 2), tl.where(cb < 1.0, 1.0, cb))
            d = tl.where(msk, xs - cm[:, :, None], 0.0)
            cm_run, q_run, cnt = welford_combine(cm_run, q_run, cnt, cm, tl.sum(d * d, 2), cb)
    if RMS:
        mean = tl.zeros([BLOCK_M], ACC)
        m2 = tl.sum(q_run, 1)
    else:
        mean, m2, cnt = tl.reduce((cm_run, q_run, cnt), 1, welford_combine)
        mean = mean + tl.reshape(k0, [BLOCK_M])
    return mean, m2


@jit
def _chan_pair(ma, qa, na, mb, qb, nb):
    # Chan, Golub & LeVeque's pairwise update of (mean, M2, count) for counts > 0. The weight nb / n takes one
    # rcp.approx.ftz (1 ulp; counts are at least 1 and far below 2**126; on the GPU's balanced tree they are equal
    # and n a power of two); float64: the division. A weight's last-bit error moves the mean by that fraction of
    # the means' difference only, and equal means stay exactly equal.
    n = na + nb
    if n.dtype == tl.float64:
        w = nb / n
    else:
        w = nb * _rcpz(n)
    d = mb - ma
    return ma + d * w, qa + qb + d * d * (na * w), n


@jit
def _shared_affine(y, w_row, b_row, HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr):
    """``y * w + b`` with the row's parameters loaded once per program (``SHARED``), in ACC."""
    if HAS_W:
        y = y * convert(w_row, ACC)
    if HAS_B:
        y = y + convert(b_row, ACC)
    return y


@jit
def _one_tile_warp_stats(x_ptr, y_ptr, w_ptr, b_ptr, rows, N, eps, w_row, b_row, RMS: tl.constexpr,
                         HAS_W: tl.constexpr, HAS_B: tl.constexpr, SHARED: tl.constexpr, ACC: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WS: tl.constexpr, EVICT: tl.constexpr,
                         EVICT2: tl.constexpr, EVICT_W: tl.constexpr, HW_CVT: tl.constexpr):
    """One unmasked tile of BLOCK_M rows of exactly BLOCK_N elements (WARP_STATS: the host takes it only with
    EVEN), read as ``[BLOCK_M, WS, R, V]`` (element ``n = (r * WS + g) * V + c``; V is one warp's 16-byte
    vectors, ``32 * 16 / itemsize``, at most ``BLOCK_N / WS``), so that with WS = num_warps each group ``g`` of
    ``BLOCK_N / WS`` elements lies in one warp.

    layer_norm: each group's mean ``m_g`` (its sum times the exact power-of-two ``WS / BLOCK_N``) and ``M2_g``
    (sum of squared deviations ``x - m_g``, kept in registers) by two passes over registers with warp shuffles
    only; then one cross-group combination of the ``(m_g - x[row, 0], M2_g, count)`` triples by Chan's formula
    (one shared-memory exchange per row instead of two block reductions; the shift by the row's first element,
    as LANE_STATS, leaves small means to combine: offsets such as 40000 + [0, 1, 2, 3] are not rounded at
    40000's ulp); ``var = M2 / BLOCK_N`` as an exact scaling; ``y = (x - m_g) * r + (m_g - mean) * r`` as one
    FFMA per element. The stability of the two-pass over the row: deviations from each group's own mean, groups
    merged by Chan's formula; a constant row gives M2 = 0 and deviations 0 exactly. rms_norm: the mean of
    squares' division by BLOCK_N as the exact scaling (the same bits as the IEEE division)."""
    VEC: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    V: tl.constexpr = min(32 * VEC, BLOCK_N // WS)
    R: tl.constexpr = BLOCK_N // (WS * V)
    SEG: tl.constexpr = BLOCK_N // WS
    INV_SEG: tl.constexpr = 1.0 / SEG
    INV_N: tl.constexpr = 1.0 / BLOCK_N
    OUT: tl.constexpr = y_ptr.dtype.element_ty
    off = ((tl.arange(0, WS) * V)[:, None, None] + (tl.arange(0, R) * (WS * V))[None, :, None]
           + tl.arange(0, V)[None, None, :])[None, :, :, :]
    base = (rows * N)[:, None, None, None]
    x = convert(tl.load(x_ptr + base + off, eviction_policy=EVICT), ACC)
    if RMS:
        ms = tl.sum(tl.sum(tl.sum(x * x, 2), 2), 1) * INV_N
        y = x * rcp_rn(sqrt_rn(ms + eps))[:, None, None, None]
    else:
        k0 = convert(tl.load(x_ptr + rows * N, eviction_policy=EVICT), ACC)  # the shift: the row's first element
        mg = tl.sum(tl.sum(x, 2), 2) * INV_SEG                       # [BLOCK_M, WS]: each group's mean
        d = x - mg[:, :, None, None]
        qg = tl.sum(tl.sum(d * d, 2), 2)                              # each group's M2
        mg = mg - k0[:, None]                                         # shifted: the combination works on small means
        ng = tl.full([BLOCK_M, WS], SEG, ACC)
        mean, m2, _ = tl.reduce((mg, qg, ng), 1, _chan_pair)
        r = rcp_rn(sqrt_rn(m2 * INV_N + eps))
        c = (mg - mean[:, None]) * r[:, None]                         # (x - mean) r = (x - m_g) r + (m_g - mean) r
        # (mean and m_g both shifted by k0: only their difference is used)
        y = d * r[:, None, None, None] + c[:, :, None, None]
    if SHARED:
        y = _shared_affine(y, w_row, b_row, HAS_W, HAS_B, ACC)
    else:
        if HAS_W:
            y = y * convert(tl.load(w_ptr + off, eviction_policy=EVICT_W), ACC)
        if HAS_B:
            y = y + convert(tl.load(b_ptr + off, eviction_policy=EVICT_W), ACC)
    tl.store(y_ptr + base + off, out_convert(y, OUT, HW_CVT), eviction_policy=EVICT2)


@jit
def _norm_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, G, CPG, HW, eps, NBLK, RMS: tl.constexpr, HAS_W: tl.constexpr,
                      HAS_B: tl.constexpr, ONE_TILE: tl.constexpr, GROUPED: tl.constexpr, SHARED: tl.constexpr,
                      ACC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, LOOP_STAGES: tl.constexpr,
                      ROW_STAGES: tl.constexpr, EVICT: tl.constexpr, EVICT2: tl.constexpr, HW_CVT: tl.constexpr,
                      EVEN: tl.constexpr = False, LANE_STATS: tl.constexpr = False, CHUNK: tl.constexpr = 0,
                      FULL: tl.constexpr = False, WARP_STATS: tl.constexpr = 0, EVICT_W: tl.constexpr = "",
                      PARAMS_ACC: tl.constexpr = False, STATS_OUT: tl.constexpr = False, PDL: tl.constexpr = False):
    """Normalise the contiguous ``(M, N)`` input BLOCK_M rows at a time; program ``pid`` takes the row blocks
    ``pid, pid + grid, ...`` of NBLK (one each unless the grid is persistent). Element n of row r uses affine
    parameter ``(r % G) * CPG + n // HW`` (layer_norm/rms_norm: G = HW = 1). SHARED (one tile, every row uses
    parameters 0..N-1): weight and bias are loaded once per program, before the row loop, in their own dtype.
    GROUPED (group_norm with HW > 1, looped path): the output pass walks channel by channel (a scalar weight per
    row and channel), so no element needs an integer division. EVICT is the L2 policy of the statistics loads,
    EVICT2 of the output pass's loads and of the stores; ROW_STAGES pipelines the row loop (one tile). EVEN (one
    tile; the host sets it only when ``N == BLOCK_N`` and BLOCK_M divides M): no masks on the loads, the
    deviations and the stores. LANE_STATS (looped path): the statistics pass keeps per-lane states, Welford's
    update per element of the shifted value ``v = x - x[row, 0]`` with the tile count's reciprocal (``lm += (v -
    lm) / k``, ``M2 += (v - lm_old) * (v - lm)``; rms_norm: per-lane sums of squares), combined across lanes once
    per row by Chan's formula (:func:`~.reduction.welford_combine` in ``tl.reduce``), then ``mean = x[row, 0] +
    lm``, instead of two block reductions per tile: no barrier inside the loop, Welford's stability (a constant
    row keeps M2 = 0 exactly), and the shift keeps the lanes' means small, so offsets such as 40000 + [0, 1, 2,
    3] are not rounded at 40000's ulp in the combination. CHUNK (looped path, before LANE_STATS): the statistics
    pass keeps states per chunk of CHUNK consecutive elements (:func:`_chunk_stats`: each tile's chunk folded by
    two passes over registers and one Chan update with a per-tile scalar weight); FULL (the host sets it only
    when BLOCK_M divides M) loads its whole tiles unmasked. WARP_STATS (one tile, EVEN, layer_norm/rms_norm; the
    host passes the number of warps, 0 = off): :func:`_one_tile_warp_stats`. EVICT_W: the L1/L2 policy of the
    weight and bias loads; PARAMS_ACC (SHARED): weight and bias converted to ACC once, before the row loop.
    STATS_OUT (looped path; group_norm's ``SPLIT_STATS``): the statistics only, ``y[r] = mean`` and ``y[M + r] =
    var`` (biased) in ACC, no output pass. PDL: runtime/pdl.py (the wait before any memory access)."""
    pdl_enter(PDL)
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK_N).to(tl.int64)
    n_f = N * tl.full([], 1, ACC)  # N in ACC, by arithmetic (an int argument equal to 1 arrives as a constexpr)
    OUT: tl.constexpr = y_ptr.dtype.element_ty
    w_row = None
    b_row = None
    if SHARED:
        pmsk = (lanes < N)[None, :]
        if EVEN:
            pmsk = None
        if WARP_STATS > 0:  # the 4-d tile of _one_tile_warp_stats
            WV: tl.constexpr = min(32 * (128 // x_ptr.dtype.element_ty.primitive_bitwidth), BLOCK_N // WARP_STATS)
            WR: tl.constexpr = BLOCK_N // (WARP_STATS * WV)
            woff = ((tl.arange(0, WARP_STATS) * WV)[:, None, None]
                    + (tl.arange(0, WR) * (WARP_STATS * WV))[None, :, None]
                    + tl.arange(0, WV)[None, None, :])[None, :, :, :]
            if HAS_W:
                w_row = tl.load(w_ptr + woff, eviction_policy=EVICT_W)
                if PARAMS_ACC:
                    w_row = convert(w_row, ACC)
            if HAS_B:
                b_row = tl.load(b_ptr + woff, eviction_policy=EVICT_W)
                if PARAMS_ACC:
                    b_row = convert(b_row, ACC)
        else:
            if HAS_W:
                w_row = tl.load(w_ptr + lanes[None, :], mask=pmsk, eviction_policy=EVICT_W)
                if PARAMS_ACC:
                    w_row = convert(w_row, ACC)
            if HAS_B:
                b_row = tl.load(b_ptr + lanes[None, :], mask=pmsk, eviction_policy=EVICT_W)
                if PARAMS_ACC:
                    b_row = convert(b_row, ACC)
    for blk in tl.range(pid, NBLK, tl.num_programs(0), num_stages=ROW_STAGES):
        rows = blk * tl.full([BLOCK_M], BLOCK_M, tl.int64) + tl.arange(0, BLOCK_M)  # int64 (blk may be a Python int)
        row_ok = rows < M
        base = rows[:, None] * N
        ch0 = ((rows % G) * CPG)[:, None]
        if ONE_TILE and WARP_STATS > 0:
            _one_tile_warp_stats(x_ptr, y_ptr, w_ptr, b_ptr, rows, N, eps, w_row, b_row, RMS, HAS_W, HAS_B, SHARED,
                                 ACC, BLOCK_M, BLOCK_N, WARP_STATS, EVICT, EVICT2, EVICT_W, HW_CVT)
        elif ONE_TILE:
            msk = row_ok[:, None] & (lanes < N)[None, :]
            if EVEN:
                msk = None
                x = convert(tl.load(x_ptr + base + lanes[None, :], eviction_policy=EVICT), ACC)
            else:
                x = convert(tl.load(x_ptr + base + lanes[None, :], mask=msk, other=0.0, eviction_policy=EVICT), ACC)
            if RMS:
                r = rcp_rn(sqrt_rn(div_rn(tl.sum(x * x, 1), n_f) + eps))
                y = x * r[:, None]
            else:
                mean = div_rn(tl.sum(x, 1), n_f)
                if EVEN:
                    d = x - mean[:, None]
                else:
                    d = tl.where(msk, x - mean[:, None], 0.0)
                r = rcp_rn(sqrt_rn(div_rn(tl.sum(d * d, 1), n_f) + eps))
                y = d * r[:, None]
            if SHARED:
                y = _shared_affine(y, w_row, b_row, HAS_W, HAS_B, ACC)
            else:
                ch = ch0 + (tl.arange(0, BLOCK_N) // HW)[None, :]  # int32 division: n < BLOCK_N
                y = _affine(y, ch, msk, w_ptr, b_ptr, HAS_W, HAS_B, ACC, EVICT_W)
            tl.store(y_ptr + base + lanes[None, :], out_convert(y, OUT, HW_CVT), mask=msk, eviction_policy=EVICT2)
        else:
            if CHUNK > 0:
                mean, m2 = _chunk_stats(x_ptr, rows, row_ok, N, RMS, ACC, BLOCK_M, BLOCK_N, CHUNK, LOOP_STAGES, EVICT,
                                        FULL)
            else:
                mean = tl.zeros([BLOCK_M], ACC)
                m2 = tl.zeros([BLOCK_M], ACC)
                cnt = tl.zeros([BLOCK_M], ACC)
                if LANE_STATS:
                    lm = tl.zeros([BLOCK_M, BLOCK_N], ACC)
                    lq = tl.zeros([BLOCK_M, BLOCK_N], ACC)
                    if not RMS:  # the shift: the row's first element (offsets like 40000 leave small exact deviations)
                        k0 = convert(tl.load(x_ptr + rows * N, mask=row_ok, other=0.0), ACC)
                for n0 in tl.range(0, N, BLOCK_N, num_stages=LOOP_STAGES):
                    n = n0 + lanes
                    msk = row_ok[:, None] & (n < N)[None, :]
                    x = convert(tl.load(x_ptr + base + n[None, :], mask=msk, other=0.0, eviction_policy=EVICT), ACC)
                    if LANE_STATS:
                        if RMS:
                            lq += x * x  # masked elements load 0
                        else:
                            # Welford per lane: every lane valid in this tile has seen k = n0 / BLOCK_N + 1 elements
                            rk = rcp_rn(((n0 // BLOCK_N) + 1) * tl.full([], 1, ACC))
                            xs = x - k0[:, None]
                            delta = xs - lm
                            lm_new = lm + delta * rk
                            lq = tl.where(msk, lq + delta * (xs - lm_new), lq)
                            lm = tl.where(msk, lm_new, lm)
                    elif RMS:
                        m2 += tl.sum(x * x, 1)
                    else:
                        # this tile's (mean, M2) by two passes over registers, merged with Chan's formula
                        c = tl.sum(msk.to(ACC), 1)
                        cm = div_rn(tl.sum(x, 1), tl.where(c < 1.0, 1.0, c))
                        d = tl.where(msk, x - cm[:, None], 0.0)
                        mean, m2, cnt = welford_combine(mean, m2, cnt, cm, tl.sum(d * d, 1), c)
                if LANE_STATS:  # the lanes' states combined once per row (Chan's formula for the means and M2s)
                    if RMS:
                        m2 = tl.sum(lq, 1)
                    else:
                        j = tl.arange(0, BLOCK_N)
                        lc = tl.where(j < N, (N - j + (BLOCK_N - 1)) // BLOCK_N, 0) * tl.full([], 1, ACC)
                        lc = tl.broadcast_to(lc[None, :], [BLOCK_M, BLOCK_N])
                        mean, m2, cnt = tl.reduce((lm, lq, lc), 1, welford_combine)
                        mean = mean + k0
            r = rcp_rn(sqrt_rn(div_rn(m2, n_f) + eps))
            if STATS_OUT:
                tl.store(y_ptr + rows, mean, mask=row_ok)
                tl.store(y_ptr + M + rows, div_rn(m2, n_f), mask=row_ok)
            elif GROUPED:
                for ci in range(0, CPG):
                    chan = ch0 + ci  # [BLOCK_M, 1]: one affine parameter per row for this channel
                    scale = r[:, None]
                    shift = -mean[:, None] * r[:, None]
                    if HAS_W:
                        wv = convert(tl.load(w_ptr + chan, mask=row_ok[:, None]), ACC)
                        scale = scale * wv
                        shift = shift * wv
                    if HAS_B:
                        shift = shift + convert(tl.load(b_ptr + chan, mask=row_ok[:, None]), ACC)
                    cbase = base + ci * HW
                    for s0 in tl.range(0, HW, BLOCK_N, num_stages=LOOP_STAGES):
                        sp = s0 + lanes
                        msk = row_ok[:, None] & (sp < HW)[None, :]
                        x = convert(tl.load(x_ptr + cbase + sp[None, :], mask=msk, eviction_policy=EVICT2), ACC)
                        y = out_convert(x * scale + shift, OUT, HW_CVT)
                        tl.store(y_ptr + cbase + sp[None, :], y, mask=msk, eviction_policy=EVICT2)
            else:
                for n0 in tl.range(0, N, BLOCK_N, num_stages=LOOP_STAGES):
                    n = n0 + lanes
                    msk = row_ok[:, None] & (n < N)[None, :]
                    x = convert(tl.load(x_ptr + base + n[None, :], mask=msk, eviction_policy=EVICT2), ACC)
                    if RMS:
                        y = x * r[:, None]
                    else:
                        y = (x - mean[:, None]) * r[:, None]
                    y = _affine(y, ch0 + n[None, :] // HW, msk, w_ptr, b_ptr, HAS_W, HAS_B, ACC, EVICT_W)
                    tl.store(y_ptr + base + n[None, :], out_convert(y, OUT, HW_CVT), mask=msk,
                             eviction_policy=EVICT2)


@jit
def _batch_norm_kernel(x_ptr, rm_ptr, rv_ptr, w_ptr, b_ptr, y_ptr, M, S, C, eps, HAS_W: tl.constexpr,
                       HAS_B: tl.constexpr, ACC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr,
                       HW_CVT: tl.constexpr = False, FMA: tl.constexpr = False, EVEN: tl.constexpr = False,
                       LOOP_STAGES: tl.constexpr = None, EVICT: tl.constexpr = "", SPLIT: tl.constexpr = False,
                       EVICT_OUT: tl.constexpr = "", GSTATS: tl.constexpr = False, CPG=1):
    """``y = (x - rm[c]) * (w[c] / sqrt(rv[c] + eps)) + b[c]`` over the contiguous ``(M = N*C, S)`` view,
    channel ``c = row % C``. ``GSTATS`` (group_norm's output pass, ``SPLIT_STATS``): the statistics are per
    (sample, group), ``rm[row // CPG]`` and ``rv[row // CPG]`` (biased variance), the parameters per channel.

    Config keys (default off: the plain form above): HW_CVT, the hardware's ``cvt.rn.bf16.f32`` for bfloat16
    results (:func:`~.reduction.out_convert`; the software conversion costs about 8 integer instructions per
    element); FMA, ``y = x * scale + (b - rm * scale)``, one ``FFMA`` per element (PyTorch's CPU kernel's
    ``alpha``/``beta`` form; a rounding of ``rm * scale`` differs from the subtract-first form, within the
    dtype's tolerance); EVEN (the host sets it only when BLOCK_S divides S and BLOCK_M divides M) unmasked
    loads and stores; LOOP_STAGES, ``cp.async`` pipelining of the loop over S; EVICT, the loads' L2 policy;
    EVICT_OUT, the stores' (``""`` or ``"evict_first"``). SPLIT: one program per ``[BLOCK_M, BLOCK_S]`` tile
    (the host's grid is row blocks x ``cdiv(S, BLOCK_S)``, the tile index fastest, so consecutive programs stream
    consecutive memory) instead of a loop over S: the pointwise kernels' schedule, no cp.async ring, no loop."""
    pid = tl.program_id(0)
    if SPLIT:
        nsb = tl.cdiv(S, BLOCK_S)
        s_lo = (pid % nsb) * BLOCK_S
        s_hi = s_lo + BLOCK_S
        pid = pid // nsb
    else:
        s_lo = 0
        s_hi = S
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    c = rows % C
    if GSTATS:
        sidx = rows // CPG
    else:
        sidx = c
    mean = convert(tl.load(rm_ptr + sidx, mask=row_ok), ACC)
    scale = rcp_rn(sqrt_rn(convert(tl.load(rv_ptr + sidx, mask=row_ok), ACC) + eps))
    if HAS_W:
        scale = scale * convert(tl.load(w_ptr + c, mask=row_ok), ACC)
    if HAS_B:
        shift = convert(tl.load(b_ptr + c, mask=row_ok), ACC)
    else:
        shift = tl.zeros([BLOCK_M], ACC)
    if FMA:
        shift = shift - mean * scale
    lanes = tl.arange(0, BLOCK_S).to(tl.int64)
    base = rows[:, None] * S
    OUT: tl.constexpr = y_ptr.dtype.element_ty
    for s0 in tl.range(s_lo, s_hi, BLOCK_S, num_stages=LOOP_STAGES):
        s = s0 + lanes
        if EVEN:
            msk = None
        else:
            msk = row_ok[:, None] & (s < S)[None, :]
        x = convert(tl.load(x_ptr + base + s[None, :], mask=msk, eviction_policy=EVICT), ACC)
        if FMA:
            y = x * scale[:, None] + shift[:, None]
        else:
            y = (x - mean[:, None]) * scale[:, None] + shift[:, None]
        tl.store(y_ptr + base + s[None, :], out_convert(y, OUT, HW_CVT), mask=msk, eviction_policy=EVICT_OUT)


def _acc(d: DType) -> DType:
    return T.float64 if d is T.float64 else T.float32


def launch_norm_rows(x: Tensor, w: Tensor | None, b: Tensor | None, y: Tensor, *, rows: int, n: int, rms: bool,
                     eps: float, groups: int = 1, cpg: int = 0, hw: int = 1, op: str = "layer_norm") -> None:
    """Run ``_norm_rows_kernel`` on contiguous ``x``/``y`` seen as ``(rows, n)``; ``w``/``b`` contiguous.

    The ``norm_rows`` config gives ``BLOCK_M``/``BLOCK_N``/``num_warps`` and optionally ``programs_per_sm``
    (a persistent grid: weight and bias read once per program), ``HOIST_PARAMS`` (weight and bias loaded before
    the statistics even without a persistent grid: their latency overlaps the row's, for more registers),
    ``LOOP_STAGES`` (pipelining of the row loop on one tile, of the column loops otherwise), ``EVICT``/``EVICT2``
    (L2 policies, see the kernel), ``EVEN`` (default off: unmasked one-tile rows where ``n == BLOCK_N`` and
    ``BLOCK_M`` divides the rows), ``LANE_STATS`` (default off: per-lane statistics on the looped path), ``CHUNK`` (default 0: per-chunk
    statistics on the looped path, :func:`_chunk_stats`; taken before LANE_STATS), ``maxnreg`` (a register cap:
    more programs resident per SM), ``WARP_STATS`` (default off: one-tile EVEN rows of layer_norm/rms_norm take
    :func:`_one_tile_warp_stats`, one cross-warp exchange per row), ``PARAMS_ACC`` (default off: with a persistent
    grid, weight and bias converted to the accumulation dtype once per program), ``EVICT_W`` (default "": the
    parameter loads' cache policy) and ``SPLIT_STATS`` (default off: group_norm's looped rows in two launches,
    :func:`_group_norm_split_stats`).

    Grid and keywords are planned once per (dtype, rows, n, flags, device, config state)."""
    key = (x._dtype, rows, n, rms, w is None, b is None, groups, cpg, hw, x._storage.device, config_state(),
           launch_config)
    hit = _ROWS_PLANS.get(key)
    if hit is not None and hit[2].get("STATS_OUT"):
        _group_norm_split_stats(x, w, b, y, rows=rows, n=n, eps=eps, groups=groups, cpg=cpg, hw=hw, kw=hit[2],
                                grid=hit[0], nblk=hit[1])
        return
    if hit is not None:
        grid, nblk, kw, tail = hit
        if tail is not None:   # CUDA: the launcher keys the planned tail by identity (no keyword hashing)
            launch_tail(_norm_rows_kernel, (grid,), (x, w if w is not None else x, b if b is not None else x, y, rows,
                                                     n, groups, cpg, hw, float(eps)), tail)
        else:
            launch_quiet(_norm_rows_kernel, (grid,), x, w if w is not None else x, b if b is not None else x, y,
                         rows, n, groups, cpg, hw, float(eps), nblk, **kw)
        return
    cfg = launch_config("norm_rows", x.device, dtypes=(x.dtype,), rows=rows, cols=n)
    one = n <= cfg["BLOCK_N"]
    split_stats = bool(cfg.pop("SPLIT_STATS", False)) and not one and hw > 1 and not rms
    nblk = cdiv(rows, cfg["BLOCK_M"])
    grid = persistent_grid(nblk, cfg, x.device)
    hoist = bool(cfg.pop("HOIST_PARAMS", False)) or grid < nblk
    even = bool(cfg.pop("EVEN", False)) and one and n == cfg["BLOCK_N"] and rows % cfg["BLOCK_M"] == 0
    lane_stats = bool(cfg.pop("LANE_STATS", False)) and not one
    chunk = int(cfg.pop("CHUNK", 0)) if not one else 0
    check(chunk == 0 or (chunk & (chunk - 1) == 0 and cfg["BLOCK_N"] % chunk == 0), lambda: f"{op}: config CHUNK "
          f"expected 0 or a power of two dividing BLOCK_N = {cfg['BLOCK_N']}, got {chunk}", ValueError)
    pdl = pdl_settings(cfg, x.device)
    meta = loop_meta(cfg)
    meta.update(pdl)
    meta["EVEN"] = even
    meta["LANE_STATS"] = lane_stats
    meta["CHUNK"] = chunk
    meta["FULL"] = chunk > 0 and rows % cfg["BLOCK_M"] == 0
    meta["EVICT2"] = str(meta.get("EVICT2") or "")
    meta["ROW_STAGES"] = meta["LOOP_STAGES"] if one and grid < nblk else None
    meta["HW_CVT"] = not interpreting()
    meta["EVICT_W"] = str(meta.get("EVICT_W") or "")
    meta["PARAMS_ACC"] = bool(meta.get("PARAMS_ACC", False))
    ws = min(int(cfg.get("num_warps", 4)), cfg["BLOCK_N"])
    meta["WARP_STATS"] = ws if bool(meta.get("WARP_STATS", False)) and even and groups == 1 and hw == 1 else 0
    kw = dict(RMS=rms, HAS_W=w is not None, HAS_B=b is not None, ONE_TILE=one,
              GROUPED=not one and hw > 1, SHARED=one and groups == 1 and hw == 1 and hoist,
              ACC=TL_DTYPES[_acc(x.dtype).name], **meta)
    if split_stats:
        kw["STATS_OUT"] = True
    if len(_ROWS_PLANS) >= 1024:
        _ROWS_PLANS.clear()
    _ROWS_PLANS[key] = (grid, nblk, kw, Tail((nblk,), kw) if x._storage.device.type == "cuda" else None)
    if split_stats:
        _group_norm_split_stats(x, w, b, y, rows=rows, n=n, eps=eps, groups=groups, cpg=cpg, hw=hw, kw=kw,
                                grid=grid, nblk=nblk)
        return
    launch_quiet(_norm_rows_kernel, (grid,), x, w if w is not None else x, b if b is not None else x, y, rows, n,
                 groups, cpg, hw, float(eps), nblk, **kw)


_ROWS_PLANS: dict = {}


def _group_norm_split_stats(x: Tensor, w, b, y: Tensor, *, rows: int, n: int, eps: float, groups: int, cpg: int,
                            hw: int, kw: dict, grid: int, nblk: int) -> None:
    """group_norm in two launches (config key ``SPLIT_STATS`` of the ``norm_rows`` rule; looped rows of
    ``n = cpg * hw`` elements, one per (sample, group)): the statistics first, by ``_norm_rows_kernel`` with
    ``STATS_OUT`` (its looped statistics pass alone: a read-only stream; ``kw``, ``grid``, ``nblk`` its planned
    launch), into a ``[2, rows]`` workspace (mean, biased variance; float32, float64 for float64 inputs); then
    the output pass by ``_batch_norm_kernel`` over the ``(rows * cpg, hw)`` view with statistics per ``row //
    cpg`` (``GSTATS``) and parameters per channel, ``(x - mean) * (w / sqrt(var + eps)) + b``, subtracting first
    (the one-kernel path's ``x * scale + shift`` rounds at the magnitude of x). The one-kernel path reads each
    row twice within one program; here each launch streams the tensor in the pattern the H200 moves fastest
    (reads alone, then read + write)."""
    st = scratch(new_empty((2, rows), _acc(x.dtype), x.device))
    launch_quiet(_norm_rows_kernel, (grid,), x, w if w is not None else x, b if b is not None else x, st, rows, n,
                 groups, cpg, hw, float(eps), nblk, **kw)
    launch_batch_norm(x, st[0], st[1], w, b, y, channels=groups * cpg, spatial=hw, eps=eps, cpg=cpg)


def launch_batch_norm(x: Tensor, rm: Tensor, rv: Tensor, w: Tensor | None, b: Tensor | None, y: Tensor, *,
                      channels: int, spatial: int, eps: float, cpg: int = 0) -> None:
    """Run ``_batch_norm_kernel`` on contiguous ``x``/``y`` seen as ``(N * channels, spatial)``; the
    ``batch_norm`` config gives ``BLOCK_M``/``BLOCK_S``/``num_warps`` and optionally ``HW_CVT``, ``FMA``,
    ``EVEN``, ``LOOP_STAGES``, ``EVICT``, ``SPLIT``, ``EVICT_OUT`` (see the kernel; all off by default).
    ``cpg`` > 0: group_norm's output pass (``rm``/``rv`` per (sample, group) of ``cpg`` channels, the kernel's
    ``GSTATS``)."""
    rows = x.numel() // max(spatial, 1)
    cfg = launch_config("batch_norm", x.device, dtypes=(x.dtype,), rows=rows, cols=spatial)
    meta_g = {}
    if cpg:  # (subtract first: x * scale + shift rounds at the magnitude of x, group_norm's offset rows)
        meta_g = dict(GSTATS=True, CPG=int(cpg))
        cfg["FMA"] = False
    meta = loop_meta(cfg)
    meta["HW_CVT"] = bool(meta.get("HW_CVT", False)) and not interpreting()
    meta["FMA"] = bool(meta.get("FMA", False))
    meta["EVEN"] = bool(meta.get("EVEN", False)) and spatial % cfg["BLOCK_S"] == 0 and rows % cfg["BLOCK_M"] == 0
    meta["SPLIT"] = bool(meta.get("SPLIT", False))
    meta["EVICT_OUT"] = str(meta.get("EVICT_OUT") or "")
    grid = cdiv(rows, cfg["BLOCK_M"]) * (cdiv(spatial, cfg["BLOCK_S"]) if meta["SPLIT"] else 1)
    launch_quiet(_batch_norm_kernel, (grid,), x, rm, rv, w if w is not None else rm,
                 b if b is not None else rm, y, rows, spatial, channels, float(eps), HAS_W=w is not None,
                 HAS_B=b is not None, ACC=TL_DTYPES[_acc(x.dtype).name], **meta, **meta_g)


# ---------------------------------------------------------------------------------------------------------
# Implementations: impl(x, w, b, y, **params) on contiguous x and y (cpu: NumPy; triton: the kernels)
# ---------------------------------------------------------------------------------------------------------
def _np(t: Tensor | None, acc: DType):
    if t is None:
        return None
    a = host_view(t)
    return cast_array(a, t.dtype, acc) if t.dtype is not acc else np.asarray(a)


def _cpu_rows(x: Tensor, w, b, y: Tensor, *, rows: int, n: int, rms: bool, eps: float, groups: int = 1,
              cpg: int = 0, hw: int = 1) -> None:
    acc = _acc(x.dtype)
    t = acc.numpy.type
    a = _np(x, acc).reshape(rows, n)
    with np.errstate(all="ignore"):
        if rms:
            out = a / np.sqrt(np.add.reduce(a * a, axis=1, keepdims=True) / t(n) + t(eps))
        else:
            d = a - np.add.reduce(a, axis=1, keepdims=True) / t(n)
            out = d / np.sqrt(np.add.reduce(d * d, axis=1, keepdims=True) / t(n) + t(eps))
        ch = ((np.arange(rows) % groups) * cpg)[:, None] + (np.arange(n) // hw)[None, :]
        if w is not None:
            out = out * _np(w, acc).reshape(-1)[ch]
        if b is not None:
            out = out + _np(b, acc).reshape(-1)[ch]
    host_view(y)[...] = cast_array(np.asarray(out, dtype=acc.numpy).reshape(y.shape), acc, y.dtype)


def _triton_rows(x: Tensor, w, b, y: Tensor, **params) -> None:
    launch_norm_rows(x, w, b, y, **params)


def _cpu_batch_norm(x: Tensor, rm: Tensor, rv: Tensor, w, b, y: Tensor, *, channels: int, spatial: int,
                    eps: float) -> None:
    acc = _acc(x.dtype)
    t = acc.numpy.type
    a = _np(x, acc).reshape(-1, channels, max(spatial, 1))
    with np.errstate(all="ignore"):
        scale = t(1) / np.sqrt(_np(rv, acc) + t(eps))
        if w is not None:
            scale = scale * _np(w, acc)
        out = (a - _np(rm, acc)[None, :, None]) * scale[None, :, None]
        if b is not None:
            out = out + _np(b, acc)[None, :, None]
    host_view(y)[...] = cast_array(np.asarray(out, dtype=acc.numpy).reshape(y.shape), acc, y.dtype)


def _triton_batch_norm(x, rm, rv, w, b, y, **params) -> None:
    launch_batch_norm(x, rm, rv, w, b, y, **params)


# ---------------------------------------------------------------------------------------------------------
# Oracles (float64), called with the public arguments as NumPy arrays (None for absent tensors)
# ---------------------------------------------------------------------------------------------------------
def _f64(a):
    return None if a is None else np.asarray(a).astype(np.float64)


def _oracle_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, **_):
    x = _f64(input)
    if x.size == 0:
        return x
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    if weight is not None:
        y = y * _f64(weight)
    if bias is not None:
        y = y + _f64(bias)
    return y


def _oracle_rms_norm(input, normalized_shape, weight=None, eps=None, **_):
    x = _f64(input)
    if x.size == 0:
        return x
    if eps is None:
        eps = float(_finfo_eps(T.dtype_from(np.asarray(input).dtype)))
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    y = x / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return y * _f64(weight) if weight is not None else y


def _oracle_group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, **_):
    x = _f64(input)
    if x.size == 0:
        return x
    nb, c = x.shape[0], x.shape[1]
    g = x.reshape(nb, num_groups, -1)
    mean = g.mean(axis=2, keepdims=True)
    var = ((g - mean) ** 2).mean(axis=2, keepdims=True)
    y = ((g - mean) / np.sqrt(var + eps)).reshape(x.shape)
    pshape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * _f64(weight).reshape(pshape)
    if bias is not None:
        y = y + _f64(bias).reshape(pshape)
    return y


def _oracle_batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                       eps=1e-5, **_):
    x = _f64(input)
    if x.size == 0:
        return x
    pshape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    y = (x - _f64(running_mean).reshape(pshape)) / np.sqrt(_f64(running_var).reshape(pshape) + eps)
    if weight is not None:
        y = y * _f64(weight).reshape(pshape)
    if bias is not None:
        y = y + _f64(bias).reshape(pshape)
    return y


# ---------------------------------------------------------------------------------------------------------
# Drivers
# ---------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _finfo_eps(d: DType) -> float:
    import ml_dtypes
    return float(ml_dtypes.finfo(d.numpy).eps)


def _check_float_input(x, fn: str) -> None:
    check(isinstance(x, Tensor), lambda: f"{fn}(): argument 'input' (position 1) must be Tensor, not "
          f"{type(x).__name__}", TypeError)
    check(x.dtype.kind == T.KIND_FLOAT and x.dtype in FLOATS, lambda: f"{fn}: \"{fn}\" not implemented for "
          f"'{dispatch.torch_dtype_name(x.dtype)}' (float16, bfloat16, float32 and float64 inputs)",
          NotImplementedError)


def _param(t, name: str, x: Tensor, fn: str, shape, what: str):
    if t is None:
        return None
    check(isinstance(t, Tensor), lambda: f"{fn}(): argument '{name}' must be Tensor, not {type(t).__name__}",
          TypeError)
    check(t.device == x.device, lambda: f"{fn}: Expected all tensors to be on the same device, but found at least "
          f"two devices, {x.device} and {t.device}!")
    check(t.dtype.kind == T.KIND_FLOAT and t.dtype in FLOATS, lambda: f"{fn}: {name} must be a floating tensor, got "
          f"{t.dtype.name}")
    check(tuple(t.shape) == tuple(shape), lambda: f"{fn}: Expected {name} to be of same shape as {what}, but got "
          f"{name} of shape {list(t.shape)} and {what} = {list(shape)}")
    return t.contiguous()


def _normalized_shape(ns, fn: str) -> tuple[int, ...]:
    check(isinstance(ns, (tuple, list)) or type(ns).__name__ == "Size", lambda: f"{fn}(): argument "
          f"'normalized_shape' (position 2) must be tuple of ints, not {type(ns).__name__}", TypeError)
    for s in ns:
        check(isinstance(s, int) and not isinstance(s, bool), lambda: f"{fn}(): argument 'normalized_shape' must be "
              f"tuple of ints, got {s!r}", TypeError)
    return tuple(int(s) for s in ns)


_ROWS_VALID: set = set()   # argument signatures of layer_norm / rms_norm calls whose checks passed


def _rows_sig(fn: str, x, ns, w, b):
    """(op, dtype/shape/device of input, weight and bias, normalized_shape) when every part is a tensor (or None)
    and ``normalized_shape`` a tuple or list of Python ints; else None (the call is checked in full)."""
    if ns.__class__ is list:
        ns = tuple(ns)
    if not isinstance(ns, tuple) or any(s.__class__ is not int for s in ns):
        return None
    return dispatch.tensor_sig((fn, ns), (x, w, b))


def _rows_driver(rms: bool):
    def driver(rec, args, *, out=None, inplace=None):
        fn = rec.name
        x = args["input"]
        w, b = args.get("weight"), (args.get("bias") if not rms else None)
        # the checks depend on the arguments' signature only: one that passed is not rechecked
        sig = _rows_sig(fn, x, args["normalized_shape"], w, b)
        if sig is not None and sig in _ROWS_VALID:
            ns = sig[1]
            w = w.contiguous() if w is not None else None
            b = b.contiguous() if b is not None else None
        else:
            _check_float_input(x, fn)
            ns = _normalized_shape(args["normalized_shape"], fn)
            k = len(ns)
            check(not rms or k <= x.ndim, lambda: f"{fn}: Input tensor must have at least {k} dimensions, but got "
                  f"{x.ndim}", ValueError)
            check(k >= 1 and x.ndim >= k and tuple(x.shape[x.ndim - k:]) == ns, lambda: f"{fn}: Given "
                  f"normalized_shape={list(ns)}, expected input with shape [*, {', '.join(map(str, ns))}], but got "
                  f"input of size{list(x.shape)}")
            w = _param(args.get("weight"), "weight", x, fn, ns, "normalized_shape")
            b = _param(args.get("bias"), "bias", x, fn, ns, "normalized_shape") if not rms else None
            if sig is not None:
                if len(_ROWS_VALID) >= 1024:
                    _ROWS_VALID.clear()
                _ROWS_VALID.add(sig)
        eps = args.get("eps")
        eps = _finfo_eps(x.dtype) if eps is None else float(eps)
        y = new_empty(x.shape, x.dtype, x.device)
        n = numel(ns)
        if x.numel() == 0:
            return y
        registry.impl(fn, x.device.type)(x.contiguous(), w, b, y, rows=x.numel() // n, n=n, rms=rms, eps=eps)
        return y
    return driver


def _group_norm_driver(rec, args, *, out=None, inplace=None):
    fn = "group_norm"
    x = args["input"]
    _check_float_input(x, fn)
    g = args["num_groups"]
    check(x.ndim >= 2, lambda: f"{fn}: Expected at least 2 dimensions for input tensor but received {x.ndim}")
    c = x.shape[1]
    check(g > 0 and c % g == 0, lambda: f"{fn}: Expected number of channels in input to be divisible by num_groups, "
          f"but got input of shape {list(x.shape)} and num_groups={g}")
    w = _param(args.get("weight"), "weight", x, fn, (c,), "the number of channels")
    b = _param(args.get("bias"), "bias", x, fn, (c,), "the number of channels")
    y = new_empty(x.shape, x.dtype, x.device)
    if x.numel() == 0:
        return y
    hw = numel(x.shape[2:])
    registry.impl(fn, x.device.type)(x.contiguous(), w, b, y, rows=x.shape[0] * g, n=(c // g) * hw, rms=False,
                                     eps=float(args["eps"]), groups=g, cpg=c // g, hw=hw)
    return y


def _batch_norm_driver(rec, args, *, out=None, inplace=None):
    fn = "batch_norm"
    x = args["input"]
    _check_float_input(x, fn)
    check(not args.get("training"), lambda: f"{fn}: training=True (batch statistics, running-stat updates) is not "
          "implemented: nbxtensor is an inference library; pass training=False with running statistics",
          NotImplementedError)
    rm, rv = args["running_mean"], args["running_var"]
    check(rm is not None and rv is not None, f"{fn}: running_mean must be defined in evaluation mode")
    check(x.ndim >= 2, lambda: f"{fn}: expected an input of shape (N, C, *) with at least 2 dims, got "
          f"{list(x.shape)}")
    c = x.shape[1]
    for t, name in ((rm, "running_mean"), (rv, "running_var")):
        check(isinstance(t, Tensor) and t.numel() == c, lambda: f"{fn}: {name} should contain {c} elements not "
              f"{t.numel() if isinstance(t, Tensor) else t!r}")
    rm = _param(rm.reshape(c), "running_mean", x, fn, (c,), "the number of channels")
    rv = _param(rv.reshape(c), "running_var", x, fn, (c,), "the number of channels")
    w = _param(args.get("weight"), "weight", x, fn, (c,), "the number of channels")
    b = _param(args.get("bias"), "bias", x, fn, (c,), "the number of channels")
    y = new_empty(x.shape, x.dtype, x.device)
    if x.numel() == 0:
        return y
    registry.impl(fn, x.device.type)(x.contiguous(), rm, rv, w, b, y, channels=c, spatial=numel(x.shape[2:]),
                                     eps=float(args["eps"]))
    return y


# ---------------------------------------------------------------------------------------------------------
# Costs and records
# ---------------------------------------------------------------------------------------------------------
def _row_length(name: str, a: dict) -> int:
    x = a["input"]
    if name in ("layer_norm", "rms_norm"):
        ns = a["normalized_shape"]
        return numel(ns) if isinstance(ns, (list, tuple)) else int(ns)
    if name == "group_norm":
        return numel(x.shape[1:]) // max(int(a["num_groups"]), 1)
    return 0


def _cost(name: str, flops_per: int):
    """Reads the input and the parameters once and writes the output once; a row longer than the device's
    ``norm_rows`` tile is read twice (statistics, then output)."""
    def cost(*args, **kwargs) -> Cost:
        a = registry.get(name).extra["schema_obj"].bind(args, kwargs, fn=name)
        x = a["input"]
        params = sum(t.numel() * t.dtype.itemsize for k, t in a.items() if isinstance(t, Tensor) and k != "input")
        n = _row_length(name, a)
        reads = 1
        if n and x.numel():
            tile = launch_config("norm_rows", x.device, dtypes=(x.dtype,), rows=max(x.numel() // n, 1), cols=n)
            reads = 1 if n <= tile["BLOCK_N"] else 2
        return Cost(flops=flops_per * x.numel(), bytes_read=reads * x.numel() * x.dtype.itemsize + params,
                    bytes_written=x.numel() * x.dtype.itemsize)
    return cost


def _t(*shape, dtype=T.float32, fill=0.0):
    return lambda dev: new_empty(shape, dtype, dev).fill_(fill)


# Error inputs as data: (label, args builders, kwargs, exception type, message regex[, reason this is an
# nbxtensor limitation where PyTorch computes a result]).
_ERRORS = {
    "layer_norm": [("shape mismatch", (_t(2, 4), [3]), {}, RuntimeError, "expected input with shape"),
                   ("weight shape", (_t(2, 4), [4]), {"weight": _t(3)}, RuntimeError, "same shape"),
                   ("integer input", (_t(2, 4, dtype=T.int32), [4]), {}, NotImplementedError, "not implemented"),
                   ("int normalized_shape", (_t(2, 4), 4), {}, TypeError, "tuple of ints")],
    "rms_norm": [("shape mismatch", (_t(2, 4), [1, 4]), {}, RuntimeError, "expected input with shape"),
                 ("normalized_shape longer than the input", (_t(2, 4), [2, 4, 1]), {}, ValueError, "at least 3 dim"),
                 ("weight shape", (_t(2, 4), [4]), {"weight": _t(4, 1)}, RuntimeError, "same shape")],
    "group_norm": [("channels not divisible", (_t(2, 4, 3), 3), {}, RuntimeError, "divisible by num_groups"),
                   ("1-dim input", (_t(4), 2), {}, RuntimeError, "at least 2 dimensions")],
    "batch_norm": [("no running stats", (_t(2, 3), None, None), {}, RuntimeError, "evaluation mode"),
                   ("running_mean size", (_t(2, 3, 4), _t(2), _t(3, fill=1.0)), {}, RuntimeError,
                    "should contain 3 elements"),
                   ("training", (_t(2, 3), _t(3), _t(3, fill=1.0)), {"training": True}, NotImplementedError,
                    "training", "inference library: no batch statistics (PyTorch computes them)")],
}

_RECORDS = (
    ("layer_norm", "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
     "float eps=1e-05)", _rows_driver(False), _cpu_rows, _triton_rows, _oracle_layer_norm, 8),
    ("rms_norm", "rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None)",
     _rows_driver(True), _cpu_rows, _triton_rows, _oracle_rms_norm, 4),
    ("group_norm", "group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
     "float eps=1e-05)", _group_norm_driver, _cpu_rows, _triton_rows, _oracle_group_norm, 8),
    ("batch_norm", "batch_norm(Tensor input, Tensor? running_mean, Tensor? running_var, Tensor? weight=None, "
     "Tensor? bias=None, bool training=False, float momentum=0.1, float eps=1e-05)", _batch_norm_driver,
     _cpu_batch_norm, _triton_batch_norm, _oracle_batch_norm, 4),
)
_DOCS = {
    "layer_norm": "``(x - mean) / sqrt(var + eps) * weight + bias`` over the trailing ``normalized_shape`` dims "
                  "(biased variance).",
    "rms_norm": "``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape`` dims; ``eps=None`` "
                "is ``finfo(input.dtype).eps``.",
    "group_norm": "Per sample, statistics over each group of ``C / num_groups`` channels (and all spatial "
                  "positions); affine per channel. Input ``(N, C, *)``.",
    "batch_norm": "Inference batch norm with running statistics over channel dim 1; ``training=True`` raises "
                  "NotImplementedError.",
}
for _name, _schema, _driver, _cpu, _tri, _oracle, _flops in _RECORDS:
    _doc = (f"``{_schema}``\n\n    {_DOCS[_name]} Statistics in float32 (float64 for float64 inputs) by a stable "
            "method; the result has the input's dtype. Raises RuntimeError/ValueError/TypeError for shapes and "
            "arguments as PyTorch, NotImplementedError for non-floating inputs. See :mod:`nbxtensor.ops.norm`.\n")
    register(OpRecord(name=_name, family="norm", cpu=_cpu, triton=_tri, oracle=_oracle, cost=_cost(_name, _flops),
                      extra=dict(schema=_schema, driver=_driver, dtypes=FLOATS, method=False,
                                 namespaces=("functional",), errors=_ERRORS[_name], doc=_doc)))
del _name, _schema, _driver, _cpu, _tri, _oracle, _flops, _doc
