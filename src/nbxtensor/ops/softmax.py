"""softmax and log_softmax along one dim (``nbx.softmax``, ``Tensor.softmax``, ``nbx.nn.functional.softmax``).

``softmax(x)_i = exp(x_i - m) / sum_j exp(x_j - m)`` and ``log_softmax(x)_i = x_i - m - log(sum_j exp(x_j - m))``
with ``m`` the row maximum (the usual shift that keeps exp in range). Semantics are PyTorch's: ``dtype=``
converts the input first; the result has the input's (or ``dtype``'s) floating dtype and integer inputs are
refused; a row that is all -inf gives NaN whatever its length (``-inf - (-inf)`` is NaN, as PyTorch computes
it); a +inf in a row gives NaN; NaN propagates. ``nn.functional.softmax(input, dim=None)`` picks PyTorch's
legacy implicit dim (0 for 0-, 1- and 3-dim inputs, else 1) with a warning.

**Kernels**: the scanned dim is canonicalised like a reduction (:func:`~.reduction.canonical3`):
``_softmax_rows_kernel`` when it is the innermost group (tiles ``[BLOCK_M, BLOCK_N]`` along the row) and
``_softmax_cols_kernel`` when it is strided (``[BLOCK_N, BLOCK_I]`` with lanes along the contiguous inner axis).
A row that fits one tile (``N <= BLOCK_N``) is read once and written once. Longer rows (a 151 936-token
vocabulary) take the looped path in the same kernel: pass 1 keeps, per lane, the running maximum and the sum of
exponentials rescaled to it (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018; one
exponential per element, :func:`_lane_online`, and no cross-lane reduction inside the loop), combined across
lanes once per row; pass 2 re-reads the row and writes: two reads and one write, one launch. Config ``CHUNK`` (default 0) keeps pass 1's
states per chunk of consecutive elements instead (:func:`_chunk_online`: one maximum and one rescale per chunk),
``EXP_OUT2`` sets pass 2's exponential (:func:`_exp_shifted`; sm_90 SASS per element with both, bf16 rows of 151936:
pass 1 13.7 -> 9.0, pass 2 13.1 -> 8.9). With a persistent
grid (config ``programs_per_sm``) few rows are in flight, so pass 2 can find its row in L2 (``EVICT``/``EVICT2``
set the loads' and stores' L2 policies; benchmarks/sweep_reduce.py times these settings on the H200). float16
and bfloat16 compute in float32 and round once; float64 computes in float64.

Float semantics on the GPU: ``log(s)`` is libdevice's. The output of the looped path is ``exp(x - m) * (1 /
s)`` with an IEEE reciprocal per row, as PyTorch's CUDA kernel for long rows (cunn_SoftMaxForwardGmem with
``SoftMaxForwardWithMulEpilogue``); one-tile rows divide (IEEE, :func:`~.triton_helpers.div_rn`; Triton's float32
``/`` is the 2-ulp ``div.full.f32``) unless the config sets ``RCP``. The exponentials are ``tl.exp``
(``ex2.approx`` of ``x * log2(e)``), a deliberate fast path (one SFU instruction per element): its relative
error, about ``|x - m| * 2**-24`` plus 2 ulp, stays below float32's rtol (1.3e-6) wherever a probability exceeds
the atol (1e-5, i.e. ``x - m > -11.5``), and the family's tests widen both by the row length
(:func:`~nbxtensor.dtypes.tolerance`), so the tolerance table covers it. Pass 1's sums use the flush-to-zero
form (config ``FAST_EXP``, default on; :func:`_exp_neg_abs`), which changes no sum; the written probabilities
keep subnormals. bfloat16 results are rounded by the hardware's ``cvt.rn.bf16.f32``
(:func:`~.reduction.out_convert`). Checked on the sm_90 code by tests/ops/test_ptx_audit.py.

The ``cpu`` implementation is NumPy in the same dtypes; the oracle is float64.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..runtime.configs import launch_config
from ..runtime.configs import state as config_state
from ..runtime.launcher import Tail, interpreting, launch_tail
from ..runtime.triton_compat import jit, tl
from ..shapes import contiguous_strides, wrap_dim
from ..tensor.core import Tensor, host_view, new_empty
from . import dispatch, registry
from .reduction import (FLOATS, canonical3, cdiv, check_input, collapse_dims, finish_out, launch_quiet, lse_combine,
                        loop_meta, new_out, out_convert, persistent_grid, tmp_like_groups)
from .registry import Cost, OpRecord, register
from .triton_helpers import TL_DTYPES, convert, div_rn, libdevice, maximum_fast, nan_max_fast, rcp_rn

__all__ = ["launch_softmax"]


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@jit
def _exp_neg_abs(d, FTZ: tl.constexpr):
    """``exp(-|d|)`` for pass 1's sums. ``FTZ`` (float32 on the GPU): one ``ex2.approx.ftz.f32`` of
    ``|d| * -log2(e)`` (a single ``MUFU.EX2``, as ops/attention.py's scores); ``tl.exp`` under the IEEE launch
    options is ``ex2.approx.f32``, which ptxas widens with a range test and two predicated multiplies to produce
    subnormal results. These results only feed sums that hold at least exp(0) = 1, or rescale such a sum before
    1 is added to it, so flushing results below ``2**-126`` changes no sum; the written probabilities keep
    ``tl.exp``."""
    if FTZ:
        r = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [tl.abs(d) * -1.4426950408889634],
                                      dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = tl.exp(-tl.abs(d))
    return r


@jit
def _fold_k(m):
    """The multiplier ``k`` of the folded exponentials ``ex2(fma(x, k, -mk))``, ``mk = m * k`` rounded, for a row
    (chunk) maximum ``m``: log2(e) for ``|m| <= 2**30``, else 1. The fold computes ``2**((x - m) k + r)`` with
    ``r = m k - mk`` (:func:`_fold_res`, exact by an FMA; ``|r| <= ulp(mk) / 2 <= 64`` here): the same factor
    ``2**r`` for the whole row (chunk), which the callers cancel or divide out (softmax's ``e / s`` cancels it;
    log_softmax adds ``r ln 2``; the looped passes rescale per chunk and per row). Beyond ``2**30`` ``m * log2(e)``
    would make ``|r|`` overflow the exponent range (and past 2.35e38 the product itself): the maximum of 16-bit
    values there (bfloat16 only) is at least ``2**23`` above every other value of its row, so ``2**(x - m)`` and
    ``exp(x - m)`` are both 0 for those and 1 for ``x == m``, and ``k = 1`` makes ``mk`` exact. The hosts take
    the fold for 16-bit inputs and outputs only."""
    return tl.where(tl.abs(m) <= 1073741824.0, 1.4426950408889634, 1.0)


@jit
def _fold_res(m, k):
    """``r = m * k - round(m * k)`` exactly (one FMA on the GPU; see :func:`_fold_k`)."""
    return tl.fma(m, k, -(m * k))


@jit
def _exp_shifted(x, m, MODE: tl.constexpr, ASM: tl.constexpr):
    """``exp(x - m)`` for the one-tile path's written values (config ``EXP_OUT``; ``m`` broadcast to ``x``).

    MODE 0 (default): ``tl.exp(x - m)`` (``ex2.approx.f32`` of ``(x - m) * log2(e)``; ptxas adds a range test
    and two predicated multiplies to keep subnormal results). MODE 1: ``ex2.approx.ftz.f32`` of ``(x - m) *
    log2(e)``, one ``MUFU.EX2``: results below ``2**-126`` (``x - m < -87.3``) flush to 0, an absolute change
    below 1.2e-38. MODE 2: ``ex2.approx.ftz.f32`` of ``fma(x, k, -m * k)`` with the row's ``k`` (:func:`_fold_k`:
    log2(e), folded: one ``FFMA`` + one ``MUFU.EX2``); every value of a row carries the same factor ``2**r``
    (``r`` the rounding of ``m * k``), which the callers cancel or divide out; the host takes it for 16-bit inputs
    and outputs only. ASM False (the
    interpreter, float64): the same arithmetic through ``tl.exp2`` (no flush), so the interpreter tier checks the
    folding."""
    if MODE == 0:
        r = tl.exp(x - m)
    else:
        if MODE == 1:
            a = (x - m) * 1.4426950408889634
        else:
            k = _fold_k(m)
            a = x * k - m * k
        if ASM:
            r = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [a], dtype=tl.float32, is_pure=True,
                                          pack=1)
        else:
            r = tl.exp2(a)
    return r


@jit
def _lane_online(m, s, x, FTZ: tl.constexpr):
    """Fold one element per lane (``x``; masked lanes -inf) into the lanes' running maximum ``m`` and sum ``s``
    of ``exp(. - m)``, with one exponential per element (the online normaliser of Milakov & Gimelshein, kept
    per lane so the loop has no cross-lane reduction; PyTorch's cunn_SoftMaxForwardGmem keeps per-thread pairs
    too).

    With ``d = x - m``: a new maximum (``d > 0``) rescales the sum by ``exp(m - x) = exp(-|d|)`` and adds
    ``exp(0)``; otherwise the element adds ``exp(x - m) = exp(-|d|)``. Lanes start at the lowest finite value
    (not -inf), so ``d`` of a -inf element is -inf, never ``-inf - -inf``: it adds 0 and an all -inf lane stays
    (lowest, 0). NaN propagates through ``d`` and the maximum; a +inf makes the lane's maximum +inf, and
    :func:`_lanes_final` then makes its sum NaN (``exp(inf - inf)``, as PyTorch's ``sum(exp(x - max))``)."""
    d = x - m
    e = _exp_neg_abs(d, FTZ)
    s = tl.where(d > 0.0, s * e + 1.0, s + e)
    return maximum_fast(m, x), s


@jit
def _lanes_final(m, s, AXIS: tl.constexpr):
    """The row's (max, sum) from the lanes' states (:func:`_lane_online`): a +inf maximum makes a lane's sum
    NaN, then the lanes combine by :func:`~.reduction.lse_combine`. An all -inf row ends at (lowest, 0), whose
    output pass gives NaN (``exp(-inf - lowest) * (1 / 0)`` and ``-inf - lowest - log(0)``), as PyTorch."""
    s = tl.where(m == float("inf"), float("nan"), s)
    return tl.reduce((m, s), AXIS, lse_combine)


@jit
def _chunk_online(m, s, x, FTZ: tl.constexpr, FOLD: tl.constexpr):
    """Fold a ``[BLOCK_M, NCH, CHUNK]`` tile into per-chunk states ``m``, ``s`` (``[BLOCK_M, NCH]``): the chunk's
    maximum (NaN-propagating, within one thread when a chunk is one thread's vector), the state rescaled once by
    ``exp(m - m')`` and the chunk's ``exp(x - m')`` added, ``m' = max(m, max(chunk))`` (the online normaliser of
    Milakov & Gimelshein applied per chunk). Both arguments of the exponentials are <= 0 or NaN, so
    :func:`_exp_neg_abs` serves: a -inf element adds 0; states start at the lowest finite value, so an all -inf
    chunk leaves (lowest, 0); NaN propagates through the maximum into the sum; a +inf maximum gives the NaN sum
    of :func:`_lanes_final`. FOLD (16-bit results only): the elements' exponentials as ``ex2(x * log2(e) - c)``
    with ``c = max(m' * k, lowest)`` per chunk and :func:`_fold_k`'s ``k`` (log2(e) unless ``|m'| > 2**30``;
    one FFMA per element; the chunk's factor ``2**r``, ``r = m' k - c``, divided out of its sum once per chunk;
    the clamp keeps a chunk still at (lowest, 0) from giving ``-inf - -inf``)."""
    mn = maximum_fast(m, nan_max_fast(x, 2))
    if FOLD:
        k = _fold_k(mn)
        c = maximum_fast(mn * k, -3.4028234663852886e38)
        a = x * k[:, :, None] - c[:, :, None]
        if FTZ:
            e = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [a], dtype=tl.float32, is_pure=True,
                                          pack=1)
        else:
            e = tl.exp2(a)
        # the chunk's exponentials carry 2**r (r = mn k - c, exact: _fold_k); the chunk sum divides it out
        s = s * _exp_neg_abs(m - mn, FTZ) + tl.sum(e, 2) * tl.exp2(-tl.fma(mn, k, -c))
    else:
        e = _exp_neg_abs(x - mn[:, :, None], FTZ)
        s = s * _exp_neg_abs(m - mn, FTZ) + tl.sum(e, 2)
    return mn, s


@jit
def _softmax_rows_kernel(x_ptr, y_ptr, O, N, NBLK, sxo, sxn, syo, syn, LOG: tl.constexpr, ONE_TILE: tl.constexpr,
                         RCP: tl.constexpr, ACC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         LOOP_STAGES: tl.constexpr, ROW_STAGES: tl.constexpr, EVICT: tl.constexpr,
                         EVICT2: tl.constexpr, HW_CVT: tl.constexpr, FTZ: tl.constexpr,
                         LOWEST: tl.constexpr, EVEN: tl.constexpr = False, EXP_OUT: tl.constexpr = 0,
                         CHUNK: tl.constexpr = 0, EXP_OUT2: tl.constexpr = 0, FULL: tl.constexpr = False):
    """softmax of ``x[o, n]`` over n (innermost), BLOCK_M rows per step; program ``pid`` takes the row blocks
    ``pid, pid + grid, ...`` of NBLK (one each unless the grid is persistent).

    One tile (N <= BLOCK_N): read once, max and sum across the tile, write. EVEN (the host sets it only when
    ``N == BLOCK_N`` and BLOCK_M divides O): no masks on the loads, the sum and the stores. EXP_OUT: the form
    of ``exp(x - m)`` (:func:`_exp_shifted`). Looped: pass 1 keeps per-lane
    (max, sum) states (:func:`_lane_online`) combined once per row (:func:`_lanes_final`), pass 2
    re-reads and writes. EVICT is the L2 policy of pass 1's loads (``evict_last`` keeps a row in L2 for pass
    2), EVICT2 of pass 2's loads and of the stores. RCP: multiply by the IEEE reciprocal of the sum (PyTorch's
    ``SoftMaxForwardWithMulEpilogue``) instead of an IEEE division per element. CHUNK (looped, default 0): pass 1
    folds CHUNK consecutive elements per state at once (:func:`_chunk_online`: one maximum and one rescale per
    chunk instead of a compare, select and two adds per element); with FULL (the host sets it only when BLOCK_M
    divides O) its whole tiles load unmasked. EXP_OUT2 (looped, with RCP): pass 2's ``exp(x - m)`` by
    :func:`_exp_shifted` of that mode (0: ``tl.exp``); mode 2 also folds log2(e) in CHUNK's pass 1."""
    pid = tl.program_id(0)
    lanes = tl.arange(0, BLOCK_N).to(tl.int64)
    OUT: tl.constexpr = y_ptr.dtype.element_ty
    for blk in tl.range(pid, NBLK, tl.num_programs(0), num_stages=ROW_STAGES):
        rows = blk * tl.full([BLOCK_M], BLOCK_M, tl.int64) + tl.arange(0, BLOCK_M)  # int64 (blk may be a Python int)
        row_ok = rows < O
        xrow = x_ptr + rows[:, None] * sxo
        yrow = y_ptr + rows[:, None] * syo
        if ONE_TILE:
            msk = row_ok[:, None] & (lanes < N)[None, :]
            if EVEN:
                x = convert(tl.load(xrow + lanes[None, :] * sxn, eviction_policy=EVICT), ACC)
            else:
                x = convert(tl.load(xrow + lanes[None, :] * sxn, mask=msk, other=float("-inf"),
                                    eviction_policy=EVICT), ACC)
            m = nan_max_fast(x, 1)
            e = _exp_shifted(x, m[:, None], EXP_OUT, HW_CVT and ACC == tl.float32)  # the fast path bounded above
            if EVEN:
                s = tl.sum(e, 1)
            else:
                s = tl.sum(tl.where(msk, e, 0.0), 1)
            if LOG:
                ls = libdevice.log(s)
                if EXP_OUT == 2:  # the fold's row factor 2**r (_fold_k) is in s: take it out of the logarithm
                    ls = ls - _fold_res(m, _fold_k(m)) * 0.6931471805599453
                y = x - m[:, None] - ls[:, None]
            elif RCP:
                y = e * rcp_rn(s)[:, None]
            else:
                y = div_rn(e, s[:, None])
            if EVEN:
                tl.store(yrow + lanes[None, :] * syn, out_convert(y, OUT, HW_CVT), eviction_policy=EVICT2)
            else:
                tl.store(yrow + lanes[None, :] * syn, out_convert(y, OUT, HW_CVT), mask=msk, eviction_policy=EVICT2)
        elif CHUNK > 0:
            # states per chunk of CHUNK consecutive elements (one thread's vector when CHUNK * itemsize is 16 B)
            NCH: tl.constexpr = BLOCK_N // CHUNK
            off3 = (tl.arange(0, NCH).to(tl.int64) * CHUNK)[None, :, None] + tl.arange(0, CHUNK)[None, None, :]
            m = tl.full([BLOCK_M, NCH], LOWEST, ACC)
            s = tl.zeros([BLOCK_M, NCH], ACC)
            xrow3 = x_ptr + rows[:, None, None] * sxo
            fold: tl.constexpr = EXP_OUT2 == 2
            if FULL:  # BLOCK_M divides the rows: whole tiles unmasked, then the row's tail
                nfull = (N // BLOCK_N) * BLOCK_N
                for n0 in tl.range(0, nfull, BLOCK_N, num_stages=LOOP_STAGES):
                    x = convert(tl.load(xrow3 + (n0 + off3) * sxn, eviction_policy=EVICT), ACC)
                    m, s = _chunk_online(m, s, x, FTZ, fold)
                if nfull < N:
                    n = nfull + off3
                    x = convert(tl.load(xrow3 + n * sxn, mask=n < N, other=float("-inf"), eviction_policy=EVICT),
                                ACC)
                    m, s = _chunk_online(m, s, x, FTZ, fold)
            else:
                for n0 in tl.range(0, N, BLOCK_N, num_stages=LOOP_STAGES):
                    n = n0 + off3
                    msk = row_ok[:, None, None] & (n < N)
                    x = convert(tl.load(xrow3 + n * sxn, mask=msk, other=float("-inf"), eviction_policy=EVICT), ACC)
                    m, s = _chunk_online(m, s, x, FTZ, fold)
            m, s = _lanes_final(m, s, 1)
            _softmax_row_out(x_ptr, y_ptr, xrow, yrow, row_ok, lanes, m, s, N, sxn, syn, LOG, RCP, ACC, BLOCK_N,
                             LOOP_STAGES, EVICT2, HW_CVT, EXP_OUT2, FULL)
        else:
            m = tl.full([BLOCK_M, BLOCK_N], LOWEST, ACC)
            s = tl.zeros([BLOCK_M, BLOCK_N], ACC)
            for n0 in tl.range(0, N, BLOCK_N, num_stages=LOOP_STAGES):
                n = n0 + lanes
                msk = row_ok[:, None] & (n < N)[None, :]
                x = convert(tl.load(xrow + n[None, :] * sxn, mask=msk, other=float("-inf"), eviction_policy=EVICT),
                            ACC)
                m, s = _lane_online(m, s, x, FTZ)
            m, s = _lanes_final(m, s, 1)
            _softmax_row_out(x_ptr, y_ptr, xrow, yrow, row_ok, lanes, m, s, N, sxn, syn, LOG, RCP, ACC, BLOCK_N,
                             LOOP_STAGES, EVICT2, HW_CVT, EXP_OUT2, FULL)


@jit
def _softmax_row_out(x_ptr, y_ptr, xrow, yrow, row_ok, lanes, m, s, N, sxn, syn, LOG: tl.constexpr,
                     RCP: tl.constexpr, ACC: tl.constexpr, BLOCK_N: tl.constexpr, LOOP_STAGES: tl.constexpr,
                     EVICT2: tl.constexpr, HW_CVT: tl.constexpr, EXP_OUT2: tl.constexpr, FULL: tl.constexpr):
    """The looped path's pass 2: re-read the rows and write ``exp(x - m) / s`` (or ``x - m - log(s)``); FULL
    (BLOCK_M divides the rows): whole tiles unmasked, then the row's tail."""
    ls = libdevice.log(s)
    inv = rcp_rn(s)
    if EXP_OUT2 == 2 and not LOG:  # pass 2's folded exponentials carry the row's 2**r (_fold_k): divide it out
        inv = inv * tl.exp2(-_fold_res(m, _fold_k(m)))
    if FULL:
        nfull = (N // BLOCK_N) * BLOCK_N
        for n0 in tl.range(0, nfull, BLOCK_N, num_stages=LOOP_STAGES):
            _softmax_out_tile(y_ptr, xrow, yrow, n0 + lanes, None, m, s, ls, inv, sxn, syn, LOG, RCP, ACC, EVICT2,
                              HW_CVT, EXP_OUT2)
        if nfull < N:
            n = nfull + lanes
            _softmax_out_tile(y_ptr, xrow, yrow, n, row_ok[:, None] & (n < N)[None, :], m, s, ls, inv, sxn, syn,
                              LOG, RCP, ACC, EVICT2, HW_CVT, EXP_OUT2)
    else:
        for n0 in tl.range(0, N, BLOCK_N, num_stages=LOOP_STAGES):
            n = n0 + lanes
            _softmax_out_tile(y_ptr, xrow, yrow, n, row_ok[:, None] & (n < N)[None, :], m, s, ls, inv, sxn, syn,
                              LOG, RCP, ACC, EVICT2, HW_CVT, EXP_OUT2)


@jit
def _softmax_out_tile(y_ptr, xrow, yrow, n, msk, m, s, ls, inv, sxn, syn, LOG: tl.constexpr, RCP: tl.constexpr,
                      ACC: tl.constexpr, EVICT2: tl.constexpr, HW_CVT: tl.constexpr, EXP_OUT2: tl.constexpr):
    OUT: tl.constexpr = y_ptr.dtype.element_ty
    x = convert(tl.load(xrow + n[None, :] * sxn, mask=msk, eviction_policy=EVICT2), ACC)
    if LOG:
        y = x - m[:, None] - ls[:, None]
    elif RCP:
        if EXP_OUT2 == 0:
            y = tl.exp(x - m[:, None]) * inv[:, None]
        else:
            y = _exp_shifted(x, m[:, None], EXP_OUT2, HW_CVT and ACC == tl.float32) * inv[:, None]
    else:
        y = div_rn(tl.exp(x - m[:, None]), s[:, None])
    tl.store(yrow + n[None, :] * syn, out_convert(y, OUT, HW_CVT), mask=msk, eviction_policy=EVICT2)


@jit
def _softmax_cols_kernel(x_ptr, y_ptr, I, N, sxo, sxn, sxi, syo, syn, syi, LOG: tl.constexpr,
                         ONE_TILE: tl.constexpr, RCP: tl.constexpr, ACC: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_I: tl.constexpr, LOOP_STAGES: tl.constexpr, EVICT: tl.constexpr,
                         EVICT2: tl.constexpr, HW_CVT: tl.constexpr, FTZ: tl.constexpr,
                         LOWEST: tl.constexpr):
    """softmax of ``x[o, n, i]`` over n (strided) for one o and BLOCK_I consecutive i: tiles ``[BLOCK_N,
    BLOCK_I]`` with lanes along the contiguous i; the looped path keeps per-lane states as the rows kernel."""
    pid = tl.program_id(0)
    nib = tl.cdiv(I, BLOCK_I)
    o = (pid // nib).to(tl.int64)
    cols = (pid % nib).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    col_ok = cols < I
    lanes = tl.arange(0, BLOCK_N).to(tl.int64)
    xcol = x_ptr + o * sxo + cols[None, :] * sxi
    ycol = y_ptr + o * syo + cols[None, :] * syi
    OUT: tl.constexpr = y_ptr.dtype.element_ty
    if ONE_TILE:
        msk = (lanes < N)[:, None] & col_ok[None, :]
        x = convert(tl.load(xcol + lanes[:, None] * sxn, mask=msk, other=float("-inf"), eviction_policy=EVICT), ACC)
        m = nan_max_fast(x, 0)
        e = tl.exp(x - m[None, :])
        s = tl.sum(tl.where(msk, e, 0.0), 0)
        if LOG:
            y = x - m[None, :] - libdevice.log(s)[None, :]
        elif RCP:
            y = e * rcp_rn(s)[None, :]
        else:
            y = div_rn(e, s[None, :])
        tl.store(ycol + lanes[:, None] * syn, out_convert(y, OUT, HW_CVT), mask=msk, eviction_policy=EVICT2)
    else:
        m = tl.full([BLOCK_N, BLOCK_I], LOWEST, ACC)
        s = tl.zeros([BLOCK_N, BLOCK_I], ACC)
        for n0 in tl.range(0, N, BLOCK_N, num_stages=LOOP_STAGES):
            n = n0 + lanes
            msk = (n < N)[:, None] & col_ok[None, :]
            x = convert(tl.load(xcol + n[:, None] * sxn, mask=msk, other=float("-inf"), eviction_policy=EVICT), ACC)
            m, s = _lane_online(m, s, x, FTZ)
        m, s = _lanes_final(m, s, 0)
        ls = libdevice.log(s)
        inv = rcp_rn(s)
        for n0 in tl.range(0, N, BLOCK_N, num_stages=LOOP_STAGES):
            n = n0 + lanes
            msk = (n < N)[:, None] & col_ok[None, :]
            x = convert(tl.load(xcol + n[:, None] * sxn, mask=msk, eviction_policy=EVICT2), ACC)
            if LOG:
                y = x - m[None, :] - ls[None, :]
            elif RCP:
                y = tl.exp(x - m[None, :]) * inv[None, :]
            else:
                y = div_rn(tl.exp(x - m[None, :]), s[None, :])
            tl.store(ycol + n[:, None] * syn, out_convert(y, OUT, HW_CVT), mask=msk, eviction_policy=EVICT2)


def _meta(cfg: dict, one_tile: bool, acc) -> dict:
    """Launch keywords from a softmax config: the loop settings (:func:`~.reduction.loop_meta`), ``EVICT2``,
    ``RCP`` (default: multiply by the reciprocal on the looped path, divide on one tile), ``FAST_EXP`` (default
    on: :func:`_exp_sum`'s single ``ex2.approx.ftz`` in the looped path's sums, float32 on the GPU) and the
    hardware bfloat16 conversion on compiled tiers. ``EVEN`` and ``EXP_OUT`` (default off, 0) are settled by
    :func:`_one_tile_meta` (rows kernel), ``CHUNK`` and ``EXP_OUT2`` by :func:`_looped_meta`, and dropped here."""
    cfg = {k: v for k, v in cfg.items() if k not in ("EVEN", "EXP_OUT", "CHUNK", "EXP_OUT2")}
    meta = loop_meta(cfg)
    meta["EVICT2"] = str(meta.get("EVICT2") or "")
    meta["RCP"] = bool(meta.get("RCP", not one_tile))
    meta["FTZ"] = bool(meta.pop("FAST_EXP", True)) and not interpreting() and acc == tl.float32
    meta["HW_CVT"] = not interpreting()
    meta["LOWEST"] = float(np.finfo(np.float64 if acc == tl.float64 else np.float32).min)
    return meta


def _one_tile_meta(cfg: dict, one_tile: bool, O: int, N: int, out_dtype) -> dict:
    """The rows kernel's one-tile settings from its config: ``EVEN`` (config ``EVEN``: unmasked loads, sum and
    stores, taken only when the row is exactly one tile and BLOCK_M divides the rows) and ``EXP_OUT`` (0, 1 or 2:
    :func:`_exp_shifted`; 2, the folded log2(e), only for float16/bfloat16 results, else 1)."""
    even = bool(cfg.get("EVEN", False)) and one_tile and N == cfg["BLOCK_N"] and O % cfg["BLOCK_M"] == 0
    mode = int(cfg.get("EXP_OUT", 0)) if one_tile else 0
    check(mode in (0, 1, 2), lambda: f"softmax: config EXP_OUT expected 0, 1 or 2, got {mode}", ValueError)
    if mode == 2 and out_dtype not in (T.float16, T.bfloat16):
        mode = 1
    return dict(EVEN=even, EXP_OUT=mode)


def _looped_meta(cfg: dict, one_tile: bool, rows: int, out_dtype) -> dict:
    """The rows kernel's looped-path settings from its config (default 0, the per-lane loop): ``CHUNK`` (a power
    of two dividing ``BLOCK_N``: pass 1's states per chunk, :func:`_chunk_online`) and ``EXP_OUT2`` (0, 1 or 2:
    pass 2's exponential, :func:`_exp_shifted`; 2 only for float16/bfloat16 results, else 1; taken with the
    reciprocal, ``RCP``, the looped default), and ``FULL`` (CHUNK's unmasked whole tiles) where BLOCK_M divides
    ``rows``. All off on one tile."""
    if one_tile:
        return dict(CHUNK=0, EXP_OUT2=0, FULL=False)
    chunk, mode = int(cfg.get("CHUNK", 0)), int(cfg.get("EXP_OUT2", 0))
    check(chunk == 0 or (chunk & (chunk - 1) == 0 and cfg["BLOCK_N"] % chunk == 0), lambda: "softmax: config CHUNK "
          f"expected 0 or a power of two dividing BLOCK_N = {cfg['BLOCK_N']}, got {chunk}", ValueError)
    check(mode in (0, 1, 2), lambda: f"softmax: config EXP_OUT2 expected 0, 1 or 2, got {mode}", ValueError)
    if mode == 2 and out_dtype not in (T.float16, T.bfloat16):
        mode = 1
    return dict(CHUNK=chunk, EXP_OUT2=mode, FULL=chunk > 0 and rows % cfg["BLOCK_M"] == 0)


def launch_softmax(x: Tensor, dim: int, y: Tensor, log: bool) -> None:
    """softmax (``log=False``) or log_softmax of ``x`` along ``dim`` into ``y`` (x's shape, any strides).

    Kernel, grid, sizes, strides and keywords are planned once per (layouts of ``x`` and ``y``, dim, device,
    config state) when neither operand needs a copy."""
    key = (x._dtype, x._shape, x._stride, y._dtype, y._shape, y._stride, dim, log, x._storage.device, config_state(),
           launch_config)
    hit = _PLANS.get(key)
    if hit is not None:
        if hit[4] is not None:   # CUDA: the launcher keys the planned tail by identity (no keyword hashing)
            launch_tail(hit[0], hit[1], (x, y), hit[4])
        else:
            launch_quiet(hit[0], hit[1], x, y, *hit[2], **hit[3])
        return
    flags = [d == dim for d in range(x.ndim)]
    can = canonical3(x.shape, x.stride(), flags)
    plannable = can is not None
    if can is None:
        x = x.contiguous()
        can = canonical3(x.shape, x.stride(), flags)
    (O, N, I), (sxo, sxn, sxi), groups = can
    st = tuple(collapse_dims(y.shape, y.stride(), g) for g in groups)
    ycopy = None
    if None in st:
        ycopy, y = y, tmp_like_groups(y, groups)
        st = tuple(collapse_dims(y.shape, y.stride(), g) for g in groups)
    acc = TL_DTYPES["float64" if x.dtype is T.float64 else "float32"]
    if I == 1:
        cfg = launch_config("softmax_rows", x.device, dtypes=(x.dtype,), rows=O, cols=N)
        one = N <= cfg["BLOCK_N"]
        nblk = cdiv(O, cfg["BLOCK_M"])
        grid = persistent_grid(nblk, cfg, x.device)
        meta = _meta(cfg, one, acc)
        # the row loop is pipelined only on one tile (the looped path pipelines its inner loops)
        meta["ROW_STAGES"] = meta["LOOP_STAGES"] if one and grid < nblk else None
        fold_dt = y.dtype if x.dtype is y.dtype else T.float32  # the folds: 16-bit inputs and outputs (_fold_k)
        meta.update(_one_tile_meta(cfg, one, O, N, fold_dt))
        meta.update(_looped_meta(cfg, one, O, fold_dt))
        plan = (_softmax_rows_kernel, (grid,), (O, N, nblk, sxo, sxn, st[0], st[1]),
                dict(LOG=log, ONE_TILE=one, ACC=acc, **meta))
    else:
        cfg = launch_config("softmax_cols", x.device, dtypes=(x.dtype,), rows=N, cols=I)
        one = N <= cfg["BLOCK_N"]
        cfg.pop("programs_per_sm", None)
        plan = (_softmax_cols_kernel, (O * cdiv(I, cfg["BLOCK_I"]),), (I, N, sxo, sxn, sxi, st[0], st[1], st[2]),
                dict(LOG=log, ONE_TILE=one, ACC=acc, **_meta(cfg, one, acc)))
    if plannable and ycopy is None:
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        _PLANS[key] = (*plan, Tail(plan[2], plan[3]) if x._storage.device.type == "cuda" else None)
    launch_quiet(plan[0], plan[1], x, y, *plan[2], **plan[3])
    if ycopy is not None:
        ycopy.copy_(y)


_PLANS: dict = {}


# ---------------------------------------------------------------------------------------------------------
# CPU implementation and oracle
# ---------------------------------------------------------------------------------------------------------
def _cpu_softmax(x: Tensor, dim: int, y: Tensor, *, log: bool) -> None:
    acc = T.float64 if x.dtype is T.float64 else T.float32
    a = host_view(x)
    a = cast_array(a, x.dtype, acc) if x.dtype is not acc else np.asarray(a)
    ax = dim if a.ndim else None
    with np.errstate(all="ignore"):
        m = np.max(a, axis=ax, keepdims=True)
        sh = a - m
        e = np.exp(sh)
        s = np.sum(e, axis=ax, keepdims=True)
        r = sh - np.log(s) if log else e / s
    host_view(y)[...] = cast_array(np.asarray(r, dtype=acc.numpy), acc, y.dtype)


def _oracle(log: bool):
    def oracle(a: np.ndarray, dim=None, dtype=None, **params) -> np.ndarray:
        x = np.asarray(a)
        if dtype is not None:
            x = cast_array(x, T.dtype_from(x.dtype), T.dtype_from(dtype))
        x = x.astype(np.float64)
        if x.size == 0:
            return x
        ax = wrap_dim(dim, x.ndim) if x.ndim else None
        with np.errstate(all="ignore"):
            m = np.max(x, axis=ax, keepdims=True)
            sh = x - m  # (x - (m + log s) loses log s next to a maximum of 1e38: shift first, then divide)
            s = np.sum(np.exp(sh), axis=ax, keepdims=True)
            return sh - np.log(s) if log else np.exp(sh) / s
    return oracle


# ---------------------------------------------------------------------------------------------------------
# Driver and records
# ---------------------------------------------------------------------------------------------------------
def _implicit_dim(ndim: int, fn: str) -> int:
    warnings.warn(f"Implicit dimension choice for {fn} has been deprecated. Change the call to include dim=X as an "
                  "argument.", UserWarning, stacklevel=4)
    return 0 if ndim in (0, 1, 3) else 1


def _driver(rec, args, *, out=None, inplace=None):
    fn = rec.name
    log = fn == "log_softmax"
    x = args["input"]
    check_input(x, fn)
    dim = args.get("dim")
    if dim is None:  # only nn.functional's signature lets dim be None
        dim = _implicit_dim(x.ndim, fn)
    dim = wrap_dim(dim, x.ndim, fn=fn)
    dt = args.get("dtype")
    res = dt if dt is not None else x.dtype
    check(res.kind == T.KIND_FLOAT, lambda: f"{fn}: \"{fn}_lastdim_kernel_impl\" not implemented for "
          f"'{dispatch.torch_dtype_name(res)}' (floating-point results only; pass dtype=)", NotImplementedError)
    o, work = new_out(out, x.shape, res, x.device, fn, exact=True)
    dispatch.check_no_partial_overlap(o, x, fn)
    if x.numel() == 0:
        return o
    xin = x if res is x.dtype or (res is T.float32 and x.dtype in (T.float16, T.bfloat16)) else x.to(res)
    registry.impl(fn, x.device.type)(xin, dim, work, log=log)
    return finish_out(o, work)


def _passes(x: Tensor, dim: int) -> int:
    """Reads of the input per launch: 1 when a row fits the arch's tile, 2 on the looped path."""
    if x.ndim == 0 or x.numel() == 0:
        return 1
    can = canonical3(x.shape, x.stride(), [d == dim for d in range(x.ndim)]) or \
        canonical3(x.shape, contiguous_strides(x.shape), [d == dim for d in range(x.ndim)])
    (O, N, I), _, _ = can
    if I == 1:
        block = launch_config("softmax_rows", x.device, dtypes=(x.dtype,), rows=O, cols=N)["BLOCK_N"]
    else:
        block = launch_config("softmax_cols", x.device, dtypes=(x.dtype,), rows=N, cols=I)["BLOCK_N"]
    return 1 if N <= block else 2


def _cost(name: str):
    """One read and one write of the tensor when a row fits one tile of the device's config; a longer row is
    read twice (the looped path). Flops: max, subtract, exp, sum, divide per element."""
    def cost(*args, **kwargs) -> Cost:
        a = registry.get(name).extra["schema_obj"].bind(args, kwargs, fn=name)
        x = a["input"]
        res = a.get("dtype") or x.dtype
        reads = _passes(x, wrap_dim(a["dim"], x.ndim, fn=name))
        return Cost(flops=5 * x.numel(), bytes_read=reads * x.numel() * x.dtype.itemsize,
                    bytes_written=x.numel() * res.itemsize)
    return cost


def _cpu(x, dim, y, *, log):
    _cpu_softmax(x, dim, y, log=log)


def _triton(x, dim, y, *, log):
    launch_softmax(x, dim, y, log)


def _t(*shape, dtype=T.float32):
    return lambda dev: new_empty(shape, dtype, dev).fill_(0)


# Error inputs as data: (label, args builders, kwargs, exception type, message regex).
_ERRORS = [("integer input", (_t(2, 3, dtype=T.int64),), {"dim": 1}, NotImplementedError, "not implemented"),
           ("dim out of range", (_t(2, 3),), {"dim": 2}, IndexError, "out of range"),
           ("dim missing", (_t(2, 3),), {}, TypeError, "missing required argument 'dim'"),
           ("out dtype", (_t(2, 3),), {"dim": 1, "out": _t(2, 3, dtype=T.float64)}, RuntimeError, "dtype")]

for _name in ("softmax", "log_softmax"):
    _rec = OpRecord(name=_name, family="softmax", cpu=_cpu, triton=_triton, oracle=_oracle(_name == "log_softmax"),
                    cost=_cost(_name),
                    extra=dict(schema=f"{_name}(Tensor input, int dim, dtype? dtype=None, *, Tensor? out=None)",
                               driver=_driver, dtypes=FLOATS, errors=_ERRORS,
                               doc=f"``{_name}(input, dim, dtype=None)`` along ``dim`` (nn.functional: ``dim=None`` "
                                   "picks PyTorch's legacy implicit dim with a warning). The result has the input's "
                                   "floating dtype or ``dtype``; an all -inf row gives NaN. Raises IndexError (dim), "
                                   "NotImplementedError (integer results). Kernels: :mod:`nbxtensor.ops.softmax`.",
                               namespace_schemas={"functional": f"{_name}(Tensor input, int? dim=None, "
                                                                f"int _stacklevel=3, dtype? dtype=None)"}))
    register(_rec)
del _name, _rec
